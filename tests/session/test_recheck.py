"""The final interleaved check."""

from __future__ import annotations

import itertools
import random
import statistics

import numpy as np
import pytest

from annotune.results.keys import config_key
from annotune.session.recheck import claim_bounds, recheck

BASE = {"A": 1}
FAST = {"A": 2}
SAME = {"A": 3}


def noisy(true_ms: dict[int, float], seed: int = 0, spread: float = 0.1):
    """Each sample is its configuration's time times a shared, drifting load factor (the same
    for samples taken close together) and a little noise of its own."""
    rng = np.random.default_rng(seed)
    state = {"load": 1.0}

    def sample(params):
        state["load"] = max(0.5, state["load"] + rng.normal(0, 0.15))
        return true_ms[params["A"]] * state["load"] * (1 + rng.normal(0, spread / 5))

    return sample


@pytest.mark.parametrize("seed", range(5))
def test_a_real_effect_wins_through_drifting_load(seed):
    verdict = recheck(BASE, [SAME, FAST], noisy({1: 10.0, 2: 10.0 / 1.3, 3: 10.0}, seed), rounds=10)
    assert verdict.winner == FAST and not verdict.kept_baseline
    low, high = verdict.interval
    assert 1.0 < low <= 1.3 <= high


@pytest.mark.parametrize("seed", range(5))
def test_no_effect_keeps_the_baseline(seed):
    verdict = recheck(BASE, [SAME, {"A": 4}], noisy({1: 10.0, 3: 10.0, 4: 10.0}, seed), rounds=10)
    assert verdict.kept_baseline and verdict.winner == BASE and verdict.speedup == 1.0
    assert all(c.interval is None or c.interval[0] <= 1.0 for c in verdict.contenders)


def test_a_failing_contender_drops_out_and_a_failing_baseline_claims_nothing():
    calls = []

    def sample(params):
        calls.append(params["A"])
        if params["A"] == 3 and len(calls) > 4:
            return "exited with code 1"
        return {1: 10.0, 2: 5.0, 3: 9.0}[params["A"]]

    verdict = recheck(BASE, [FAST, SAME], sample, rounds=8)
    assert verdict.winner == FAST and verdict.speedup == 2.0
    dropped = verdict.contenders[1]
    assert dropped.error == "exited with code 1" and dropped.speedup is None
    assert calls[:3] == [1, 2, 3]  # interleaved: baseline, then each contender, each round

    failing = recheck(BASE, [FAST], lambda p: "crashed" if p == BASE else 5.0, rounds=8)
    assert failing.baseline_error == "crashed" and failing.speedup is None
    assert failing.winner == BASE


def test_each_round_done_is_told_after_its_samples():
    samples, told = [], []
    verdict = recheck(
        BASE,
        [FAST, SAME],
        lambda p: samples.append(p) or 5.0,
        rounds=7,
        on_round=lambda done: told.append((done, len(samples))),
    )
    assert verdict.rounds == 5  # no contender could be claimed at the last look: stopped
    assert told == [(r, 3 * r) for r in range(1, 6)]

    told.clear()
    recheck(BASE, [FAST], lambda p: "crashed", rounds=7, on_round=told.append)
    assert told == []  # the baseline failed in the first round: no round was done


def test_too_few_rounds_for_an_interval_claim_nothing():
    verdict = recheck(BASE, [FAST], lambda p: 10.0 if p == BASE else 5.0, rounds=5)
    assert verdict.kept_baseline and verdict.contenders[0].speedup == 2.0


def test_a_speedup_below_the_measurement_precision_is_not_claimed():
    """Two builds of the same code can differ by a percent through code layout alone."""

    def one_percent(params, count=[0]):  # noqa: B006  (a counter across calls)
        count[0] += 1
        return {1: 10.0, 2: 10.0 / 1.01}[params["A"]] * (1 + 0.001 * (count[0] % 3 - 1))

    assert recheck(BASE, [FAST], one_percent, rounds=20).winner == FAST  # measurably faster
    practical = recheck(BASE, [FAST], one_percent, rounds=20, min_speedup=1.02)
    assert practical.kept_baseline and practical.contenders[0].speedup > 1.0


def test_intervals_widen_with_the_number_of_contenders():
    def exact(params):
        return {1: 10.0, 2: 9.0, 3: 9.5, 4: 9.8}[params["A"]] * (1 + 0.01 * (params["A"] % 2))

    one = recheck(BASE, [FAST], exact, rounds=20).contenders[0].interval
    three = recheck(BASE, [FAST, SAME, {"A": 4}], exact, rounds=20).contenders[0].interval
    assert three[0] <= one[0] and three[1] >= one[1]


def counted(times: dict[int, float]):
    """A sampler of fixed times per configuration that counts its calls."""
    calls = []

    def sample(params):
        calls.append(params["A"])
        return times[params["A"]]

    return sample, calls


def test_an_obvious_win_stops_at_the_first_look_that_can_claim_it():
    sample, calls = counted({1: 10.0, 2: 5.0})
    verdict = recheck(BASE, [FAST], sample, rounds=30)
    assert verdict.winner == FAST and verdict.speedup == 2.0
    assert verdict.rounds == 10 and verdict.stopped_early and len(calls) == 20
    assert verdict.contenders[0].rounds == 10


def test_a_clear_loser_stops_early_and_is_no_longer_sampled():
    sample, calls = counted({1: 10.0, 2: 5.0, 3: 20.0})
    verdict = recheck(BASE, [SAME, FAST], sample, rounds=30)
    loser, winner = verdict.contenders
    assert verdict.winner == FAST and not loser.significant and loser.interval[1] < 1.0
    assert verdict.rounds == 10 and calls.count(3) == 10


def test_a_claim_ends_the_check_once_no_other_contender_could_beat_it():
    """The slower contender is still undecided against the baseline, but its interval lies
    below the winner's speedup: it could not be chosen, so the check need not go on."""
    ratios = iter([1.1, 0.9] * 20)
    verdict = recheck(
        BASE,
        [FAST, SAME],
        lambda p: {1: 10.0, 2: 5.0}.get(p["A"]) or 10.0 / next(ratios),
        rounds=30,
    )
    assert verdict.winner == FAST and verdict.rounds == 10 and verdict.stopped_early
    assert verdict.contenders[1].interval[1] < 2.0 and not verdict.contenders[1].significant


def test_a_borderline_contender_runs_to_the_last_round():
    """Every fourth ratio at or below the bar: too many to claim at any look before the last,
    never so many that no claim could come; at the last, just few enough."""
    count = iter(range(1000))

    def sample(params):
        if params == BASE:
            return 10.0
        return 10.0 / (0.95 if next(count) % 4 == 0 else 1.2)

    verdict = recheck(BASE, [FAST], sample, rounds=30)
    assert verdict.rounds == 30 and not verdict.stopped_early and verdict.winner == FAST
    assert verdict.contenders[0].rounds == 30 and verdict.contenders[0].speedup == 1.2


def test_nothing_to_compare_samples_nothing():
    sample, calls = counted({1: 10.0})
    told = []
    verdict = recheck(BASE, [], sample, rounds=30, on_round=told.append)
    assert calls == [] and told == [] and verdict.rounds == 0
    assert verdict.winner == BASE and verdict.kept_baseline and verdict.speedup == 1.0


@pytest.mark.parametrize(("looks", "alpha"), [((5, 10, 12), 0.05), ((5, 10, 15), 0.025 / 3)])
def test_the_claim_bounds_spend_no_more_than_alpha(looks, alpha):
    """Exact, over every sequence of ratios above or below the bar under the null."""
    bounds = claim_bounds(looks, alpha)
    crossed = 0
    for signs in itertools.product((0, 1), repeat=looks[-1]):
        crossed += any(sum(signs[:n]) <= b for n, b in zip(looks, bounds, strict=True))
    assert crossed / 2 ** looks[-1] <= alpha
    assert bounds == tuple(sorted(bounds)) and bounds[-1] >= 0  # a claim can come at the end


def test_false_claims_without_an_effect_stay_under_five_percent():
    """Many simulated checks of three contenders that are the baseline under another name,
    through skewed noise and a drifting load: a claim is a false one."""
    rng = random.Random(7)
    runs, claims, rounds = 600, 0, []
    for _ in range(runs):

        def sample(params, load=[1.0]):  # noqa: B006  (the load drifts across calls)
            load[0] = max(0.5, load[0] + rng.gauss(0, 0.1))
            return 10.0 * load[0] * rng.lognormvariate(0, 0.05)

        verdict = recheck(BASE, [SAME, FAST, {"A": 4}], sample, rounds=30, min_speedup=1.0)
        claims += not verdict.kept_baseline
        rounds.append(verdict.rounds)
    assert claims / runs <= 0.05
    assert statistics.median(rounds) < 30  # and the check stops early when nothing wins


def test_a_real_effect_is_claimed_in_fewer_rounds():
    rng = random.Random(3)
    wins, rounds = 0, []
    for _ in range(200):

        def sample(params):
            return 10.0 / (1.3 if params == FAST else 1.0) * rng.lognormvariate(0, 0.1)

        verdict = recheck(BASE, [SAME, FAST, {"A": 4}], sample, rounds=30, min_speedup=1.02)
        wins += verdict.winner == FAST
        rounds.append(verdict.rounds)
    assert wins == 200 and statistics.median(rounds) <= 20


CONFIGS = {config_key(BASE): BASE, config_key(FAST): FAST}


def test_the_verdict_holds_the_checks_own_medians_and_keeps_them_when_stored():
    """The figures beside a speedup are the check's: a program whose time jumps between modes
    has search medians that say nothing of the rounds the speedup came from."""
    modes = {1: itertools.cycle([165.0, 165.0, 114.0]), 2: itertools.cycle([64.0, 114.0, 64.0])}
    verdict = recheck(BASE, [FAST], lambda p: next(modes[p["A"]]), rounds=30)
    assert verdict.winner == FAST
    assert verdict.baseline_time == 165.0 and verdict.winner_time == 64.0
    back = type(verdict).from_json(verdict.to_json(), CONFIGS, "then")
    assert (back.baseline_time, back.winner_time) == (165.0, 64.0)
    older = verdict.to_json()  # a verdict stored before the medians were: read as unknown
    del older["baseline_time"]
    for contender in older["contenders"]:
        del contender["time"]
    back = type(verdict).from_json(older, CONFIGS, "then")
    assert back.baseline_time is None and back.winner_time is None
    kept = recheck(BASE, [SAME], lambda p: 10.0, rounds=10)
    assert kept.kept_baseline and kept.winner_time == kept.baseline_time == 10.0
