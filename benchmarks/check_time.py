"""How long `annotune check FILE` takes on an unchanged tuned header (issue 47: at most 0.3 s,
fast enough for every CI build), beside `annotune build` on the same files.

Tunes copies of the OpenACC examples on the host (small budgets), then runs each command
`--runs` times as a fresh process and prints the minimum and median wall time:

    python benchmarks/check_time.py [--runs 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("matmul/matmul.c", "ldc/ldc.c")


def annotune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "annotune", *args], cwd=cwd, capture_output=True, text=True
    )


def timed(args: list[str], cwd: Path, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = annotune(*args, cwd=cwd)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"annotune {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    work = Path(tempfile.mkdtemp(prefix="check-time-"))
    print("| example | check min s | check median s | build min s | build median s |")
    print("|---|---:|---:|---:|---:|")
    for example in EXAMPLES:
        folder = work / example.split("/")[0]
        shutil.copytree(ROOT / "examples" / "openacc" / example.split("/")[0], folder)
        shutil.rmtree(folder / "tuned", ignore_errors=True)
        source = Path(example).name
        tune = annotune("tune", source, "--budget", "3", "--recheck-rounds", "6", cwd=folder)
        if tune.returncode != 0:
            raise SystemExit(f"tune {example}: exit {tune.returncode}\n{tune.stderr}")
        check = timed(["check", source], folder, runs)
        build = timed(["build", source, "-o", "out.h"], folder, runs)
        print(f"| {example} | {check[0]:.3f} | {check[1]:.3f} | {build[0]:.3f} | {build[1]:.3f} |")


if __name__ == "__main__":
    main()
