"""The standard library in libclang's errors: the parse reads no system header, so a name of
the library is an error there, and the error says which declaration is host code; and the
statements libclang dropped for such a name, which leave only their error (`vanished`)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

import clang.cindex as ci

from annotune.annotate.device_code.records import Span
from annotune.annotate.device_code.walk import Walk, line_column

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
CUDA_TYPE = re.compile(
    r"'(u?(char|short|int|long|longlong)[1-4]|float[1-4]|double[1-4]|__half2|half2"
    r"|__nv_bfloat162?|nv_bfloat162?|__nv_fp8\w*)'"
)


def vanished(walk: Walk) -> None:
    """Blank the statements libclang dropped for naming the standard library (`using
    Clock = std::chrono::steady_clock;` leaves no cursor, only its error)."""
    for key, errors in walk.errors.items():
        source = walk.sources[key]
        for line, column, text in errors:
            inside = any(s[:2] <= (line, column) < s[2:] for s in walk.seen[key])
            if inside or not _names_host_library(walk, key, line, column, text):
                continue
            offset = source.line_starts[line - 1] + column - 1
            start = walk.statement_start(key, offset)
            end = walk.last_token(key, offset, statement=True)
            if end is not None:
                walk.found[key].append((*line_column(source, start), *line_column(source, end + 1)))


def names_std(walk: Walk, key: str, cursor: ci.Cursor, besides: Iterable[Span] = ()) -> bool:
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
        and _names_host_library(walk, key, line, column, text)
        and not any(s[:2] <= (line, column) < s[2:] for s in besides)
        for line, column, text in walk.errors.get(key, ())
    )


def _names_host_library(walk: Walk, key: str, line: int, column: int, message: str) -> bool:
    """Whether libclang's error is about a name of the standard library: one in `std::`
    (the message says so, or the name it stands at follows `std::`: `struct E : std::
    exception` is only an "expected class name"), or one of the library's host-only
    names with no namespace said (after `using namespace std;`), or a typedef of such a
    name, blanked, before `::` (`arg_string::size_type`, `arg_string` a `std::string`)."""
    if _STD_NAME.search(message):
        return True
    qualifier = _NOT_A_SCOPE.match(message)
    if qualifier is not None:
        return qualifier.group(1) in walk.host_names
    unknown = _UNKNOWN_NAME.match(message)
    if unknown is not None:
        return unknown.group(2) in _HOST_STD_NAMES
    tokens, starts = walk.code(key)
    offset = walk.sources[key].line_starts[line - 1] + column - 1
    index = bisect.bisect_left(starts, offset)
    return index >= 2 and [t.text for t in tokens[index - 2 : index]] == ["std", "::"]
