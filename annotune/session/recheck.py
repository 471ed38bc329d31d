"""The final check: before a winner is claimed, the best few and the baseline are re-measured
side by side, interleaved (A B C D A B C D ...), so that a slow minute of a shared machine
hurts every contender alike.

Each round gives every configuration one sample; the speedup of a contender is the median of
its per-round ratios baseline / contender, and its interval comes from the order statistics of
those ratios (`annotune.core.stats`), so no normal model of the noise is assumed. The
intervals hold together with 95% confidence (each at 1 - 0.05/k for k contenders), so that
checking three contenders does not triple the chance of a false claim. A contender wins only
if its interval lies above `min_speedup` (1 plus the measurement's own precision: two builds
of the same code can differ by a percent through code layout alone, which is no tuning
result); of several, the one with the highest median ratio. When none does, the baseline is
kept, and the verdict says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from annotune.core.records import Number
from annotune.core.stats import CONFIDENCE, median_interval

Params = Mapping[str, Number]
Sample = Callable[[Params], "float | str"]
"""One timed sample of a configuration (ms), or why it failed."""


@dataclass(frozen=True)
class Contender:
    params: dict[str, Number]
    speedup: float | None  # median of the per-round ratios baseline / contender
    interval: tuple[float, float] | None
    significant: bool = False  # the interval lies above the smallest speedup worth claiming
    error: str = ""  # why it dropped out (a failed sample)

    def to_json(self) -> dict:
        return {
            "params": self.params,
            "speedup": self.speedup,
            "speedup_interval": list(self.interval) if self.interval else None,
            "significant": self.significant,
            "error": self.error,
        }


@dataclass(frozen=True)
class Verdict:
    """What the final check found: the winner (the baseline when no contender is significantly
    faster), its speedup and interval, and each contender's figures."""

    winner: dict[str, Number]
    speedup: float | None
    interval: tuple[float, float] | None
    rounds: int
    contenders: tuple[Contender, ...] = ()
    baseline_error: str = ""

    @property
    def kept_baseline(self) -> bool:
        return not any(c.significant for c in self.contenders)


def recheck(
    baseline: Params,
    contenders: Sequence[Params],
    sample: Sample,
    *,
    rounds: int,
    min_speedup: float = 1.0,
    on_round: Callable[[int], None] | None = None,
) -> Verdict:
    """Interleave `rounds` samples of the baseline and each contender; judge as described in
    the module docstring. A contender whose sample fails drops out; a failing baseline ends
    the check with no claim. `on_round` is told each round done (an energy check takes
    seconds a sample: minutes in all, which a user must be able to watch)."""
    if rounds < 1:
        raise ValueError("the final check needs at least one round")
    confidence = 1.0 - (1.0 - CONFIDENCE) / max(1, len(contenders))
    alive = {i: [] for i in range(len(contenders))}
    errors: dict[int, str] = {}
    base: list[float] = []
    for done in range(1, rounds + 1):
        measured = sample(baseline)
        if isinstance(measured, str):
            return Verdict(dict(baseline), None, None, rounds, baseline_error=measured)
        base.append(measured)
        for i in list(alive):
            measured = sample(contenders[i])
            if isinstance(measured, str):
                errors[i] = measured
                del alive[i]
            else:
                alive[i].append(measured)
        if on_round is not None:
            on_round(done)
    judged = []
    for i, params in enumerate(contenders):
        if i in errors:
            judged.append(Contender(dict(params), None, None, error=errors[i]))
            continue
        ratios = [b / c for b, c in zip(base, alive[i], strict=True) if c > 0]
        speedup = statistics.median(ratios) if ratios else None
        interval = median_interval(ratios, confidence)
        significant = interval is not None and interval[0] > min_speedup
        judged.append(Contender(dict(params), speedup, interval, significant))
    winners = sorted((c for c in judged if c.significant), key=lambda c: -c.speedup)
    if winners:
        best = winners[0]
        return Verdict(best.params, best.speedup, best.interval, rounds, tuple(judged))
    return Verdict(dict(baseline), 1.0, None, rounds, tuple(judged))
