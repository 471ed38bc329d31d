"""What NVRTC is given besides the user's files: the prelude it pre-includes (what device code
takes from system headers: `NVRTC_PRELUDE`, or `GLIBC_PRELUDE` where no libcu++ header is
included), and the toolkit's headers it compiles device code from (`is_device_header`)."""

from __future__ import annotations

import re

NVRTC_PRELUDE = """\
/* annotune's prelude for NVRTC (--pre-include): what device code takes from system headers. */
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
typedef long long intmax_t;
typedef unsigned long long uintmax_t;
typedef signed char int_least8_t;
typedef short int_least16_t;
typedef int int_least32_t;
typedef long long int_least64_t;
typedef unsigned char uint_least8_t;
typedef unsigned short uint_least16_t;
typedef unsigned int uint_least32_t;
typedef unsigned long long uint_least64_t;
typedef unsigned long size_t;
typedef long ptrdiff_t;
/* glibc's <sys/types.h>, which g++ (_GNU_SOURCE) reaches through <cstdlib>, <cmath>, ... */
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
namespace std {
using ::size_t; using ::ptrdiff_t; using ::int8_t; using ::int16_t; using ::int32_t;
using ::int64_t; using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
}
#define ANNOTUNE_TIMING_H 1
/* The constants of <cfloat> and <cmath> (glibc's M_ ones), whose includes the slice blanks. */
#define FLT_EPSILON 1.1920928955078125e-07F
#define FLT_MAX 3.4028234663852886e+38F
#define FLT_MIN 1.1754943508222875e-38F
#define DBL_EPSILON 2.220446049250313e-16
#define DBL_MAX 1.7976931348623157e+308
#define DBL_MIN 2.2250738585072014e-308
#define M_E 2.718281828459045
#define M_LOG2E 1.4426950408889634
#define M_LOG10E 0.43429448190325176
#define M_LN2 0.6931471805599453
#define M_LN10 2.302585092994046
#define M_PI 3.141592653589793
#define M_PI_2 1.5707963267948966
#define M_PI_4 0.7853981633974483
#define M_1_PI 0.3183098861837907
#define M_2_PI 0.6366197723675814
#define M_2_SQRTPI 1.1283791670955126
#define M_SQRT2 1.4142135623730951
#define M_SQRT1_2 0.7071067811865476
/* <climits>'s and <cstdint>'s macros, spelled as libcu++'s <cuda/std/climits> and <cstdint>. */
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-SHRT_MAX - 1)
#define SHRT_MAX 0x7fff
#define USHRT_MAX 0xffff
#define INT_MIN (-INT_MAX - 1)
#define INT_MAX 0x7fffffff
#define UINT_MAX 0xffffffff
#define LONG_MIN (-LONG_MAX - 1)
#define LONG_MAX LLONG_MAX
#define ULONG_MAX ULLONG_MAX
#define LLONG_MIN (-LLONG_MAX - 1)
#define LLONG_MAX 0x7fffffffffffffffLL
#define ULLONG_MAX 0xffffffffffffffffUL
#define INT8_MIN SCHAR_MIN
#define INT16_MIN SHRT_MIN
#define INT32_MIN INT_MIN
#define INT64_MIN LLONG_MIN
#define INT8_MAX SCHAR_MAX
#define INT16_MAX SHRT_MAX
#define INT32_MAX INT_MAX
#define INT64_MAX LLONG_MAX
#define UINT8_MAX UCHAR_MAX
#define UINT16_MAX USHRT_MAX
#define UINT32_MAX UINT_MAX
#define UINT64_MAX ULLONG_MAX
#define INTPTR_MIN INT64_MIN
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define INTMAX_MIN INT64_MIN
#define INTMAX_MAX INT64_MAX
#define UINTMAX_MAX UINT64_MAX
#define PTRDIFF_MIN INT64_MIN
#define PTRDIFF_MAX INT64_MAX
#define SIZE_MAX UINT64_MAX
#define INT8_C(X) ((::int_least8_t)(X))
#define INT16_C(X) ((::int_least16_t)(X))
#define INT32_C(X) ((::int_least32_t)(X))
#define INT64_C(X) ((::int_least64_t)(X))
#define UINT8_C(X) ((::uint_least8_t)(X))
#define UINT16_C(X) ((::uint_least16_t)(X))
#define UINT32_C(X) ((::uint_least32_t)(X))
#define UINT64_C(X) ((::uint_least64_t)(X))
#define INTMAX_C(X) ((::intmax_t)(X))
#define UINTMAX_C(X) ((::uintmax_t)(X))
"""
"""Pre-included before the slice. The 64-bit types are `long long`, as libcu++'s
<cuda/std/cstdint> declares them under NVRTC (which cuda/ and cub/ headers include: another type
would be a redeclaration error). glibc has `long`, and so have nvcc and the kernel names kernel
mode computes: a kernel taking an int64_t has another symbol under this prelude (`x` for `l`),
so code that includes no libcu++ gets `GLIBC_PRELUDE` (`DeviceCode.prelude`); for the rest the
builder would have to take the name from NVRTC (nvrtcGetLoweredName). `size_t` is NVRTC's
own `unsigned long`, as glibc's; `uint` and its kin are glibc's (no toolkit header declares
them). The timing header's guard is defined: its host timer is no device code, and a user
file that tests the guard (`#ifndef ANNOTUNE_TIMING_H`) takes the branch libclang took, the
header being on its include path there. <cfloat>'s limits and
<cmath>'s `M_PI` and kin are defined, as device code uses them and NVRTC has neither header
(nor does the toolkit define them anywhere, so no header NVRTC reads defines them again); each
is the double (or float) glibc's spelling rounds to. <climits>'s and <cstdint>'s macros
(`INT_MAX`, `UINT32_MAX`, `UINT64_C(1)`) are libcu++'s, token for token as its headers define
them under NVRTC (x86-64: `char` signed, `long` 64-bit), so that its later definitions are
identical redefinitions, which the preprocessor allows; the least-width types they cast to are
libcu++'s too. Unlike glibc's, its `_C` macros are casts, which no `#if` can evaluate."""

GLIBC_PRELUDE = (
    NVRTC_PRELUDE.replace("typedef long long", "typedef long")
    .replace("typedef unsigned long long", "typedef unsigned long")
    .replace("#define LONG_MAX LLONG_MAX", "#define LONG_MAX 0x7fffffffffffffffL")
    .replace("#define ULONG_MAX ULLONG_MAX", "#define ULONG_MAX 0xffffffffffffffffUL")
    .replace("#define INT64_MIN LLONG_MIN", "#define INT64_MIN LONG_MIN")
    .replace("#define INT64_MAX LLONG_MAX", "#define INT64_MAX LONG_MAX")
    .replace("#define UINT64_MAX ULLONG_MAX", "#define UINT64_MAX ULONG_MAX")
    .replace("#define ULLONG_MAX 0xffffffffffffffffUL", "#define ULLONG_MAX 0xffffffffffffffffULL")
)
"""The prelude for device code that includes no header of libcu++'s (`LIBCUXX_FREE` lists the
toolkit's headers that include none): the 64-bit types are glibc's, `long`, as nvcc has them,
so that a kernel taking an `int64_t` has the symbol kernel mode launches it by (nvcc's `l`, not
`x`), and NVRTC compiles it instead of sending it to nvcc; so are the 64-bit limits (`LONG_MAX`
and `INT64_MAX` are `long`, as glibc's)."""

# The toolkit's headers that include none of libcu++'s (tested with NVRTC 13: each compiles
# after glibc's typedefs); cuda/, cub/, nv/, cooperative groups, pipelines and barriers do.
LIBCUXX_FREE = frozenset(
    {
        "cuComplex.h",
        "cuda_bf16.h",
        "cuda_fp16.h",
        "cuda_fp4.h",
        "cuda_fp6.h",
        "cuda_fp8.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "device_atomic_functions.h",
        "device_launch_parameters.h",
        "math_constants.h",
        "mma.h",
        "vector_functions.h",
        "vector_types.h",
    }
)

# Headers NVRTC compiles device code from (with -I the toolkit's include dir, and its cccl/ for
# cuda/, cub/ and nv/): an `#include` of any other header not among the user's files is blanked.
DEVICE_HEADERS = LIBCUXX_FREE | frozenset(
    {
        "cooperative_groups.h",
        "cuda_awbarrier.h",
        "cuda_awbarrier_primitives.h",
        "cuda_pipeline.h",
        "cuda_pipeline_primitives.h",
        "curand_kernel.h",
    }
)
DEVICE_HEADER_PREFIXES = ("cooperative_groups/", "cuda/", "cub/", "nv/")
_SM_HEADER = re.compile(r"sm_\d+_(intrinsics|atomic_functions)\.h")


def is_device_header(name: str) -> bool:
    """Whether `#include <name>` is a toolkit header NVRTC compiles device code from."""
    return (
        name in DEVICE_HEADERS
        or name.startswith(DEVICE_HEADER_PREFIXES)
        or _SM_HEADER.fullmatch(name) is not None
    )
