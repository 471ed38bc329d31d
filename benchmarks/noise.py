"""Tuning under noise: is the true winner found, and is a speedup claimed where none exists?

Two host programs with one tunable that matters (FAST, default 1) and one that does not (PAD):
in the first, FAST=6 does 1/1.3 of the work (a real 1.3x effect); in the second every
configuration does the same work (no effect at all). Each is tuned with `annotune tune` on
several seeds while other processes load the machine in random bursts, as on a shared node.

    python benchmarks/noise.py [--seeds 10] [--budget 16] [--json]

Per program it prints how often the winner (FAST=6) was chosen, how often a speedup was
claimed, and the median number of rounds the final check ran (`recheck.rounds`; it stops once
it knows) and its median seconds (`wall_breakdown.recheck`). A claim is the report's own: with
an interleaved final check (`speedup_interval` in `--json`), a speedup whose 95% interval lies
above 1; without one, any best that is not the default (the report then prints "N.NNx
faster"). Run it against another checkout with
`PYTHONPATH=/path/to/checkout python benchmarks/noise.py` to compare versions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = """\
#include "annotune_timing.h"
#ifndef FAST
#define FAST 1 // @tune values(1, 2, 3, 4, 5, 6, 7, 8)
#endif
#ifndef PAD
#define PAD 1 // @tune values(1, 2, 3, 4)
#endif
int main(void) {{
  double share = FAST == 6 ? 1.0 / {effect} : 1.0;
  long n = (long)({work}L * share);
  volatile double x = 0;
  ANNOTUNE_TIMER_START();
  for (long i = 0; i < n; i++) x += (double)i * 1e-9;
  ANNOTUNE_TIMER_STOP();
  annotune_report_check(1.0);
  return 0;
}}
"""
WINNER = 6


def load(seed: int, stop: multiprocessing.Event) -> None:
    """Busy for a random while, idle for a random while, until told to stop."""
    rng = random.Random(seed)
    while not stop.is_set():
        until = time.monotonic() + rng.uniform(0.05, 0.3)
        while time.monotonic() < until:
            pass
        time.sleep(rng.uniform(0.05, 0.3))


def tune(source: Path, seed: int, budget: int) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "annotune",
            "tune",
            str(source),
            "--budget",
            str(budget),
            "--seed",
            str(seed),
            "--fresh",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"annotune tune failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def claimed(report: dict) -> bool:
    if "speedup_interval" in report:
        interval = report["speedup_interval"]
        return interval is not None and interval[0] > 1.0
    return report["best"]["params"] != report["default"]["params"]


def reported_speedup(report: dict) -> float:
    if report.get("speedup") is not None:
        return float(report["speedup"])
    return report["default"]["time"] / report["best"]["time"]


def median_of(reports: list[dict], value) -> float | None:
    """The median of `value(report)` over the reports that have one (a tune whose final check
    did not run has none)."""
    found = [v for v in map(value, reports) if v is not None]
    return statistics.median(found) if found else None


def rounds(report: dict) -> int | None:
    return report["recheck"]["rounds"] if report.get("recheck") else None


def recheck_seconds(report: dict) -> float | None:
    return (report.get("wall_breakdown") or {}).get("recheck")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--work", type=int, default=8_000_000, help="loop iterations per run")
    parser.add_argument("--loaders", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="annotune-noise-"))
    rows = []
    stop = multiprocessing.Event()
    loaders = [
        multiprocessing.Process(target=load, args=(i, stop), daemon=True)
        for i in range(args.loaders)
    ]
    for process in loaders:
        process.start()
    try:
        for label, effect in (("1.3x effect", 1.3), ("no effect", 1.0)):
            folder = work / label.replace(" ", "-").replace(".", "_")
            folder.mkdir()
            source = folder / "noise.c"
            source.write_text(PROGRAM.format(effect=effect, work=args.work))
            reports = [tune(source, seed, args.budget) for seed in range(args.seeds)]
            rows.append(
                {
                    "program": label,
                    "seeds": args.seeds,
                    "winner_chosen": sum(r["best"]["params"]["FAST"] == WINNER for r in reports),
                    "speedup_claimed": sum(claimed(r) for r in reports),
                    "median_reported_speedup": round(
                        statistics.median(reported_speedup(r) for r in reports), 3
                    ),
                    "median_recheck_rounds": median_of(reports, rounds),
                    "median_recheck_s": median_of(reports, recheck_seconds),
                }
            )
    finally:
        stop.set()
        for process in loaders:
            process.join(timeout=5)
    if args.json:
        print(json.dumps(rows))
        return
    print(
        f"{'program':<14}{'seeds':>6}{'winner':>8}{'claimed':>9}{'median speedup':>16}"
        f"{'check rounds':>14}{'check s':>9}"
    )
    for row in rows:
        checked = [
            "-" if value is None else f"{value:g}"
            for value in (row["median_recheck_rounds"], row["median_recheck_s"])
        ]
        print(
            f"{row['program']:<14}{row['seeds']:>6}{row['winner_chosen']:>8}"
            f"{row['speedup_claimed']:>9}{row['median_reported_speedup']:>16.3f}"
            f"{checked[0]:>14}{checked[1]:>9}"
        )


if __name__ == "__main__":
    main()
