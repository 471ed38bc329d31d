"""Results stage: the SQLite store of every measurement (studies, resume), which study is a
source file's (`studies`), and the recorded files others share (T4 results, `t4`; Kernel Tuner
caches, read by `replay`)."""
