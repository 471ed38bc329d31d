"""libclang's strings as bytes, decoded as file names are: the bindings decode every string as
strict UTF-8, and a file name need not be UTF-8 (`k\xff.c`, legal on Linux)."""

from __future__ import annotations

import ctypes
import functools
import os

import clang.cindex as ci


@functools.cache
def _string_functions() -> dict:
    """libclang's functions that return a string, made to give its bytes: the bindings decode
    every string as strict UTF-8, and a file name need not be UTF-8 (`k\xff.c`)."""
    lib = ci.conf.lib

    def fresh(name: str, argtypes: list, restype: object):
        function = lib._FuncPtr((name, lib))  # not the bindings' own, whose result is decoded
        function.argtypes, function.restype = argtypes, restype
        return function

    return {
        "file": fresh("clang_getFileName", [ci.File], ci._CXString),
        "cursor": fresh("clang_getCursorSpelling", [ci.Cursor], ci._CXString),
        "token": fresh("clang_getTokenSpelling", [ci.TranslationUnit, ci.Token], ci._CXString),
        "bytes": fresh("clang_getCString", [ci._CXString], ctypes.c_char_p),
    }


def _string(kind: str, *args: object) -> str:
    """A string libclang returns, decoded as a file name is (`os.fsdecode`: a byte that is not
    UTF-8 kept as a surrogate, so that the name still opens the file). The string is freed
    with its `_CXString`, whose finalizer disposes of it."""
    functions = _string_functions()
    result = functions[kind](*args)
    return os.fsdecode(functions["bytes"](result) or b"")


def file_name(clang_file: ci.File) -> str:
    """The name of a file of a translation unit, `os.fsdecode`d (`_string`)."""
    return _string("file", clang_file)


def spelling(item: ci.Cursor | ci.Token) -> str:
    if isinstance(item, ci.Token):
        return _string("token", item._tu, item)
    return _string("cursor", item)
