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


PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
"""`{NAME}` in a config's `[file.env]` value or program argument: a knob's value there."""


def placeholders(text: str) -> list[str]:
    """The names inside `{...}` in `text`."""
    return PLACEHOLDER.findall(text)


def fill_placeholders(text: str, params: Mapping[str, Number]) -> str:
    """`text` with each `{NAME}` that names one of `params` replaced by its value as written
    (`value_text`); any other left as written."""
    return PLACEHOLDER.sub(
        lambda m: value_text(params[m.group(1)]) if m.group(1) in params else m.group(), text
    )
