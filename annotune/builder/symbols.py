"""Which symbol of an nvcc cubin is a template kernel's instance.

NVRTC lowers a name expression itself (`nvrtcGetLoweredName`); nvcc has no such interface, so a
variant nvcc builds is searched: each kernel ptxas compiled is demangled (libstdc++'s
`__cxa_demangle`, the Itanium ABI nvcc's device code uses) and compared, spaces and integer
suffixes aside, with the instance as kernel mode writes it (`KernelSpec.instance`, types in
their canonical spelling). The host code's own instances of the same template are in the cubin
too, which is why the whole name is compared and not its prefix.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from collections.abc import Iterable
from dataclasses import replace

from annotune.builder.compiler import CompileResult
from annotune.builder.variants import VariantSource

_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)


def instance_symbol(instance: str, symbols: Iterable[str]) -> str | None:
    """The one symbol among `symbols` that is `instance` (`ns::k<float, 256>`); None when none
    or several are."""
    wanted = _normal(instance)
    found = [symbol for symbol in symbols if _normal(_callee(demangle(symbol))) == wanted]
    return found[0] if len(found) == 1 else None


def demangle(symbol: str) -> str:
    """`_ZN2ns1kIfLi256EEEvPT_` as C++ writes it (`void ns::k<float, 256>(float*)`); the
    symbol itself when it is no C++ name or libstdc++ cannot be loaded."""
    function = _demangler()
    if function is None or not symbol.startswith("_Z"):
        return symbol
    status = ctypes.c_int()
    result = function(symbol.encode(), None, None, ctypes.byref(status))
    if not result or status.value != 0:
        return symbol
    try:
        return ctypes.string_at(result).decode(errors="replace")
    finally:
        _free(result)


def _callee(demangled: str) -> str:
    """`void ns::k<float, 256>(float*)` without its return type and parameters."""
    depth, end = 0, len(demangled)
    for pos in range(len(demangled) - 1, -1, -1):  # the parameter list closes the name
        ch = demangled[pos]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                end = pos
                break
    name, depth = demangled[:end], 0
    for pos in range(len(name) - 1, -1, -1):  # the return type ends at the last outer space
        ch = name[pos]
        if ch in ">)":
            depth += 1
        elif ch in "<(":
            depth -= 1
        elif ch == " " and depth == 0:
            return name[pos + 1 :]
    return name


def _normal(name: str) -> str:
    return _SUFFIX.sub(r"\1", name).replace(" ", "")


@functools.cache
def _demangler():  # noqa: ANN202 - a ctypes function
    library = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        function = ctypes.CDLL(library).__cxa_demangle
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int),
    ]
    return function


def _free(pointer: int) -> None:
    _libc_free()(pointer)


@functools.cache
def _libc_free():  # noqa: ANN202 - a ctypes function
    function = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").free
    function.argtypes = [ctypes.c_void_p]
    return function


def instantiating(variant: VariantSource, instances: dict[str, str]) -> VariantSource:
    """`variant` with its main file naming each template kernel's instance at its end, in host
    code, which makes nvcc instantiate it: kernel mode launches it, the program may not. Each
    line names the declaration too: the cache entry holds the symbols by it."""
    lines = [b"\n/* annotune: the template instances kernel mode launches */\n"]
    lines += [
        f"/* {declared} */ static void *const annotune_instance_{index} "
        f"__attribute__((unused)) = (void *)&{instance};\n".encode()
        for index, (declared, instance) in enumerate(instances.items())
    ]
    files = {**variant.files, variant.main: variant.files[variant.main] + b"".join(lines)}
    return replace(variant, files=files, rewritten=True)


def found_instances(result: CompileResult, instances: dict[str, str]) -> CompileResult:
    """`result` with each template kernel's symbol, found among the kernels of nvcc's cubin;
    a failure when one is not there (once)."""
    symbols = {}
    for name, instance in instances.items():
        symbol = instance_symbol(instance, result.resources)
        if symbol is None:
            named = ", ".join(sorted(result.resources)) or "none"
            said = f"compile failed: nvcc's cubin has no kernel {instance} (its: {named})"
            return CompileResult(False, result.seconds, said)
        symbols[name] = symbol
    return replace(result, symbols=symbols)
