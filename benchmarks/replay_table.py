"""The bench table for every replay dataset, against the targets of issue 3.

    PYTHONPATH=. python benchmarks/replay_table.py [--repeats 100] [--strategy iterml ...]
        [--plot fig14.png] [--json rows.json] [DATASET ...]

Default: all `*.json.gz` files in ../shared/data/replay, strategies `iterml` and
`iterml-paper`, 100 repeats, seed 0, both cores. For each dataset where random search needs
more than 20 measurements, the default strategy must reach Standard 2 with at most 40% of
random search's measurements and Standard 1 with at most 50%; the last columns say whether
it does. Runs are capped at random search's exact Standard 2 ("> cap": not reached by then).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from annotune.bench import bench, plot_boxes
from annotune.results.replay import load_replay

REPLAY_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "replay"


def share(value: int | None, reference: int | None) -> str:
    if value is None or not reference:
        return "-"
    return f"{100 * value / reference:.0f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--strategy", action="append", dest="strategies")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    paths = args.datasets or sorted(REPLAY_DIR.glob("*.json.gz"))
    strategies = args.strategies or ["iterml", "iterml-paper"]

    print(
        "| dataset | size | strategy | std1 | std2 | random std1 / std2 (exact) | "
        "std1 vs random | std2 vs random | target (<=50% / <=40%) | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows, normalized = [], {}
    for path in paths:
        dataset = load_replay(path)
        normalized[dataset.name] = dataset.normalized()
        for strategy in strategies:
            started = time.time()
            (row,) = bench(dataset, [strategy], repeats=args.repeats, seed=args.seed)
            rows.append(row)
            s, r = row.standards, row.random
            applies = r.std2 is not None and r.std2 > 20
            met = (
                (
                    s.std1 is not None
                    and s.std2 is not None
                    and s.std1 <= 0.5 * r.std1
                    and s.std2 <= 0.4 * r.std2
                )
                if applies
                else None
            )
            verdict = "n/a (random <= 20)" if met is None else ("met" if met else "MISSED")
            print(
                f"| {row.dataset} | {row.size:,} | {strategy} | "
                f"{s.std1 if s.std1 is not None else f'> {row.cap}'} | "
                f"{s.std2 if s.std2 is not None else f'> {row.cap}'} | {r.std1} / {r.std2} | "
                f"{share(s.std1, r.std1)} | {share(s.std2, r.std2)} | {verdict} | "
                f"{time.time() - started:.0f} |",
                flush=True,
            )
    if args.json:
        records = [
            row.to_json() | {"first_hits": [t.first_hit for t in row.traces]} for row in rows
        ]
        args.json.write_text(json.dumps({"results": records}, indent=2) + "\n")
    if args.plot:
        plot_boxes(rows, normalized, args.plot)
    summary = [r for r in rows if r.strategy == strategies[0] and r.standards.std2]
    if summary:
        ratio = np.mean([r.standards.std2 / r.random.std2 for r in summary])
        print(f"\nmean std2 / random std2 for {strategies[0]}: {ratio:.2f}")


if __name__ == "__main__":
    main()
