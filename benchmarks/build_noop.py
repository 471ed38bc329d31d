"""Whole-process time of a no-op `annotune build` (OUT already holds the tuned header), next to
`cp` of the same header: what every `make` pays for each generated header.

    python benchmarks/build_noop.py [--runs 5] [--source examples/cuda/gemm/gemm.cu]
        [--device "NVIDIA H100 80GB HBM3"] [--json]

Runs `python -m annotune build SOURCE -o OUT` from this checkout with ANNOTUNE_DEVICE=DEVICE,
once untimed (to fill OUT and the bytecode cache), then `--runs` times; prints the medians and
their ratio. Target (architecture issue): at most 0.3 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
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


def median_seconds(command: list[str], runs: int, env: dict[str, str]) -> float:
    """Median wall time of `runs` runs of `command`, each in a new process that must exit 0."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", type=Path, default=ROOT / "examples/cuda/gemm/gemm.cu")
    parser.add_argument("--device", default="NVIDIA H100 80GB HBM3")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    header = tuned_header_path(args.source, args.device)
    if not header.is_file():
        sys.exit(f"no tuned header {header}: the no-op path needs one (pick another --device)")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, DEVICE_ENV: args.device}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "build.h"
        build = [sys.executable, "-m", "annotune", "build", str(args.source), "-o", str(out)]
        subprocess.run(build, env=env, check=True)
        written = out.stat().st_mtime_ns
        build_s = median_seconds(build, args.runs, env)
        if out.stat().st_mtime_ns != written:
            sys.exit(f"{out} was rewritten: the timed runs were not no-ops")
        cp_s = median_seconds(["cp", str(header), str(Path(tmp) / "cp.h")], args.runs, env)

    if args.json:
        report = {"runs": args.runs, "header": str(header), "build_s": build_s, "cp_s": cp_s}
        print(json.dumps({**report, "ratio": build_s / cp_s}))
        return
    print(f"| command (median of {args.runs}) | seconds |")
    print("|---|---|")
    print(f"| annotune build (no-op) | {build_s:.3f} |")
    print(f"| cp of the same header | {cp_s:.3f} |")
    print(f"| ratio | {build_s / cp_s:.1f}x |")


if __name__ == "__main__":
    main()
