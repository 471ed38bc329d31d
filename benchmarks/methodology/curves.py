"""Where in the judge's time range a strategy gains or loses: `fastjudge.py --curves` read back.

For each space, prints the standardised performance (the score's integrand: 0 is random
search, 1 the optimum) of each strategy's pooled curve at fractions of the time range, the
score itself (the mean over the range), how many evaluations a median repeat fits in the
range (Kernel Tuner's strategies count revisits, which cost only the kernel runs), the charged
time of the first evaluation (with the strategy's set-up) against the range's start, and the
median charged seconds to a configuration within 10% and 5% of the optimum (inf: the median
repeat never got there within the budget).

    /tmp/methvenv/bin/python benchmarks/methodology/curves.py /tmp/fj/full/curves \
        --spaces convolution_W6600 --strategies iterml simulated_annealing
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastscore  # noqa: E402
import judge  # noqa: E402

FRACTIONS = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
REACH = (0.9, 0.95)  # normalized performance: optimum / best found


def load_runs(path: Path) -> list[fastscore.Run]:
    arrays = np.load(path)
    return [fastscore.Run(t, b) for t, b in zip(arrays["times"], arrays["best"], strict=True)]


def describe(stats: fastscore.SpaceStats, runs: Sequence[fastscore.Run]) -> dict[str, float]:
    """The standardised curve at FRACTIONS of the range, the score, evaluations in range."""
    baseline = fastscore.random_curve(stats)
    curve = fastscore.strategy_curve(stats, runs)
    standard = (curve - baseline) / (stats.optimum - baseline)
    end = stats.time_range[-1]
    out = {
        f"{f:.0%}": float(standard[min(int(f * len(standard)), len(standard) - 1)])
        for f in FRACTIONS
    }
    out["score"] = float(np.mean(standard))
    out["evals in range"] = float(np.median([np.sum(r.times <= end) for r in runs]))
    out["first eval s"] = float(np.median([r.times[np.isfinite(r.times)][0] for r in runs]))
    for level in REACH:
        out[f"s to {level:.2f}"] = float(np.median([_reach(stats, r, level) for r in runs]))
    return out


def _reach(stats: fastscore.SpaceStats, run: fastscore.Run, level: float) -> float:
    """Charged seconds until the run's best is within `level` of the optimum (inf: never)."""
    hit = np.flatnonzero(stats.optimum / run.best >= level)
    return float(run.times[hit[0]]) if hit.size else np.inf


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", type=Path, help="fastjudge.py --curves folder")
    parser.add_argument("--data", type=Path, default=judge.DEFAULT_DATA)
    parser.add_argument("--spaces", nargs="*")
    parser.add_argument("--strategies", nargs="*")
    args = parser.parse_args(argv)
    archives = sorted(args.curves.glob("*.npz"))
    known = sorted(p.name.removesuffix(".json.gz") for p in args.data.glob("*.json.gz"))
    spaces = args.spaces or [s for s in known if any(a.stem.startswith(s + "_") for a in archives)]
    for space in spaces:
        with gzip.open(args.data / f"{space}.json.gz", "rt", encoding="utf-8") as stream:
            stats = fastscore.space_stats(json.load(stream))
        print(
            f"\n{space}: range {stats.time_range[0]:.1f}-{stats.time_range[-1]:.1f} s "
            f"(random search's {stats.fevals_start}-{stats.fevals_end} evaluations), "
            f"budget {stats.budget_seconds:.1f} s"
        )
        rows = []
        for archive in archives:
            if not archive.stem.startswith(space + "_"):
                continue
            name = archive.stem[len(space) + 1 :]
            if args.strategies and name not in args.strategies:
                continue
            rows.append((name, describe(stats, load_runs(archive))))
        if not rows:
            continue
        keys = list(rows[0][1])
        print("| strategy | " + " | ".join(keys) + " |")
        print("|---|" + "---:|" * len(keys))
        for name, row in rows:
            print(f"| {name} | " + " | ".join(f"{row[k]:.2f}" for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
