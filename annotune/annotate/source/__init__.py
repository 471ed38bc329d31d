"""The libclang front end: the translation unit's tokens, directives and functions.

libclang parses the file (CUDA as CUDA, C as C, C++ as C++: by its extension, or as the
configured compile command compiles it; `arguments`) in a child process under an address-space
and a CPU-time limit (`bounded`). From the translation unit we take (`parse`): the raw tokens
(comments included) of the main file and of every local header it includes with `#include
"..."` (or with `<...>` from a configured include directory; `headers`), through clang's own
lexer; which of their text the preprocessor skipped (`#if` branches not taken under the flags
in use), from libclang's skipped ranges and its record of macro expansions; the preprocessor
directives, rebuilt from those tokens, with the comments that sit on or just above them
(`lexing`); the function definitions, to say in which function (or kernel) a parameter is used.
What it hands on are plain records (`records`).
"""

from __future__ import annotations

from annotune.annotate.source.arguments import (
    ANNOTUNE_INCLUDE_DIR,
    CUDA_SHIM,
    SHIM_PATH,
    clang_args,
    compiler_macros,
    language_of,
)
from annotune.annotate.source.lexing import join_continuations
from annotune.annotate.source.parse import KEEP_GOING, check_readable, parse_source
from annotune.annotate.source.records import (
    Directive,
    FunctionDef,
    ParsedSource,
    SourceFile,
    TextSpan,
    Token,
)
from annotune.annotate.source.strings import file_name

__all__ = [
    "ANNOTUNE_INCLUDE_DIR",
    "CUDA_SHIM",
    "KEEP_GOING",
    "SHIM_PATH",
    "Directive",
    "FunctionDef",
    "ParsedSource",
    "SourceFile",
    "TextSpan",
    "Token",
    "check_readable",
    "clang_args",
    "compiler_macros",
    "file_name",
    "join_continuations",
    "language_of",
    "parse_source",
]
