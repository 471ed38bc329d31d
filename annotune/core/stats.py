"""The statistics every stage reports times with: a median and its distribution-free interval.

Timings on a shared machine are skewed and have outliers, so no normal model is assumed: the
interval of the median comes from order statistics (the number of samples below the true
median is Binomial(n, 1/2)). Below 6 samples no such interval reaches 95%, and none is claimed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

CONFIDENCE = 0.95


def median_interval(
    samples: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The narrowest order-statistic interval [x(j), x(n-j+1)] that holds the median with at
    least `confidence`; None when there are too few samples for one."""
    n = len(samples)
    if n == 0:
        return None
    ordered = sorted(samples)
    # Coverage of [x(j), x(n-j+1)] (1-based) is 1 - 2 P(B <= j - 1), B ~ Binomial(n, 1/2).
    below = 0.0
    best = None
    for j in range(1, n // 2 + 1):
        below += math.comb(n, j - 1) / 2.0**n
        if 1.0 - 2.0 * below < confidence:
            break
        best = j
    if best is None:
        return None
    return ordered[best - 1], ordered[n - best]


def relative_halfwidth(samples: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """Half the median interval's width over the median (inf when there is no interval)."""
    interval = median_interval(samples, confidence)
    middle = statistics.median(samples) if samples else math.nan
    if interval is None or not middle > 0:
        return math.inf
    return (interval[1] - interval[0]) / 2.0 / middle
