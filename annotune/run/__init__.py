"""Run stage: measure built variants (a program's process, one kernel launched in process) on
the device at hand, and name that device."""
