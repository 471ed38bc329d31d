"""The device code of a CUDA program: the user's files with what NVRTC rejects blanked.

NVRTC compiles in process, in milliseconds, but device code only: every host function, every
namespace-scope variable without `__device__`/`__constant__`/`__shared__`/`__managed__` (const
ones of arithmetic type aside) and every system header is an error. A real source is a whole
program (kernels, `main`, `std::vector`, `<cstdio>`, helpers in local headers), so each user file
is kept whole and what NVRTC must not see is overwritten with spaces, newlines kept: line and
column numbers stay right for NVRTC's messages, and the slice needs no knowledge of what the
kernels use. Preprocessor lines inside a blanked declaration stay (a `#define` in a host
function still acts on the code after it); `#include` and `#pragma` lines there go with it.

What is blanked comes from libclang's AST of the main file (`kernels.parse_cuda`, the parse the
kernels' signatures come from) and its errors, which say what names the standard library (the
parse reads no system header). A class or typedef whose type only a system header has (a
`struct timeval` field, `pthread_t`) goes only if no code kept names it: the kernels' classes
keep their layout. Its limits: code in `#if` branches that parse did not take
(a variant whose tuned values take another branch may find host code there); a host library's
name written without `std::` (after `using namespace std;`) that `_HOST_STD_NAMES` lacks; and
an explicit instantiation a macro writes. (The parse lifts clang's limit of 20 errors, which a
file's missing system headers would spend before the one that names `std::vector`.) What slips
through stays, NVRTC rejects it, and the variant goes to nvcc, which compiles it as it is.

The rooms: the prelude and the toolkit's device headers (`preludes`), the record
(`records`), the walk's state (`walk`) and its parts, declaration by declaration
(`declarations`), the standard library's names in libclang's errors (`host_library`), host
templates (`host_templates`), classes lacking a system header's type (`lacking`), the
directives kept and blanked (`directives`), and the whole (`spans`).
"""

from __future__ import annotations

from annotune.annotate.device_code.preludes import (
    DEVICE_HEADERS,
    GLIBC_PRELUDE,
    LIBCUXX_FREE,
    NVRTC_PRELUDE,
    is_device_header,
)
from annotune.annotate.device_code.records import DeviceCode, Span
from annotune.annotate.device_code.spans import device_code

__all__ = [
    "DEVICE_HEADERS",
    "GLIBC_PRELUDE",
    "LIBCUXX_FREE",
    "NVRTC_PRELUDE",
    "DeviceCode",
    "Span",
    "device_code",
    "is_device_header",
]
