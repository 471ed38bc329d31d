"""Whole-process time of a no-op `annotune build` (OUT already holds the header, its files
unchanged), next to `cp` of the same header: what every `make` pays for each generated header.
Two cases: a device with a tuned header, and one without (the defaults header, which the first
call works out from the source and later calls take from the build cache).

    python benchmarks/build_noop.py [--runs 5] [--source examples/cuda/gemm/gemm.cu]
        [--device "NVIDIA H100 80GB HBM3"] [--json]

Copies SOURCE's folder to a temporary one (the build cache goes into its workspace), runs
`python -m annotune build SOURCE -o OUT` from this checkout with ANNOTUNE_DEVICE set, once
untimed (to fill OUT, the cache and the bytecode cache: that first call's time is reported
too), then `--runs` times; prints the medians and their ratio to `cp`. Target (issue 38): at
most 0.15 s in either case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotune.emit import tuned_header_path  # noqa: E402  (runs from a checkout, uninstalled)
from annotune.run.device import DEVICE_ENV  # noqa: E402

NO_HEADER = "a device with no tuned header"


def seconds(command: list[str], env: dict[str, str]) -> float:
    """Wall time of one run of `command` in a new process that must exit 0 (stderr dropped:
    the defaults case warns each time)."""
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def case(source: Path, device: str, runs: int, out: Path) -> dict[str, float]:
    """The first call's time and the median of `runs` no-op calls for `device`."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, DEVICE_ENV: device}
    build = [sys.executable, "-m", "annotune", "build", str(source), "-o", str(out)]
    first = seconds(build, env)
    written = out.stat().st_mtime_ns
    median = statistics.median(seconds(build, env) for _ in range(runs))
    if out.stat().st_mtime_ns != written:
        sys.exit(f"{out} was rewritten: the timed runs were not no-ops")
    return {"first_s": first, "noop_s": median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", type=Path, default=ROOT / "examples/cuda/gemm/gemm.cu")
    parser.add_argument("--device", default="NVIDIA H100 80GB HBM3")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    header = tuned_header_path(args.source, args.device)
    if not header.is_file():
        sys.exit(f"no tuned header {header}: the tuned case needs one (pick another --device)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "src"
        shutil.copytree(args.source.parent, folder, ignore=shutil.ignore_patterns(".annotune"))
        source = folder / args.source.name
        tuned = case(source, args.device, args.runs, Path(tmp) / "tuned.h")
        defaults = case(source, NO_HEADER, args.runs, Path(tmp) / "defaults.h")
        cp = [["cp", str(header), str(Path(tmp) / "cp.h")]] * args.runs
        cp_s = statistics.median(seconds(command, dict(os.environ)) for command in cp)

    if args.json:
        report = {"runs": args.runs, "header": str(header), "cp_s": cp_s}
        print(json.dumps({**report, "tuned": tuned, "defaults": defaults}))
        return
    print(f"| `annotune build` (median of {args.runs}) | first call s | no-op s | no-op / cp |")
    print("|---|---|---|---|")
    for label, row in (("tuned header", tuned), ("no tuned header (defaults)", defaults)):
        ratio = row["noop_s"] / cp_s
        print(f"| {label} | {row['first_s']:.3f} | {row['noop_s']:.3f} | {ratio:.1f}x |")
    print(f"| cp of the same header | | {cp_s:.3f} | 1.0x |")


if __name__ == "__main__":
    main()
