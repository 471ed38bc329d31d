"""annotune's Python API: the commands as functions, for scripts and notebooks.

Every function takes the source first and everything else by keyword, returns the typed
record the CLI prints (the CLI is a thin layer over these), prints nothing, and reports
progress through callbacks. Bad input raises `AnnotuneError` (located: `.location` is the
FILE:LINE:COL when there is one; `str(error)` the message); Ctrl-C raises KeyboardInterrupt,
after a tune has kept what it measured. The guide's "Python API" page shows each one.

Each function lives in a module of its own, imported when it is first used (`annotune.tune`
reaches the search and scikit-learn, `annotune.build` must not), so `import annotune` stays
cheap.
"""
