"""How far transfer from the other GPUs can go: where each target's best configurations rank.

    PYTHONPATH=. python benchmarks/transfer_ceiling.py [DATASET ...]

Default: every `*.json.gz` in ../shared/data/replay, grouped by shared space as `annotune
bench --transfer` groups them; each GPU of a group is the target in turn, the others its
sources. A transferred ranking can only reach Standard 1 within 1% of the space if it ranks
one of the target's configurations within 5% of its optimum (the "good" set) among the first
1%. For each target this prints:

* the size of the good set and the 1% mark;
* per source GPU, the normalized performance there of the target's best configuration, and the
  best rank the source's own ordering (fastest first) gives any good configuration;
* the best rank of a good configuration over every blend of the sources: the weighted mean of
  their log normalized performances, weights on a grid of step 0.05 summing to 1. The
  feature-concatenation forest predicts, per configuration, a weighted mean of source targets,
  so a good configuration that no blend ranks early is one the sources give no sign of.

Ranks count ties pessimistically (1 + the number of configurations scored strictly higher).
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np

from annotune.bench.transfer import ONE_PERCENT, group_by_space
from annotune.results.replay import load_replay
from annotune.search.multitask import match_rows
from annotune.transfer.features import dataset_device

REPLAY_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "replay"
GOOD = 0.95
FLOOR = 1e-3
"""Invalid configurations (normalized 0) count as this, so that their log is finite."""


def best_rank(score: np.ndarray, good: np.ndarray) -> int:
    """The best rank (1 = first) that ordering by `score` gives any row in `good`."""
    return int((score > score[good].max()).sum()) + 1


def blends(count: int, step: float = 0.05):
    """Every weight vector on a grid of `step` summing to 1."""
    ticks = round(1 / step)
    for split in itertools.product(range(ticks + 1), repeat=count - 1):
        if sum(split) <= ticks:
            yield np.array([*split, ticks - sum(split)], dtype=float) / ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    args = parser.parse_args()
    datasets = [load_replay(p) for p in args.datasets or sorted(REPLAY_DIR.glob("*.json.gz"))]
    print(
        "| target | good | 1% | per source: its performance at the target's best, "
        "best good rank | best blend |"
    )
    print("|---|---|---|---|---|")
    for group in group_by_space(datasets):
        if len(group) < 2:
            continue
        for target in group:
            normalized = target.normalized()
            good = normalized >= GOOD
            best = int(np.argmax(normalized))
            cells, logs = [], []
            for source in group:
                if source is target:
                    continue
                rows = match_rows(source.candidates.values, target.candidates.values)
                theirs = np.where(rows >= 0, source.normalized()[rows], 0.0)
                log = np.log(np.maximum(theirs, FLOOR))
                logs.append(log)
                cells.append(f"{dataset_device(source)} {theirs[best]:.3f}, {best_rank(log, good)}")
            stacked = np.stack(logs)
            blended = min(
                (best_rank(weights @ stacked, good), tuple(weights))
                for weights in blends(len(logs))
            )
            rank, weights = blended
            print(
                f"| {target.name} | {int(good.sum())} | {math.floor(ONE_PERCENT * len(target))} "
                f"| {'; '.join(cells)} | {rank} (weights {np.round(weights, 2).tolist()}) |"
            )


if __name__ == "__main__":
    main()
