"""The final interleaved check."""

from __future__ import annotations

import numpy as np
import pytest

from annotune.session.recheck import recheck

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
    assert all(c.interval[0] <= 1.0 for c in verdict.contenders)


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
    recheck(
        BASE,
        [FAST, SAME],
        lambda p: samples.append(p) or 5.0,
        rounds=7,
        on_round=lambda done: told.append((done, len(samples))),
    )
    assert told == [(r, 3 * r) for r in range(1, 8)]

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
