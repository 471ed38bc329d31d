"""Build stage: configurations in, executables (or the reason there is none) out.

Compiles run in parallel (`jobs`), each with a timeout, behind a content-hash cache, so a
variant is never compiled twice, failures included, and no input change reuses a stale
binary. An entry's key covers the compile command, the compiler (its whole `--version`
output, the program's resolved path), the environment that changes compiles
(`dependencies.COMPILE_ENVIRONMENT`), the bytes of every file the command names (other
sources, objects, libraries, response files) and the exact bytes and flags of the variant; the
entry itself records every other file each translation unit read with its digest, and is
rebuilt when any of them changed (`dependencies`). A compiled variant is then read back with
the compiler's own preprocessor, in each translation unit: a tuned macro without its value
there (another definition won) makes it a failed build, so that no measurement is recorded for
values the program did not have (`verify`), and hashed as the preprocessor reads it:
configurations that are the same program share one measurement (`preprocessed`).

A program has one value per knob. A rewritten header reaches the tuned source through its copy,
but another unit of the command (`{source} file.c`, both including "header.h" beside them)
would find the original beside itself; such a unit is compiled from a copy too, made beside the
variant's copies with every file it reads under their root (`_copy_unit`).

Kernel mode compiles cubins with NVRTC when it can (`nvrtc`: the user's files sliced to their
device code, in a pool of worker processes). Its entries are keyed by NVRTC's library, the
options, the prelude and every sliced file's bytes, and depend on the user's files (whose bytes
the key already holds), annotune's include directory and the toolkit's top-level headers (a
toolkit update changes those), plus every include directory for a failed compile. A variant
NVRTC fails on is compiled by nvcc's cubin command, with every check above: the NVRTC entry
keeps why (`BuildResult.fallback`), nvcc's entry its result. Results come back as each build
finishes (`build_iter`), so that a session can measure one while the pool compiles the next.
"""

from __future__ import annotations

from annotune.builder.builds import Builder
from annotune.builder.compiler import CompilerCommand, cubin_compiler, default_compiler

__all__ = ["Builder", "CompilerCommand", "cubin_compiler", "default_compiler"]
