"""Kernel mode's verdict on outputs: the default configuration's output arrays are the
reference, and another configuration's must match them (`compare_outputs`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from annotune.core.records import Number


@dataclass(frozen=True)
class KernelReference:
    """One configuration's outputs (read-only arrays by argument name): what others must match."""

    params: Mapping[str, Number]
    outputs: Mapping[str, np.ndarray]


def compare_outputs(
    outputs: Mapping[str, np.ndarray], reference: KernelReference, *, rtol: float, atol: float
) -> str:
    """Why `outputs` do not match the reference, or "" when they do (NaN matches NaN). An
    array of vectors is compared lane by lane, one of structs number by number (field `f2` of
    `p` is `p.f2`; padding is not compared)."""
    for name, expected in reference.outputs.items():
        actual = outputs[name]
        if actual.shape != expected.shape:
            return (
                f"output '{name}' has {actual.size} elements, the default configuration's "
                f"{expected.size}"
            )
        for label, got, wanted in _numbers(name, actual, expected):
            why = _differs(label, got.reshape(-1), wanted.reshape(-1), rtol=rtol, atol=atol)
            if why:
                return why
    return ""


def _numbers(
    name: str, actual: np.ndarray, expected: np.ndarray
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The arrays of numbers to compare: the output itself, or each field of a struct's."""
    if expected.dtype.names is None:
        return [(name, actual, expected)]
    return [
        (f"{name}.{field}", actual[field], expected[field])
        for field in expected.dtype.names
        if expected.dtype.fields[field][0].base.kind != "V"  # type: ignore[index]
    ]


def _differs(
    name: str, actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float
) -> str:
    """Why one flat array of numbers differs from the reference's; "" when it does not."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    if expected.dtype.kind == "f":
        close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = actual == expected
    if close.all():
        return ""
    bad = np.flatnonzero(~close)
    errors = np.abs(a[bad] - e[bad])
    errors = np.where(np.isnan(errors), np.inf, errors)
    worst = int(bad[np.argmax(errors)])
    return (
        f"output '{name}' differs from the default configuration's at {bad.size} of "
        f"{expected.size} elements; max error {errors.max():.3g} at index {worst} "
        f"({actual[worst].item()!r}, expected {expected[worst].item()!r})"
    )
