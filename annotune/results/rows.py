"""A recorded configuration as a results file gives it, whatever the file's format."""

from __future__ import annotations

import math
from typing import Any

Row = tuple[dict[str, Any], float, str]
"""A configuration, its time in ms (NaN when invalid) and its invalid marker ("" when valid)."""


def time_or_marker(value: Any) -> tuple[float, str]:
    """A recorded time as (ms, ""), or (NaN, why) when it is a marker string, missing or not
    finite: formats write failures where the time goes."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan, str(value) if value is not None else "missing time"
    try:
        time = float(value)
    except OverflowError:  # an integer beyond any float
        return math.nan, "non-finite time"
    if not math.isfinite(time):
        return math.nan, "non-finite time"
    return time, ""
