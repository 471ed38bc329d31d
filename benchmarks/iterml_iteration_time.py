"""Time of one IterML iteration: fit on everything measured, predict the rest, choose a batch.

    PYTHONPATH=. python benchmarks/iterml_iteration_time.py [--measured 200 500 1000]

Two spaces: the largest replay dataset (gemm on an RTX 3090, 17,956 configurations) and a
synthetic 10^6-configuration space (6 parameters). For each, the search is warmed up with
`--measured` random measurements, then four `ask`s are timed, best of three: the forest's
iterations and those whose batch the boosted-tree climbs choose (two of every three once 50 are
measured). The climbs' first iteration also builds their neighbour table, once per search. Also
shown: `start`, and the forest's fit and prediction alone. Targets (issue 3): < 0.5 s on gemm,
< 5 s on 10^6 configurations, on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.results.replay import load_replay
from annotune.search import IterML, IterMLSettings
from annotune.search.models import Surrogate, encode_features

GEMM = Path(__file__).resolve().parents[2] / "shared" / "data" / "replay" / "gemm_RTX_3090.json.gz"


def synthetic(n_side: int = 10) -> tuple[Candidates, np.ndarray]:
    """10^6 configurations: six parameters with 10 values each; a smooth bowl plus noise."""
    grids = np.meshgrid(*[np.arange(1, n_side + 1) * 16.0] * 6, indexing="ij")
    values = np.stack([g.ravel() for g in grids], axis=1)
    rng = np.random.default_rng(0)
    times = 1 + ((np.log2(values) - 6) ** 2).sum(axis=1) + rng.random(len(values))
    return Candidates(values, tuple(f"p{i}" for i in range(6))), times


def time_iteration(candidates: Candidates, times: np.ndarray, measured: int, n_jobs: int):
    """Seconds of (start, forest ask, first climbs ask, climbs ask, fit, predict), best of 3."""
    best = (np.inf,) * 6
    for seed in range(3):
        rng = np.random.default_rng(seed)
        strategy = IterML(IterMLSettings(n_jobs=n_jobs, initial=measured, climb_after=measured))
        started = time.perf_counter()
        strategy.start(candidates, rng)
        start = time.perf_counter() - started
        first = strategy.ask(measured)
        strategy.tell([Result(i, float(times[i])) for i in first])
        forest_asks, climbs_asks = [], []
        for _ in range(4):
            climbs = strategy.progress()["climbs"]
            started = time.perf_counter()
            batch = strategy.ask(10)
            took = time.perf_counter() - started
            climbed = strategy.progress()["climbs"] > climbs
            (climbs_asks if climbed else forest_asks).append(took)
            strategy.tell([Result(i, float(times[i])) for i in batch])

        features = encode_features(candidates.values)
        surrogate = Surrogate("rf", n_jobs=n_jobs)
        started = time.perf_counter()
        surrogate.fit(features[first], np.log(times[first]), rng)
        fit = time.perf_counter() - started
        started = time.perf_counter()
        surrogate.predict(features)
        predict = time.perf_counter() - started
        timings = (start, min(forest_asks), climbs_asks[0], min(climbs_asks[1:]), fit, predict)
        best = tuple(min(a, b) for a, b in zip(best, timings, strict=True))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    gemm = load_replay(GEMM)
    spaces = [("gemm_RTX_3090", gemm.candidates, gemm.times), ("synthetic 10^6", *synthetic())]
    print(
        "| space | configurations | measured | start s | forest iteration s "
        "| first climbs iteration s | climbs iteration s | forest fit s | forest predict s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, candidates, times in spaces:
        for measured in args.measured:
            timings = time_iteration(candidates, times, measured, args.n_jobs)
            cells = " | ".join(f"{t:.3f}" for t in timings)
            print(f"| {name} | {len(candidates):,} | {measured} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
