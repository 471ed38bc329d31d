"""Declarations for files that must not be edited: `annotune.toml` or `[tool.annotune]`.

    # annotune.toml, beside the sources or in a parent directory
    [[file]]
    path = "polybench/2mm.cu"          # relative to this config file, as are the paths below
    include = ["common"]               # extra include directories (libclang's and the compiler's)
    compile = "nvcc -O3 -Icommon {source} -o {output}"   # optional: a preset name or a template
    defines = ["LARGE_DATASET", "ALPHA=2"]   # optional: -D flags added to compile (a template)
    run_dir = "data"                   # optional: where the program runs
    time_regex = 'took ([0-9.]+) s'    # optional: the time, read from the output
    time_unit = "s"                    # of what time_regex captures (default "ms")
    constraints = ["DIM_THREAD_BLOCK_X * DIM_THREAD_BLOCK_Y <= 1024"]
    [file.params]
    DIM_THREAD_BLOCK_X = "pow2(1, 1024)"                       # default: the #define's value
    DIM_THREAD_BLOCK_Y = { domain = "range(1, 32)", default = 8 }
    THREADS = { domain = "values(1, 2, 4)", default = 1 }     # no #define: used in env alone
    [file.env]                         # optional: set for every run
    OMP_PROC_BIND = "close"
    OMP_NUM_THREADS = "{THREADS}"      # a parameter's value: the variable is tuned
    [file.check]                       # optional: what a correct run prints (program mode)
    expect = '^PASS$'                  # every run's output must match; reject: must not
    result = 'checksum = (\\S+)'       # captures compared with the baseline's (rtol: numbers)
    [[file.kernel]]                    # optional: kernel mode's launch (annotate.kernels)
    name = "mm2_kernel1"
    grid = "NJ / DIM_THREAD_BLOCK_X, NI / DIM_THREAD_BLOCK_Y"
    block = "DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y"
    args = ["in(NI * NK)", "in(NK * NJ)", "out(NI * NJ)"]

libclang reads the source as `compile` has the compiler read it (`command`).

A `[[gpu]]` entry, in the format of annotune's GPU table (`annotune/transfer/gpus.toml`),
describes a GPU that table lacks; `annotune.transfer.resolve` reads and checks those entries.
The same tables go under `[tool.annotune]` in a pyproject.toml. The nearest config file
above the source that mentions it wins, looked for up to the repository's root or the user's
home, and used only when the user owns it and no one else may write it (`find_config`). Every
key is checked, in every `[[file]]`: a misspelt one would otherwise be ignored without a word.

The rooms: finding and trusting a config (`trust`), the TOML with positions (`located_toml`),
the entries and their keys (`entries`), an entry's typed values (`values`), the compile
command (`command`), the run settings (`settings`), the output's rules (`output_rules`), the
kernels declared (`kernel_tables`), and
what comes of it all (`records`).
"""

from __future__ import annotations

from annotune.annotate.config.entries import load_file_config
from annotune.annotate.config.records import ClausePlace, ConfigParam, FileConfig
from annotune.annotate.config.trust import CONFIG_NAMES, config_naming, find_config

__all__ = [
    "CONFIG_NAMES",
    "ClausePlace",
    "ConfigParam",
    "config_naming",
    "FileConfig",
    "find_config",
    "load_file_config",
]
