"""Results stage: the SQLite store of every measurement (studies, resume), and the recorded
files others share (T4 results, Kernel Tuner caches)."""
