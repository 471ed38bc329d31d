"""When a configuration has been timed enough: adaptive repeats, shared by every runner.

A configuration is run at least `min_runs` times, then until its median is stable (the 95%
interval of the median within ±`within` of it), or a cap on runs or on time spent timing it is
reached. A configuration whose fastest run is already slower than `stop_above` (the runner's
caller passes a multiple of the best time so far) stops at `min_runs`: a clearly bad one gets
few repeats, a contender as many as it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from annotune.core.stats import relative_halfwidth


@dataclass(frozen=True)
class Sampling:
    """How many timed runs a configuration gets (see the module docstring)."""

    min_runs: int = 5
    max_runs: int = 50
    max_seconds: float = 30.0
    within: float = 0.02

    def __post_init__(self) -> None:
        if self.min_runs < 1:
            raise ValueError("the minimum number of runs must be at least 1")
        if self.max_runs < self.min_runs:
            raise ValueError("the maximum number of runs must be at least the minimum")
        if not self.max_seconds > 0:
            raise ValueError("the time cap must be positive")
        if not 0 < self.within < 1:
            raise ValueError("the stability target must be between 0 and 1 (e.g. 0.02)")

    def to_json(self) -> dict:
        return {
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
            "max_seconds": self.max_seconds,
            "within": self.within,
        }

    def enough(
        self, times: Sequence[float], seconds: float, stop_above: float | None = None
    ) -> bool:
        """Whether `times` (the timed runs so far, `seconds` spent on them) suffice."""
        if len(times) < self.min_runs:
            return False
        if len(times) >= self.max_runs or seconds >= self.max_seconds:
            return True
        if stop_above is not None and min(times) > stop_above:
            return True
        return relative_halfwidth(times) <= self.within
