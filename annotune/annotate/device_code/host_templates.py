"""Host templates libclang gives no cursor of its own: the explicit instantiations of blanked
functions (`template int f<float>(float *);`), and a host function template read as a
variable template, a parameter's type unknown."""

from __future__ import annotations

import bisect

import clang.cindex as ci

from annotune.annotate.device_code.walk import Walk, line_column
from annotune.annotate.source import Token

_DEVICE_WORDS = frozenset({"__device__", "__global__"})


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


def instantiations(walk: Walk) -> None:
    """Blank the explicit instantiations of blanked functions (`template int f<float>(
    float *);`, `extern` before it or not): libclang gives them no cursor, and NVRTC, the
    template blanked, finds no template `f`. Host code instantiates host code; one that
    names a function kept too (an overload of it, a kernel template) stays. So do the
    explicit specializations libclang dropped (`template <> bool is_nan<float2>(float2 v)
    {...}`, a type its shim lacks), unless `__device__` or `__global__` marks them."""
    for key, source in walk.sources.items():
        directives = [(d.hash_token.start, d.end) for d in source.directives]
        tokens, starts = walk.code(key)
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
            at = line_column(source, token.start)
            if any(s[:2] <= at < s[2:] for s in walk.seen[key]):
                continue  # a cursor's own (a class's explicit instantiation has one)
            last = walk.last_token(key, token.start, statement=True)
            if last is None:
                continue
            name = _instantiated(tokens[after:], last)
            if name not in walk.host_functions or name in walk.device_functions:
                continue
            statement = tokens[after : bisect.bisect_right(starts, last)]
            if not _DEVICE_WORDS.isdisjoint(t.text for t in statement):
                continue
            start = tokens[index - 1] if before == "extern" else token
            walk.found[key].append(
                (*line_column(source, start.start), *line_column(source, last + 1))
            )


def is_host_template(walk: Walk, key: str, cursor: ci.Cursor) -> bool:
    """Whether a declaration libclang exposes no kind for is a host function template it
    read as a variable template, a parameter's type unknown (`template <typename T> void
    f(std::vector<T> &v) {...}`): its extent stops at a name that `(` follows, its
    statement ends with a body, and neither `__device__` nor `__global__` marks it."""
    tokens = walk.sources[key].tokens
    after = bisect.bisect_left(walk.token_starts(key), cursor.extent.end.offset)
    if after == len(tokens) or tokens[after].text != "(":
        return False
    last = walk.last_token(key, cursor.extent.end.offset, statement=True)
    if last is None or walk.sources[key].data[last : last + 1] != b"}":
        return False
    return _DEVICE_WORDS.isdisjoint(walk.words(key, cursor))
