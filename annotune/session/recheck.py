"""The final check: before a winner is claimed, the best few and the baseline are re-measured
side by side, interleaved (A B C D A B C D ...), so that a slow minute of a shared machine
hurts every contender alike.

Each round gives every configuration still undecided one sample; the speedup of a contender is
the median of its per-round ratios baseline / contender, and its interval comes from the order
statistics of those ratios (`annotune.core.stats`), so no normal model of the noise is assumed.
A contender wins only if its interval lies above `min_speedup` (1 plus the measurement's own
precision: two builds of the same code can differ by a percent through code layout alone,
which is no tuning result); of several, the one with the highest median ratio. When none does,
the baseline is kept, and the verdict says so.

The check is sequential, so that it stops when it knows: it looks every `look_every` rounds
(and at the last), and decides each contender at the first look where its interval lies wholly
above `min_speedup` (a claim) or wholly at or below it (futility), or where it could no longer
be claimed at the last look whatever the rounds left give (curtailment: the count of ratios at
or below `min_speedup` never falls). Decided contenders are no longer sampled; the check ends
when every contender is decided, or when one is claimed and every other's interval lies below
its median. Nothing to compare (no contenders) samples nothing.

The error is spent as in Lan & DeMets' alpha spending (Biometrika 70, 1983), with a Pocock-type
spending function, alpha * ln(1 + (e - 1) t) at information time t = rounds done / rounds.
Where it deviates from their normal-theory z boundaries: the statistic is the sign count
behind the order-statistic interval, so each look's boundary is an order index, computed
exactly from the Binomial(n, 1/2) random walk under the null (a true median ratio of
`min_speedup`; `claim_bounds`), and the intervals are the repeated confidence intervals
(Jennison & Turnbull) those indices give. And what is spent early is only the slack that the
count's discreteness leaves below alpha at the last look, whose bound stays that of a check
without looks: on the same ratios, a claim the fixed check would make is lost only to a
futility stop (the interval already at or below `min_speedup`) or to another contender claimed
with a higher median, so stopping early costs next to no power. Each contender spends
(1 - 0.95) / 2 / k one-sided (Bonferroni over k contenders), as the fixed check did with its
95% / k intervals; futility stops are not binding, so they only lower the chance of a false
claim.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from annotune.core.records import Number
from annotune.core.stats import CONFIDENCE
from annotune.results.keys import config_key as key_of

Params = Mapping[str, Number]
Sample = Callable[[Params], "float | str"]
"""One timed sample of a configuration (ms), or why it failed."""

LOOK_EVERY = 5  # rounds between looks: fewer than 5 ratios give no interval at all


@dataclass(frozen=True)
class Contender:
    params: dict[str, Number]
    speedup: float | None  # median of the per-round ratios baseline / contender
    interval: tuple[float, float] | None
    significant: bool = False  # the interval lies above the smallest speedup worth claiming
    error: str = ""  # why it dropped out (a failed sample)
    rounds: int = 0  # the rounds it was sampled in, until it was decided or the check ended
    # The median of its samples in the check (the objective's unit); None: none, or a verdict
    # stored before the check kept it. With the baseline's, what a report shows beside the
    # speedup: times measured in the same rounds, not the search's.
    time: float | None = None

    def to_json(self) -> dict:
        return {
            "params": self.params,
            "speedup": self.speedup,
            "speedup_interval": list(self.interval) if self.interval else None,
            "significant": self.significant,
            "error": self.error,
            "rounds": self.rounds,
            "time": self.time,
        }


@dataclass(frozen=True)
class Verdict:
    """What the final check found: the winner (the baseline when no contender is significantly
    faster), its speedup and interval, each contender's figures, and the rounds actually run
    (`stopped_early` when that is fewer than were allowed)."""

    winner: dict[str, Number]
    speedup: float | None
    interval: tuple[float, float] | None
    rounds: int
    contenders: tuple[Contender, ...] = ()
    baseline_error: str = ""
    stopped_early: bool = False
    baseline_time: float | None = None  # the median of the baseline's samples in the check

    stored: str = ""  # when it was stored, for a verdict read back rather than checked

    @property
    def winner_time(self) -> float | None:
        """The winner's median in the check: the baseline's when it was kept."""
        if self.kept_baseline:
            return self.baseline_time
        return next((c.time for c in self.contenders if c.params == self.winner), None)

    @property
    def kept_baseline(self) -> bool:
        return not any(c.significant for c in self.contenders)

    def to_json(self) -> dict:
        """What is stored (`results.final_checks`): everything but `stored`."""
        return {
            "winner": self.winner,
            "speedup": self.speedup,
            "interval": list(self.interval) if self.interval else None,
            "rounds": self.rounds,
            "contenders": [c.to_json() for c in self.contenders],
            "baseline_error": self.baseline_error,
            "stopped_early": self.stopped_early,
            "baseline_time": self.baseline_time,
        }

    @classmethod
    def from_json(
        cls, data: Mapping, configs: Mapping[str, dict[str, Number]], stored: str
    ) -> Verdict:
        """A stored verdict whose configurations are among `configs` (by config key: the
        baseline and the contenders this tune would check), given as those; ValueError when it
        is no verdict of theirs."""
        try:
            contenders = tuple(
                Contender(
                    configs[key_of(c["params"])],
                    _number(c["speedup"]),
                    _interval(c["speedup_interval"]),
                    significant=_boolean(c["significant"]),
                    error=str(c["error"]),
                    rounds=int(c["rounds"]),
                    time=_number(c.get("time")),
                )
                for c in data["contenders"]
            )
            verdict = cls(
                configs[key_of(data["winner"])],
                _number(data["speedup"]),
                _interval(data["interval"]),
                int(data["rounds"]),
                contenders,
                baseline_error=str(data["baseline_error"]),
                stopped_early=_boolean(data["stopped_early"]),
                baseline_time=_number(data.get("baseline_time")),
                stored=stored,
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"not a stored verdict: {error!r}") from None
        if len(contenders) != len(configs) - 1:
            raise ValueError("a verdict of other contenders")
        return verdict


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{value!r} is no number")
    return float(value)


def _interval(value: object) -> tuple[float, float] | None:
    if value is None:
        return None
    low, high = (_number(v) for v in value)  # type: ignore[union-attr]
    if low is None or high is None:
        raise ValueError("an interval of no numbers")
    return low, high


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is no boolean")
    return value


def recheck(
    baseline: Params,
    contenders: Sequence[Params],
    sample: Sample,
    *,
    rounds: int,
    min_speedup: float = 1.0,
    on_round: Callable[[int], None] | None = None,
    look_every: int = LOOK_EVERY,
) -> Verdict:
    """Interleave up to `rounds` samples of the baseline and each undecided contender; judge
    and stop as described in the module docstring. A contender whose sample fails drops out; a
    failing baseline ends the check with no claim. `on_round` is told each round done (an
    energy check takes seconds a sample: minutes in all, which a user must be able to watch)."""
    if rounds < 1:
        raise ValueError("the final check needs at least one round")
    if look_every < 1:
        raise ValueError("the final check needs at least one round between looks")
    if not contenders:
        return Verdict(dict(baseline), 1.0, None, 0, stopped_early=True)
    looks = tuple(sorted({*range(look_every, rounds, look_every), rounds}))
    alpha = (1.0 - CONFIDENCE) / 2 / len(contenders)
    bounds = dict(zip(looks, claim_bounds(looks, alpha), strict=True))
    times: dict[int, list[float]] = {i: [] for i in range(len(contenders))}
    decided: dict[int, Contender] = {}
    base: list[float] = []
    done = 0
    while len(decided) < len(contenders):
        measured = sample(baseline)
        if isinstance(measured, str):
            return Verdict(dict(baseline), None, None, done, baseline_error=measured)
        base.append(measured)
        for i in [i for i in times if i not in decided]:
            measured = sample(contenders[i])
            if isinstance(measured, str):
                decided[i] = Contender(
                    dict(contenders[i]),
                    None,
                    None,
                    error=measured,
                    rounds=done,
                    time=_median(times[i]),
                )
            else:
                times[i].append(measured)
        done += 1
        if on_round is not None:
            on_round(done)
        if done in bounds:
            reach = max(b for look, b in bounds.items() if look >= done)
            undecided = {i: (contenders[i], times[i]) for i in times if i not in decided}
            decided.update(
                _decide(undecided, base, bounds[done], reach, decided, min_speedup, done == rounds)
            )
    judged = tuple(decided[i] for i in times)
    winners = sorted((c for c in judged if c.significant), key=lambda c: -(c.speedup or 0.0))
    best = winners[0] if winners else Contender(dict(baseline), 1.0, None)
    early = done < rounds
    return Verdict(
        best.params,
        best.speedup,
        best.interval,
        done,
        judged,
        stopped_early=early,
        baseline_time=_median(base),
    )


def _median(samples: Sequence[float]) -> float | None:
    return statistics.median(samples) if samples else None


def _decide(
    undecided: Mapping[int, tuple[Params, Sequence[float]]],
    base: Sequence[float],
    bound: int,
    reach: int,
    decided: Mapping[int, Contender],
    min_speedup: float,
    last: bool,
) -> dict[int, Contender]:
    """Of the contenders still `undecided` at a look, those now decided, with their figures.

    At the look, a contender's interval lies between the order statistics `bound + 1` from
    either end of its sorted ratios (none when `bound` < 0). It is claimed when the interval
    lies above `min_speedup`, futile when it lies at or below it, curtailed when more of its
    ratios lie at or below `min_speedup` than `reach` (the largest bound of the looks left)
    allows, since that count never falls, and outrun when its interval lies below the median
    of a claimed contender, so that it could not be the winner. At the `last` look, every
    contender is decided."""
    figures = {}
    for i, (params, times) in undecided.items():
        ratios = sorted(b / t for b, t in zip(base, times, strict=True) if t > 0)
        interval = None
        if 0 <= bound < len(ratios) - bound:
            interval = ratios[bound], ratios[len(ratios) - 1 - bound]
        speedup = statistics.median(ratios) if ratios else None
        significant = interval is not None and interval[0] > min_speedup
        judged = Contender(
            dict(params), speedup, interval, significant, rounds=len(times), time=_median(times)
        )
        below = sum(r <= min_speedup for r in ratios)
        figures[i] = (judged, below)
    claimed = [c.speedup for c in decided.values() if c.significant]
    claimed += [c.speedup for c, _ in figures.values() if c.significant]
    ahead = max((s for s in claimed if s is not None), default=-math.inf)
    now = {}
    for i, (judged, below) in figures.items():
        low, high = judged.interval or (-math.inf, math.inf)
        futile = high <= min_speedup or below > reach or high < ahead
        if last or judged.significant or futile:
            now[i] = judged
    return now


@functools.lru_cache(maxsize=32)
def claim_bounds(looks: tuple[int, ...], alpha: float) -> tuple[int, ...]:
    """For each look (rounds done, increasing), the most ratios at or below the smallest
    speedup worth claiming that still let a contender be claimed there (-1: none can be), such
    that a contender whose true median ratio is that speedup is claimed at some look with
    probability at most `alpha`.

    Under that null each ratio is at or below it with probability 1/2: the count is a Binomial
    random walk, and every chance here is exact. The last look keeps the bound of a check with
    no looks before it, so the check loses no power at its end; the early looks spend only the
    slack that bound leaves below `alpha` (the count is discrete), by the Pocock-type function,
    and only on paths that would not be claimed at the end anyway. `paths[s]` is the chance of
    count s at the current look with no claim before."""
    total = looks[-1]
    final = -1
    while _at_most(total, final + 1) <= alpha:
        final += 1
    slack = (alpha - _at_most(total, final)) * (1 - 1e-9)
    paths = [1.0]
    spent = 0.0
    bounds = []
    for look in looks[:-1]:
        for _ in range(look - len(paths) + 1):
            paths = [(a + b) / 2 for a, b in zip([0.0, *paths], [*paths, 0.0], strict=True)]
        allowed = slack * math.log(1.0 + (math.e - 1.0) * look / total)
        bound = -1
        while bound + 1 < len(paths):
            unclaimed_at_end = 1.0 - _at_most(total - look, final - bound - 1)
            if spent + paths[bound + 1] * unclaimed_at_end > allowed:
                break
            bound += 1
            spent += paths[bound] * unclaimed_at_end
            paths[bound] = 0.0
        bounds.append(bound)
    return (*bounds, final)


def _at_most(n: int, count: int) -> float:
    """P(Binomial(n, 1/2) <= count)."""
    return sum(math.comb(n, i) for i in range(count + 1)) / 2.0**n
