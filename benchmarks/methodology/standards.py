"""`annotune bench`'s Standard 1 / Standard 2 for IterML as it is and for a variant of its
options, on the same seeds: the check that a change made for the judge keeps the bench.

    PYTHONPATH=. python benchmarks/methodology/standards.py --options '{"initial": 10}' \
        --repeats 100 --workers 1 [DATASET ...]

Default datasets: every shared recording (`../shared/data/replay/*.json.gz`). Prints one row
per dataset: measurements to Standard 1 / Standard 2 for each, "never" when not reached within
the cap (random search's exact Standard 2, as `annotune bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from annotune.bench import bench
from annotune.results.replay import load_replay

REPLAY = Path(__file__).resolve().parents[3] / "shared" / "data" / "replay"


def cell(value: int | None) -> str:
    return "never" if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--options", required=True, help="the variant's IterML options (JSON)")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    variant = json.loads(args.options)
    paths = args.datasets or sorted(REPLAY.glob("*.json.gz"))
    print(f"| dataset | iterml std1 / std2 | iterml {args.options} std1 / std2 | seconds |")
    print("|---|---|---|---:|")
    for path in paths:
        dataset = load_replay(path)
        started = time.monotonic()
        rows = []
        for options in ({}, variant):
            (row,) = bench(
                dataset,
                ["iterml"],
                repeats=args.repeats,
                seed=args.seed,
                options={"iterml": options},
                workers=args.workers,
            )
            rows.append(f"{cell(row.standards.std1)} / {cell(row.standards.std2)}")
        seconds = time.monotonic() - started
        print(f"| {dataset.name} | {rows[0]} | {rows[1]} | {seconds:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
