"""A knob's value written as text: as C source (`c_literal`), and as an environment
variable or a program argument holds it (`value_text`).

One writer for every place a value reaches the compiler (a `-D`, a rewritten initializer or
launch, a tuned header), so that the header a team ships is the program annotune measured: a
knob whose domain says `2.0` is a double in the variant and in the header alike (`7 / S` is
3.5 in both, never 3 in one), and a negative value is parenthesised (`Y-S` with `S` -1 must
not read `Y--1`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from annotune.core.records import Number


def c_literal(value: Number) -> str:
    """`value` as a C literal of its own type: an int as an integer, a float as a double
    (`2.0`, `0.5`, `1e-05`), a negative one in parentheses; numpy scalars and bools as the
    numbers they are."""
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, bool):
        value = int(value)
    text = repr(float(value)) if isinstance(value, float) else str(int(value))
    return f"({text})" if text.startswith("-") else text


def as_declared(value: Number, domain: Sequence[Number]) -> Number:
    """`value` as its domain writes it: the domain's own element equal to it (so that 2, read
    back from a results database that stores 2.0 as 2, is the `2.0` the domain declared), or
    `value` itself when no element equals it."""
    if hasattr(value, "item"):
        value = value.item()
    for declared in domain:
        if declared == value and type(declared) is not bool:
            return declared
    return value


def value_text(value: Number) -> str:
    """A value as an environment variable or a program argument holds it: 4, not 4.0 (numpy
    scalars too), so that a run and a job script set the same text."""
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


_PIECE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
"""`{NAME}` in a config's `[file.env]` value or program argument is a knob's value there.
What a brace of such a text is part of: an escape (`{{` is a literal `{`, `}}` a `}`), a
`{...}`, or (a lone `{` or `}`) nothing: a mistake."""


def placeholder_mistake(text: str, what: str) -> tuple[int, str] | None:
    """The first brace of `text` (`what`: "env X") that is no part of a `{NAME}` or of an
    escape (`{{`, `}}`), as its offset and what is wrong; None when there is none. `{T` left
    open would reach the program as written, `{T}` never filled; a `{...}` that holds no name
    is one too."""
    for piece in _PIECE.finditer(text):
        found = piece.group()
        if found == "{":
            message = f"'{{' in {what} opens a placeholder that no '}}' closes"
        elif found == "}":
            message = f"'}}' in {what} closes no placeholder"
        elif found in ("{{", "}}") or piece.group(1).isidentifier():
            continue
        else:
            message = f"{found} in {what} names no parameter"
        return piece.start(), message + " (write {NAME}; a literal brace twice: {{ or }})"
    return None


def placeholders(text: str) -> list[str]:
    """The names inside `{...}` in `text`, escapes (`{{`, `}}`) aside."""
    return [piece.group(1) for piece in _PIECE.finditer(text) if piece.group(1) is not None]


def fill_placeholders(
    text: str, params: Mapping[str, Number], *, unescape: bool = True
) -> str:
    """`text` with each `{NAME}` that names one of `params` replaced by its value as written
    (`value_text`), each escape by its brace (`{{` is `{`); any other left as written. With
    `unescape` false the escapes stay too: a text filled in part now (a size) and in full
    later, whose `{{X}}` must not become a `{X}` the second fill takes for a placeholder."""
    return _PIECE.sub(lambda m: _filled(m, params, unescape), text)


def _filled(piece: re.Match, params: Mapping[str, Number], unescape: bool) -> str:
    name = piece.group(1)
    if name is not None:
        return value_text(params[name]) if name in params else piece.group()
    return piece.group()[0] if unescape and piece.group() in ("{{", "}}") else piece.group()
