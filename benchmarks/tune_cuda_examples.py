"""On a GPU: tune CUDA examples, then time each default and tuned build side by side.

    python benchmarks/tune_cuda_examples.py [EXAMPLE ...] [--budget 40] [--seconds S]
        [--repeats 3] [--runs 9] [--json FILE]

Each example (default: every one under examples/cuda) is tuned in place with `annotune tune
--mode program` (the whole program, every kernel it launches, as the builds compared here run
it; the examples also declare kernels, which `--mode auto` would tune instead), so its header
lands in examples/cuda/NAME/tuned/<gpu>/ ready to commit, and its measurements
in examples/cuda/NAME/.annotune/. Then the default and the tuned build, compiled with the same
nvcc command, run interleaved `--runs` times each; the table gives their median kernel times.
Needs nvcc and an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cuda"
TIMING_INCLUDE = ROOT / "annotune" / "include"
TIME = re.compile(r"^annotune-time-ms: ([0-9.eE+-]+)$", re.MULTILINE)


def example_names() -> list[str]:
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / f"{p.name}.cu").is_file())


def tune(source: Path, args: argparse.Namespace) -> tuple[dict, float]:
    argv = [sys.executable, "-m", "annotune", "tune", str(source), "--mode", "program", "--json"]
    argv += ["--budget", str(args.budget), "--repeats", str(args.repeats)]
    argv += ["--strategy", args.strategy, "--seed", str(args.seed)]
    if args.seconds is not None:
        argv += ["--seconds", str(args.seconds)]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"annotune tune {source.name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), time.monotonic() - started


def build(source: Path, output: Path, nvcc_flags: list[str], *extra: str) -> None:
    argv = ["nvcc", *nvcc_flags, f"-I{TIMING_INCLUDE}", *extra, str(source), "-o", str(output)]
    subprocess.run(argv, check=True, capture_output=True, text=True)


def kernel_ms(binary: Path) -> float:
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    times = [float(t) for t in TIME.findall(out)]
    if not times:
        raise RuntimeError(f"{binary.name} printed no annotune-time-ms line")
    return statistics.median(times)


def compare(name: str, report: dict, args: argparse.Namespace, work: Path) -> tuple[float, float]:
    """Median kernel times of the default and the tuned build, runs interleaved."""
    source = EXAMPLES / name / f"{name}.cu"
    default_bin, tuned_bin = work / f"{name}-default", work / f"{name}-tuned"
    flags = args.nvcc_flags.split()
    build(source, default_bin, flags)
    build(source, tuned_bin, flags, "-include", report["header"])
    default_times, tuned_times = [], []
    kernel_ms(default_bin)  # first runs pay for loading the module; keep them out
    kernel_ms(tuned_bin)
    for _ in range(args.runs):
        default_times.append(kernel_ms(default_bin))
        tuned_times.append(kernel_ms(tuned_bin))
    return statistics.median(default_times), statistics.median(tuned_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", help="names under examples/cuda (default: all)")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seconds", type=float, help="stop each example's search after this")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration")
    parser.add_argument("--runs", type=int, default=9, help="runs of each build to compare")
    parser.add_argument("--strategy", default="iterml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nvcc-flags", default="-O3", help="for the compared builds")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    names = args.examples or example_names()
    unknown = sorted(set(names) - set(example_names()))
    if unknown:
        parser.error(f"no such example: {', '.join(unknown)} (have: {', '.join(example_names())})")

    rows = []
    with tempfile.TemporaryDirectory(prefix="annotune-cuda-") as work:
        for name in names:
            print(f"tuning {name} ...", file=sys.stderr, flush=True)
            try:
                report, seconds = tune(EXAMPLES / name / f"{name}.cu", args)
                default_ms, tuned_ms = compare(name, report, args, Path(work))
            except (RuntimeError, subprocess.CalledProcessError) as error:
                detail = getattr(error, "stderr", None) or error
                print(f"  {name}: skipped: {detail}", file=sys.stderr, flush=True)
                continue
            rows.append(
                {
                    "example": name,
                    "device": report["device"],
                    "space_size": report["space_size"],
                    "evaluations": report["evaluations"],
                    "invalid": report["invalid"],
                    "tune_seconds": round(seconds, 1),
                    "default_params": report["default"]["params"],
                    "best_params": report["best"]["params"],
                    "default_ms": default_ms,
                    "tuned_ms": tuned_ms,
                    "failures": report["failures"],
                }
            )
            print(f"  {name}: {default_ms:.4f} -> {tuned_ms:.4f} ms", file=sys.stderr, flush=True)
            if args.json:  # after every example, so a run cut short keeps what it measured
                args.json.write_text(json.dumps(rows, indent=2) + "\n")

    print(f"device: {rows[0]['device'] if rows else '?'}; medians of {args.runs} runs each")
    header = f"{'example':10}{'legal':>8}{'measured':>9}{'invalid':>8}{'tune s':>8}"
    print(f"{header}{'default ms':>12}{'tuned ms':>10}{'speedup':>9}  best")
    for r in rows:
        best = " ".join(f"{k}={v}" for k, v in r["best_params"].items())
        print(
            f"{r['example']:10}{r['space_size'] or 0:>8}{r['evaluations']:>9}{r['invalid']:>8}"
            f"{r['tune_seconds']:>8.0f}{r['default_ms']:>12.4f}{r['tuned_ms']:>10.4f}"
            f"{r['default_ms'] / r['tuned_ms']:>8.2f}x  {best}"
        )
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
