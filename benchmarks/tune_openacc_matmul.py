"""End to end on the host: tune the OpenACC matmul example from a poor default tile, then time
the default and the tuned build side by side (interleaved runs, medians).

    python benchmarks/tune_openacc_matmul.py [--budget 40] [--default-tile 4] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "openacc" / "matmul"
TIME = re.compile(r"^time_ms ([0-9.]+)$", re.MULTILINE)


def build(source: Path, output: Path, *extra: str) -> None:
    subprocess.run(
        ["gcc", "-O2", "-fopenacc", *extra, str(source), "-o", str(output), "-lm"], check=True
    )


def run_ms(binary: Path) -> float:
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    return float(TIME.search(out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--default-tile", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--strategy", default="iterml")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="annotune-bench-"))
    source = work / "matmul.c"
    text = (EXAMPLE / "matmul.c").read_text()
    for name in ("TILE_I", "TILE_J", "TILE_K"):
        text = re.sub(rf"#define {name} \d+", f"#define {name} {args.default_tile}", text)
    source.write_text(text)

    tuned = subprocess.run(
        [
            sys.executable,
            "-m",
            "annotune",
            "tune",
            str(source),
            "--budget",
            str(args.budget),
            "--strategy",
            args.strategy,
            "--device",
            "bench-host",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    report = json.loads(tuned.stdout)
    header = Path(report["header"])

    default_bin, tuned_bin = work / "matmul-default", work / "matmul-tuned"
    build(source, default_bin)
    build(source, tuned_bin, "-include", str(header))
    default_times, tuned_times = [], []
    for _ in range(args.repeats):
        default_times.append(run_ms(default_bin))
        tuned_times.append(run_ms(tuned_bin))
    d, t = statistics.median(default_times), statistics.median(tuned_times)

    print(f"default parameters: {report['default']['params']}")
    print(f"tuned parameters:   {report['best']['params']}")
    print(f"{'':28}{'default':>10}{'tuned':>10}{'speedup':>10}")
    label = f"median of {args.repeats} runs (ms)"
    print(f"{label:28}{d:10.2f}{t:10.2f}{d / t:9.2f}x")
    print(
        f"measurements: {report['evaluations']} of {report['space_size']} legal configurations "
        f"({report['invalid']} invalid), strategy {args.strategy}"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
