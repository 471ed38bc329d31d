"""The device code of a CUDA program: the user's files with what NVRTC rejects blanked.

NVRTC compiles in process, in milliseconds, but device code only: every host function, every
namespace-scope variable without `__device__`/`__constant__`/`__shared__`/`__managed__` (const
ones of arithmetic type aside) and every system header is an error. A real source is a whole
program (kernels, `main`, `std::vector`, `<cstdio>`, helpers in local headers), so each user file
is kept whole and what NVRTC must not see is overwritten with spaces, newlines kept: line and
column numbers stay right for NVRTC's messages, and the slice needs no knowledge of what the
kernels use. Preprocessor lines inside a blanked declaration stay (a `#define` in a host
function still acts on the code after it); `#include` and `#pragma` lines there go with it.

What is blanked comes from libclang's AST of the main file (`kernel.parse_cuda`, the parse the
kernels' signatures come from) and its errors, which say what names the standard library (the
parse reads no system header). A class or typedef whose type only a system header has (a
`struct timeval` field, `pthread_t`) goes only if no code kept names it: the kernels' classes
keep their layout. Its limits: code in `#if` branches that parse did not take
(a variant whose tuned values take another branch may find host code there); a host library's
name written without `std::` (after `using namespace std;`) that `_HOST_STD_NAMES` lacks; and
an explicit instantiation a macro writes. (The parse lifts clang's limit of 20 errors, which a
file's missing system headers would spend before the one that names `std::vector`.) What slips
through stays, NVRTC rejects it, and the variant goes to nvcc, which compiles it as it is.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import clang.cindex as ci

from annotune.annotate.kernels import parse_cuda
from annotune.annotate.source import ParsedSource, SourceFile, Token

__all__ = [
    "GLIBC_PRELUDE",
    "NVRTC_PRELUDE",
    "DeviceCode",
    "Span",
    "device_code",
    "is_device_header",
]

Span = tuple[int, int, int, int]
"""(start_line, start_column, end_line, end_column), 1-based, the end excluded. Columns count
bytes, as libclang's do."""

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

_DEVICE_ATTRS = {ci.CursorKind.CUDAGLOBAL_ATTR, ci.CursorKind.CUDADEVICE_ATTR}
_MEMORY_SPACES = {
    ci.CursorKind.CUDADEVICE_ATTR,
    ci.CursorKind.CUDACONSTANT_ATTR,
    ci.CursorKind.CUDASHARED_ATTR,
}
_METHODS = {
    ci.CursorKind.CXX_METHOD,
    ci.CursorKind.CONSTRUCTOR,
    ci.CursorKind.DESTRUCTOR,
    ci.CursorKind.CONVERSION_FUNCTION,
}
_FUNCTIONS = _METHODS | {ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE}
_SCOPES = {ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC}
_RECORDS = {
    ci.CursorKind.STRUCT_DECL,
    ci.CursorKind.CLASS_DECL,
    ci.CursorKind.UNION_DECL,
    ci.CursorKind.CLASS_TEMPLATE,
    ci.CursorKind.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION,
}
_NAMES = {
    ci.CursorKind.TYPEDEF_DECL,
    ci.CursorKind.TYPE_ALIAS_DECL,
    ci.CursorKind.TYPE_ALIAS_TEMPLATE_DECL,
    ci.CursorKind.USING_DECLARATION,
    ci.CursorKind.USING_DIRECTIVE,
}
# Types of the namespace-scope constants NVRTC accepts without a memory space (tested: `const
# int`, `constexpr double[]`, `const char *const`; a `const char *` is a variable).
_CONSTANT_TYPES = {
    ci.TypeKind.BOOL,
    ci.TypeKind.CHAR_U,
    ci.TypeKind.UCHAR,
    ci.TypeKind.CHAR16,
    ci.TypeKind.CHAR32,
    ci.TypeKind.USHORT,
    ci.TypeKind.UINT,
    ci.TypeKind.ULONG,
    ci.TypeKind.ULONGLONG,
    ci.TypeKind.CHAR_S,
    ci.TypeKind.SCHAR,
    ci.TypeKind.WCHAR,
    ci.TypeKind.SHORT,
    ci.TypeKind.INT,
    ci.TypeKind.LONG,
    ci.TypeKind.LONGLONG,
    ci.TypeKind.FLOAT,
    ci.TypeKind.DOUBLE,
    ci.TypeKind.HALF,
    ci.TypeKind.ENUM,
    ci.TypeKind.POINTER,
    ci.TypeKind.NULLPTR,
}
_ARRAYS = {ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY}
_TYPEDEFS = {ci.CursorKind.TYPEDEF_DECL, ci.CursorKind.TYPE_ALIAS_DECL}
_DEVICE_WORDS = frozenset({"__device__", "__global__"})
# Directives that still act when the declaration around them is blanked.
_KEPT_DIRECTIVES = frozenset(
    {"define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"}
    | {"error", "warning", "line"}
)
# libclang's message for a name from a standard header it did not read (-nostdinc).
_STD_NAME = re.compile(r"in namespace 'std(::[\w:]+)?'")
# Its message for a name it does not know, with no namespace said: after `using namespace
# std;` (or `using std::string;`), `string` is one.
_UNKNOWN_NAME = re.compile(
    r"^(unknown type name|no template named|use of undeclared identifier) '(\w+)'"
)
# The standard library's host-only names, that such a message names when it is the library's:
# its types and namespaces that NVRTC lacks and libcu++ has no `cuda::std::` twin of (a
# `cuda::std` name, under `using namespace cuda::std;`, may be device code's).
_HOST_STD_NAMES = frozenset(
    {"string", "wstring", "basic_string", "vector", "deque", "list", "forward_list"}
    | {"map", "multimap", "set", "multiset", "unordered_map", "unordered_multimap"}
    | {"unordered_set", "unordered_multiset", "stack", "queue", "priority_queue"}
    | {"ostream", "istream", "iostream", "ofstream", "ifstream", "fstream", "stringstream"}
    | {"ostringstream", "istringstream", "streambuf", "ios", "cout", "cerr", "clog", "cin"}
    | {"unique_ptr", "shared_ptr", "weak_ptr", "thread", "mutex", "lock_guard", "exception"}
    | {"runtime_error", "logic_error", "invalid_argument", "out_of_range", "mt19937"}
    | {"mt19937_64", "default_random_engine", "random_device", "uniform_int_distribution"}
    | {"uniform_real_distribution", "normal_distribution", "chrono", "filesystem"}
    | {"this_thread"}
)
# Its message for `X::` where X, a typedef, names no class (a host library's type, unknown).
_NOT_A_SCOPE = re.compile(r"^'(\w+)'( \(aka '[^']*'\))? is not a class, namespace, or enumeration")
# CUDA's own types, which the parse's shim lacks: reading them is no host library's doing.
_CUDA_TYPE = re.compile(
    r"'(u?(char|short|int|long|longlong)[1-4]|float[1-4]|double[1-4]|__half2|half2"
    r"|__nv_bfloat162?|nv_bfloat162?|__nv_fp8\w*)'"
)


def is_device_header(name: str) -> bool:
    """Whether `#include <name>` is a toolkit header NVRTC compiles device code from."""
    return (
        name in DEVICE_HEADERS
        or name.startswith(DEVICE_HEADER_PREFIXES)
        or _SM_HEADER.fullmatch(name) is not None
    )


@dataclass(frozen=True)
class DeviceCode:
    """Per user file (the absolute paths of Problem.files): the spans NVRTC must not see.

    Every user file has an entry, sorted spans that do not overlap, empty when NVRTC may see
    all of it.
    """

    spans: Mapping[str, tuple[Span, ...]]
    libcuxx: bool = True  # a user file includes a header that includes libcu++'s <cstdint>

    @property
    def prelude(self) -> str:
        """What NVRTC is to pre-include for this code: glibc's 64-bit types unless libcu++,
        which declares them otherwise, is included."""
        return NVRTC_PRELUDE if self.libcuxx else GLIBC_PRELUDE

    def slice(self, file: str, text: bytes) -> bytes:
        """`text` (the file's bytes, or a variant's whose `#define` values were rewritten) with
        each span overwritten by spaces, line ends kept. A span's first and last lines are
        code, never a rewritten directive, so its columns hold; a line inside it goes whole.
        A file without spans comes back unchanged."""
        spans = self.spans.get(os.path.abspath(file))
        if not spans:
            return text
        lines = text.split(b"\n")
        for first, start, last, end in spans:
            for number in range(first, min(last, len(lines)) + 1):
                row = lines[number - 1]
                lines[number - 1] = _blanked(
                    row,
                    start - 1 if number == first else 0,
                    end - 1 if number == last else len(row),
                )
        return b"\n".join(lines)


def _blanked(row: bytes, start: int, end: int) -> bytes:
    end = min(end, len(row) - row.endswith(b"\r"))
    if start >= end:
        return row
    return row[:start] + b" " * (end - start) + row[end:]


def device_code(
    parsed: ParsedSource,
    include_dirs: Iterable[str] = (),
    defines: Iterable[str] = (),
    *,
    translation_unit: ci.TranslationUnit | None = None,
) -> DeviceCode:
    """The spans of the user's files that NVRTC must not see.

    `include_dirs` and `defines` must be those the front end parsed with; `translation_unit`
    is `kernel.parse_cuda`'s parse when the caller has it (else the main file is parsed here).
    """
    if translation_unit is None:
        translation_unit = parse_cuda(parsed, include_dirs, defines)
    walk = _Walk(parsed, translation_unit)
    walk.declarations(translation_unit.cursor.get_children())
    walk.vanished()
    walk.instantiations()
    walk.unused_lacking()
    spans = {}
    for source in parsed.files:
        key = os.path.abspath(source.path)
        kept = _kept_directive_lines(source)
        pieces = [p for span in _merged(walk.found[key]) for p in _around(span, kept)]
        spans[key] = tuple(_merged(pieces + _host_directives(parsed, source)))
    return DeviceCode(spans, libcuxx=_includes_libcuxx(parsed))


def _includes_libcuxx(parsed: ParsedSource) -> bool:
    """Whether a user file includes a toolkit header that brings libcu++'s <cstdint> (any
    device header but `LIBCUXX_FREE`'s), in a branch taken or not: a variant may take it."""
    for source in parsed.files:
        for directive in source.directives:
            if directive.name not in ("include", "include_next") or not directive.words:
                continue
            name, _ = _header_name(source, directive.words)
            if name is not None and is_device_header(name) and name not in LIBCUXX_FREE:
                return True
    return False


class _Walk:
    """One pass over the AST's declarations in the user's files, collecting what to blank."""

    def __init__(self, parsed: ParsedSource, tu: ci.TranslationUnit) -> None:
        self.keys = {os.path.realpath(f.path): os.path.abspath(f.path) for f in parsed.files}
        self.sources = {os.path.abspath(f.path): f for f in parsed.files}
        self._starts: dict[str, list[int]] = {}  # each file's token starts, for bisecting
        self._code_tokens: dict[str, tuple[list[Token], list[int]]] = {}
        self.found: dict[str, list[Span]] = {key: [] for key in self.keys.values()}
        self.blanked: set[tuple[str, int]] = set()  # variables, by (file, offset)
        self.seen: dict[str, list[Span]] = {key: [] for key in self.keys.values()}
        self.errors: dict[str, list[tuple[int, int, str]]] = {}
        self.host_functions: set[str] = set()  # the names of the functions blanked
        self.host_names: set[str] = set()  # and of the typedefs and aliases blanked
        # Classes kept whole though a field's type is one the parse lacks (a system header's
        # `struct timeval`), and typedefs of such types: (file, cursor, what to blank with it).
        self.lacking: list[tuple[str, ci.Cursor, ci.Cursor]] = []
        self.device_functions: set[str] = set()  # and of those kept
        self._real: dict[str, str] = {}
        for diagnostic in tu.diagnostics:
            where = diagnostic.location
            if diagnostic.severity >= ci.Diagnostic.Error and where.file is not None:
                key = self._key(where.file.name)
                if key is not None:
                    self.errors.setdefault(key, []).append(
                        (where.line, where.column, diagnostic.spelling)
                    )

    def _key(self, name: str) -> str | None:
        real = self._real.get(name)
        if real is None:
            real = self._real[name] = os.path.realpath(name)
        return self.keys.get(real)

    def _file(self, cursor: ci.Cursor) -> str | None:
        """The user file holding the whole declaration, None if it is no user's or the
        declaration spans files (a macro's expansion)."""
        extent = cursor.extent
        start, end = extent.start.file, extent.end.file
        if cursor.location.file is None or start is None or end is None:
            return None
        key = self._key(cursor.location.file.name)
        if key is None or self._key(start.name) != key or self._key(end.name) != key:
            return None
        return key

    def _blank(self, key: str, cursor: ci.Cursor, statement: bool = False) -> None:
        """Blank the declaration and the `;` after it: the one just after it, or with
        `statement` the one ending it (or its body's `}`), however far (an invalid
        declaration's extent stops before its initialiser)."""
        extent = cursor.extent
        start, end = extent.start, extent.end
        last = self._last_token(key, end.offset, statement)
        if last is None:
            self.found[key].append((start.line, start.column, end.line, end.column))
            return
        end_at = _line_column(self.sources[key], last + 1)
        self.found[key].append((start.line, start.column, *end_at))

    def vanished(self) -> None:
        """Blank the statements libclang dropped for naming the standard library (`using
        Clock = std::chrono::steady_clock;` leaves no cursor, only its error)."""
        for key, errors in self.errors.items():
            source = self.sources[key]
            for line, column, text in errors:
                inside = any(s[:2] <= (line, column) < s[2:] for s in self.seen[key])
                if inside or not self._names_host_library(key, line, column, text):
                    continue
                offset = source.line_starts[line - 1] + column - 1
                start = self._statement_start(key, offset)
                end = self._last_token(key, offset, statement=True)
                if end is not None:
                    self.found[key].append(
                        (*_line_column(source, start), *_line_column(source, end + 1))
                    )

    def instantiations(self) -> None:
        """Blank the explicit instantiations of blanked functions (`template int f<float>(
        float *);`, `extern` before it or not): libclang gives them no cursor, and NVRTC, the
        template blanked, finds no template `f`. Host code instantiates host code; one that
        names a function kept too (an overload of it, a kernel template) stays. So do the
        explicit specializations libclang dropped (`template <> bool is_nan<float2>(float2 v)
        {...}`, a type its shim lacks), unless `__device__` or `__global__` marks them."""
        for key, source in self.sources.items():
            directives = [(d.hash_token.start, d.end) for d in source.directives]
            tokens, starts = self._code(key)
            for index, token in enumerate(tokens[:-2]):
                after = index + 1  # where the declaration's own tokens start
                if token.text != "template":
                    continue
                if tokens[after].text == "<":
                    if tokens[after + 1].text != ">":
                        continue  # a template's definition, which has its cursor
                    after += 2  # `template <>`, an explicit specialization
                before = tokens[index - 1].text if index else ";"
                if before in ("::", ".", "->") or not source.is_active(token.start):
                    continue  # `x.template f<T>()`, a skipped branch
                if any(a <= token.start <= b for a, b in directives):
                    continue
                at = _line_column(source, token.start)
                if any(s[:2] <= at < s[2:] for s in self.seen[key]):
                    continue  # a cursor's own (a class's explicit instantiation has one)
                last = self._last_token(key, token.start, statement=True)
                if last is None:
                    continue
                name = _instantiated(tokens[after:], last)
                if name not in self.host_functions or name in self.device_functions:
                    continue
                statement = tokens[after : bisect.bisect_right(starts, last)]
                if not _DEVICE_WORDS.isdisjoint(t.text for t in statement):
                    continue
                start = tokens[index - 1] if before == "extern" else token
                self.found[key].append(
                    (*_line_column(source, start.start), *_line_column(source, last + 1))
                )

    def _statement_start(self, key: str, offset: int) -> int:
        """Where the namespace-scope statement around `offset` starts: after the `;`, `{`
        or `}` before it, or after the directive or comment before it."""
        source = self.sources[key]
        directives = [(d.hash_token.start, d.end) for d in source.directives]
        tokens = source.tokens
        index = bisect.bisect_right(self._token_starts(key), offset) - 1
        start = tokens[index].start
        for token in reversed(tokens[:index]):
            in_directive = any(a <= token.start <= b for a, b in directives)
            if in_directive or token.text in (";", "{", "}"):
                break
            if token.kind != "comment":
                start = token.start
        return start

    def _code(self, key: str) -> tuple[list[Token], list[int]]:
        """The file's tokens but comments, and where each starts."""
        if key not in self._code_tokens:
            tokens = [t for t in self.sources[key].tokens if t.kind != "comment"]
            self._code_tokens[key] = (tokens, [t.start for t in tokens])
        return self._code_tokens[key]

    def _token_starts(self, key: str) -> list[int]:
        if key not in self._starts:
            self._starts[key] = [t.start for t in self.sources[key].tokens]
        return self._starts[key]

    def _last_token(self, key: str, offset: int, statement: bool) -> int | None:
        """The offset of the `;` that ends a declaration ending at `offset`, or None. With
        `statement`, the `;` at its depth however far, or the `}` of a brace group at its
        depth that neither `;` nor `,` follows: a body, which ends the declaration. libclang
        reads a host function whose parameter's type it does not know (`void f(std::vector<int>
        &v) {...}`) as a variable `f` initialised by `(...)`, its extent stopping at `f`."""
        tokens, starts = self._code(key)
        depth = 0
        for index in range(bisect.bisect_left(starts, offset), len(tokens)):
            text = tokens[index].text
            if text == ";" and depth == 0:
                return tokens[index].start
            if not statement:
                return None
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                if depth == 0:
                    return None
                depth -= 1
                following = tokens[index + 1].text if index + 1 < len(tokens) else ""
                if text == "}" and depth == 0 and following not in (";", ","):
                    return tokens[index].start
        return None

    def declarations(self, cursors: Iterator[ci.Cursor], outer: ci.Cursor | None = None) -> None:
        """Collect the spans among `cursors`; `outer`: a braceless `extern "C"` around them,
        blanked with its one declaration (`extern "C"` before the next one is no C++)."""
        for cursor in cursors:
            key = self._file(cursor)
            if key is None:
                continue
            kind, blanked = cursor.kind, outer or cursor
            if kind not in _SCOPES:
                self.seen[key].append(_span(cursor.extent))
            if kind == ci.CursorKind.LINKAGE_SPEC and not _braced(cursor):
                self.declarations(cursor.get_children(), outer=cursor)
            elif kind in _SCOPES:
                self.declarations(cursor.get_children())
            elif kind in _FUNCTIONS:
                host = _is_host_function(cursor)
                (self.host_functions if host else self.device_functions).add(cursor.spelling)
                if host:
                    self._blank(key, blanked)
            elif kind == ci.CursorKind.FRIEND_DECL:
                if _is_host_friend(cursor):
                    self._blank(key, cursor)
            elif kind == ci.CursorKind.VAR_DECL:
                if not self._is_device_variable(key, cursor):
                    self._blank(key, blanked, statement=True)
                    self.blanked.add((key, cursor.location.offset))
            elif kind in _RECORDS:
                mark = len(self.found[key])
                if cursor.is_definition():
                    self.declarations(cursor.get_children())
                if self._names_std(key, cursor, besides=self._host_members(key, cursor)):
                    del self.found[key][mark:]
                    self._blank(key, blanked, statement=True)
                elif cursor.is_definition() and self._lacks_a_type(key, cursor):
                    self.lacking.append((key, cursor, blanked))
            elif (kind in _NAMES and self._names_std(key, cursor)) or (
                kind == ci.CursorKind.UNEXPOSED_DECL and self._is_host_template(key, cursor)
            ):
                self._blank(key, blanked, statement=True)
                if kind in _NAMES:
                    self.host_names.add(cursor.spelling)
            elif kind in _TYPEDEFS and self._lacks_a_type(key, cursor):
                self.lacking.append((key, cursor, blanked))

    def _lacks_a_type(self, key: str, cursor: ci.Cursor) -> bool:
        """Whether a class's field, or a typedef, has a type the parse has not: incomplete
        (`struct timeval t;`, the system header unread) or unknown (`pthread_t`), CUDA's own
        aside. Only a named declaration standing alone: a class that a typedef or variable
        declares with it (`typedef struct {...} T;`) has other names, as has such a typedef."""
        if not cursor.spelling.isidentifier():
            return False
        tokens, starts = self._code(key)
        first = bisect.bisect_left(starts, cursor.extent.start.offset)
        after = bisect.bisect_left(starts, cursor.extent.end.offset)
        if cursor.kind in _RECORDS:
            if after == len(tokens) or tokens[after].text != ";":
                return False
            parts = [c.extent for c in cursor.get_children() if c.kind == ci.CursorKind.FIELD_DECL]
        else:
            if any(t.text == "{" for t in tokens[first:after]):
                return False
            parts = [cursor.extent]
        for extent in parts:
            for text in self._errors_in(key, extent.start, extent.end):
                lacking = text.startswith(("field has incomplete type", "unknown type name"))
                if lacking and not _CUDA_TYPE.search(text):
                    return True
        return False

    def unused_lacking(self) -> None:
        """Blank whole the classes and typedefs `lacking` holds that no code NVRTC sees
        names: a class whose field's type only a system header has is host code, as is a
        typedef of such a type, unless something kept (a kernel, a device function, a class
        kept) names it; then it stays, a class's layout being the kernels', and NVRTC says
        what it lacks (the variant goes to nvcc). What only another such declaration names
        goes when that one goes. A name in a branch the front end skipped (`typedef HANDLE
        Thread;` under `#ifdef _WIN32`) is none: a variant taking it finds the class blanked,
        and NVRTC says so."""
        if not self.lacking:
            return
        names: dict[str, list[tuple[str, int]]] = {}
        for key, source in self.sources.items():
            for token in self._code(key)[0]:
                if token.kind == "identifier" and source.is_active(token.start):
                    names.setdefault(token.text, []).append((key, token.start))
        pending = list(self.lacking)
        while True:
            unused = [entry for entry in pending if not self._named_outside(names, *entry[:2])]
            if not unused:
                return
            for key, _, blanked in unused:
                self._blank(key, blanked, statement=True)
            pending = [entry for entry in pending if entry not in unused]

    def _named_outside(
        self, names: Mapping[str, list[tuple[str, int]]], key: str, cursor: ci.Cursor
    ) -> bool:
        """Whether the declaration's name stands anywhere but in itself and in code blanked."""
        extent = cursor.extent
        for where, offset in names.get(cursor.spelling, ()):
            if where == key and extent.start.offset <= offset < extent.end.offset:
                continue
            at = _line_column(self.sources[where], offset)
            if not any(s[:2] <= at < s[2:] for s in self.found[where]):
                return True
        return False

    def _is_host_template(self, key: str, cursor: ci.Cursor) -> bool:
        """Whether a declaration libclang exposes no kind for is a host function template it
        read as a variable template, a parameter's type unknown (`template <typename T> void
        f(std::vector<T> &v) {...}`): its extent stops at a name that `(` follows, its
        statement ends with a body, and neither `__device__` nor `__global__` marks it."""
        tokens = self.sources[key].tokens
        after = bisect.bisect_left(self._token_starts(key), cursor.extent.end.offset)
        if after == len(tokens) or tokens[after].text != "(":
            return False
        last = self._last_token(key, cursor.extent.end.offset, statement=True)
        if last is None or self.sources[key].data[last : last + 1] != b"}":
            return False
        return _DEVICE_WORDS.isdisjoint(self._words(key, cursor))

    def _words(self, key: str, cursor: ci.Cursor) -> set[str]:
        """The texts of the tokens in the declaration's extent, read from the file: libclang's
        own come back empty for an extent that starts with a macro (`__global__`)."""
        starts = self._token_starts(key)
        first = bisect.bisect_left(starts, cursor.extent.start.offset)
        last = bisect.bisect_left(starts, cursor.extent.end.offset)
        return {t.text for t in self.sources[key].tokens[first:last]}

    def _errors_in(self, key: str, start: ci.SourceLocation, end: ci.SourceLocation) -> list[str]:
        low, high = (start.line, start.column), (end.line, end.column)
        return [text for *at, text in self.errors.get(key, ()) if low <= tuple(at) < high]

    def _host_members(self, key: str, record: ci.Cursor) -> list[Span]:
        """The spans of the record's members blanked as host code: functions (friends too)
        and static data members, which no field's type or kept member can need."""
        return [
            _span(member.extent)
            for member in record.get_children()
            if (member.kind in _FUNCTIONS and _is_host_function(member))
            or (member.kind == ci.CursorKind.FRIEND_DECL and _is_host_friend(member))
            or (
                member.kind == ci.CursorKind.VAR_DECL
                and (key, member.location.offset) in self.blanked
            )
        ]

    def _names_std(self, key: str, cursor: ci.Cursor, besides: Iterable[Span] = ()) -> bool:
        """Whether the declaration names something of the standard library (which NVRTC has
        not): libclang, which read no system header, reported it unknown. Not for naming it
        only in `besides`, its host members' spans (a class the kernels use keeps its fields
        and device members when only a host member, a `friend ostream &operator<<`, names
        the library; a field or member type that does makes the class host code: without
        it, its layout would not be the same)."""
        extent = cursor.extent
        low, high = (extent.start.line, extent.start.column), (extent.end.line, extent.end.column)
        return any(
            low <= (line, column) < high
            and self._names_host_library(key, line, column, text)
            and not any(s[:2] <= (line, column) < s[2:] for s in besides)
            for line, column, text in self.errors.get(key, ())
        )

    def _names_host_library(self, key: str, line: int, column: int, message: str) -> bool:
        """Whether libclang's error is about a name of the standard library: one in `std::`
        (the message says so, or the name it stands at follows `std::`: `struct E : std::
        exception` is only an "expected class name"), or one of the library's host-only
        names with no namespace said (after `using namespace std;`), or a typedef of such a
        name, blanked, before `::` (`arg_string::size_type`, `arg_string` a `std::string`)."""
        if _STD_NAME.search(message):
            return True
        qualifier = _NOT_A_SCOPE.match(message)
        if qualifier is not None:
            return qualifier.group(1) in self.host_names
        unknown = _UNKNOWN_NAME.match(message)
        if unknown is not None:
            return unknown.group(2) in _HOST_STD_NAMES
        tokens, starts = self._code(key)
        offset = self.sources[key].line_starts[line - 1] + column - 1
        index = bisect.bisect_left(starts, offset)
        return index >= 2 and [t.text for t in tokens[index - 2 : index]] == ["std", "::"]

    def _is_device_variable(self, key: str, cursor: ci.Cursor) -> bool:
        """A variable in a memory space, or a constant NVRTC accepts as it is: of arithmetic,
        enum, const pointer or the user's class type, its type known (an unknown one reads as
        `int`), initialised without a call and from no blanked variable."""
        children = list(cursor.get_children())
        if any(c.kind in _MEMORY_SPACES for c in children):
            return True
        if not self._words(key, cursor).isdisjoint(("__managed__", "__global__")):
            # libclang exposes no attribute for `__managed__`, nor for a kernel it read as a
            # variable (a parameter's type unknown), which stays for NVRTC to say why.
            return True
        if not self._is_constant_type(cursor.type):
            return False
        unknown = self._errors_in(key, cursor.extent.start, cursor.location)
        if any(not _CUDA_TYPE.search(e) for e in unknown):
            return False
        for child in children:
            for node in child.walk_preorder():
                if node.kind in (ci.CursorKind.CALL_EXPR, ci.CursorKind.LAMBDA_EXPR):
                    return False
                if node.kind == ci.CursorKind.DECL_REF_EXPR and self._refers_to_blanked(node):
                    return False
        return True

    def _is_constant_type(self, type_: ci.Type) -> bool:
        type_ = type_.get_canonical()
        const = type_.is_const_qualified()  # libclang puts an array's const on the array
        while type_.kind in _ARRAYS:
            type_ = type_.get_array_element_type()
            const = const or type_.is_const_qualified()
        if not const:
            return False
        if type_.kind in _CONSTANT_TYPES:
            return True
        if type_.kind != ci.TypeKind.RECORD:
            return False
        declared = type_.get_declaration().location.file
        return declared is not None and self._key(declared.name) is not None

    def _refers_to_blanked(self, node: ci.Cursor) -> bool:
        target = node.referenced
        if target is None or target.kind != ci.CursorKind.VAR_DECL or target.location.file is None:
            return False
        key = self._key(target.location.file.name)
        return (key, target.location.offset) in self.blanked


def _span(extent: ci.SourceRange) -> Span:
    return (extent.start.line, extent.start.column, extent.end.line, extent.end.column)


def _line_column(source: SourceFile, offset: int) -> tuple[int, int]:
    """The 1-based line and byte column of a byte offset (libclang's, unlike Location's)."""
    line = bisect.bisect_right(source.line_starts, offset)
    return line, offset - source.line_starts[line - 1] + 1


def _instantiated(tokens: list[Token], last: int) -> str | None:
    """The name of the function an explicit instantiation's `tokens` (after `template`, up to
    offset `last`) declare: the name before its parameters' `(`, template arguments skipped
    (`int f<float>(float *)`), or None."""
    depth, opening = 0, None
    for index, token in enumerate(tokens):
        text = token.text
        if token.start >= last:
            break
        if text in ("<", "[", "{"):
            depth += 1
        elif text in (">", "]", "}"):
            depth -= 1
        elif text == ">>":
            depth -= 2
        elif text == "(" and depth == 0:
            opening = index
            break
    if opening is None:
        return None
    back, depth = opening - 1, 0
    while back >= 0 and (depth or tokens[back].text in (">", ">>")):
        text = tokens[back].text
        depth += {">": 1, ">>": 2, "<": -1}.get(text, 0)
        back -= 1
    return tokens[back].text if back >= 0 and tokens[back].kind == "identifier" else None


def _braced(linkage: ci.Cursor) -> bool:
    """Whether `extern "C"` opens a block (`extern "C" { ... }`) rather than one declaration."""
    tokens = linkage.get_tokens()
    return any(token.spelling == "{" for token in itertools.islice(tokens, 2, 3))


def _is_host_function(cursor: ci.Cursor) -> bool:
    """Neither `__global__` nor `__device__` (`__host__ __device__` is both); a defaulted or
    deleted member is implicitly both."""
    if any(c.kind in _DEVICE_ATTRS for c in cursor.get_children()):
        return False
    return not (
        cursor.kind in _METHODS and (cursor.is_default_method() or cursor.is_deleted_method())
    )


def _is_host_friend(friend: ci.Cursor) -> bool:
    return any(c.kind in _FUNCTIONS and _is_host_function(c) for c in friend.get_children())


def _kept_directive_lines(source: SourceFile) -> list[tuple[int, int]]:
    """The first and last line of each directive that must survive a blanked declaration."""
    return [
        (source.location(d.hash_token.start).line, source.location(d.end).line)
        for d in source.directives
        if d.name in _KEPT_DIRECTIVES
    ]


def _around(span: Span, kept: list[tuple[int, int]]) -> list[Span]:
    """`span` less the whole lines of the kept directives inside it."""
    first, start, last, end = span
    pieces: list[Span] = []
    at = (first, start)
    for top, bottom in kept:
        if first < top and bottom < last:
            pieces.append((*at, top, 1))
            at = (bottom + 1, 1)
    pieces.append((*at, last, end))
    return [p for p in pieces if p[:2] < p[2:]]


def _merged(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span[:2] <= merged[-1][2:]:
            merged[-1] = (*merged[-1][:2], *max(merged[-1][2:], span[2:]))
        else:
            merged.append(span)
    return merged


def _host_directives(parsed: ParsedSource, source: SourceFile) -> list[Span]:
    """The whole lines of each `#include` NVRTC cannot follow (a header that is neither the
    user's, found by the front end, nor annotune's timing header, nor a device header) and of
    annotune's own pragmas (which NVRTC would warn about)."""
    missing = {(where.file, where.line) for where, _ in parsed.missing_local_includes}
    spans: list[Span] = []
    for directive in source.directives:
        line = source.location(directive.hash_token.start).line
        last = source.location(directive.end).line
        if (
            directive.name == "pragma"
            and directive.words[:1]
            and directive.words[0].text == "annotune"
        ):
            spans.append((line, 1, last + 1, 1))
        if directive.name not in ("include", "include_next") or not directive.words:
            continue
        name, quoted = _header_name(source, directive.words)
        if name is None or (source.path, line) in parsed.includes:
            continue
        if os.path.basename(name) == "annotune_timing.h" or is_device_header(name):
            continue
        # A quoted name the front end neither found nor missed lies in a skipped branch:
        # it may be a local header under other flags.
        if not quoted or (source.path, line) in missing:
            spans.append((line, 1, last + 1, 1))
    return spans


def _header_name(source: SourceFile, words: tuple) -> tuple[str | None, bool]:
    """The header an `#include` names and whether it is quoted; None for a macro's name."""
    opening = words[0]
    if opening.text == "<":
        closing = next((w for w in words if w.text == ">"), None)
        if closing is None:
            return None, False
        return source.slice(opening.end, closing.start).strip(), False
    if opening.kind == "literal" and opening.text.startswith('"'):
        return opening.text[1:-1], True
    return None, False
