"""Held-out problem sizes on the recorded host matmul data: what a size-aware header reaches.

    python benchmarks/sizes.py [--seeds 5] [DATASET ...]

Default: benchmarks/data/matmul_host_N*.json.gz (recorded by benchmarks/record_sizes.py), with
the example's default configuration read by `annotune scan`. Each size is held out in turn
(`annotune.bench.sizes`); this prints, per held-out size, the fraction of its optimum reached by
the nearest tuned size's best configuration, the model's choice (seed 0, and its mean and
minimum over `--seeds` seeds, since the forests are random), the single best configuration of
the other sizes and the default, then the means. Given DATASETs are evaluated without a
default.

The fractions are relative to the held-out size's best recorded time, itself the minimum of
noisy medians; the "noise ceiling" column says how far noise alone goes: the configuration
with the best median over the odd-numbered repeats at the held-out size itself, as a fraction
of the optimum of the medians over the even-numbered ones (when the file keeps each repeat's
time, as Kernel Tuner's `times`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
SOURCE = ROOT / "examples" / "openacc" / "matmul" / "matmul.c"

sys.path.insert(0, str(ROOT))

from annotune.bench.sizes import held_out_sizes, mean_fractions  # noqa: E402
from annotune.results.replay import load_replay  # noqa: E402


def scanned_default(source: Path) -> dict[str, float]:
    scan = subprocess.run(
        [sys.executable, "-m", "annotune", "scan", str(source), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return {p["name"]: p["default"] for p in json.loads(scan.stdout)["params"]}


def noise_ceiling(path: Path) -> float | None:
    """Tuned at the size itself on half the repeats, judged on the other half (see above)."""
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    records = [r for r in data["cache"].values() if isinstance(r.get("time"), int | float)]
    if not records or any(len(r.get("times") or ()) < 4 for r in records):
        return None
    odd = np.array([np.median(r["times"][1::2]) for r in records])
    even = np.array([np.median(r["times"][0::2]) for r in records])
    return float(even.min() / even[np.argmin(odd)])


def text(values: tuple[float, ...]) -> str:
    return ",".join(f"{v:g}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()

    paths = args.datasets or sorted(DATA.glob("matmul_host_N*.json.gz"))
    datasets = [load_replay(p) for p in paths]
    default = None
    if not args.datasets:
        scanned = scanned_default(SOURCE)
        default = {n: scanned[n] for n in datasets[0].names}
    runs = [held_out_sizes(datasets, seed=s, default=default) for s in range(args.seeds)]
    rows = runs[0]
    model = np.array([[row.model.fraction for row in run] for run in runs])

    print(f"configurations as {','.join(rows[0].names)}; default {default}")
    ceilings = {d.name: noise_ceiling(p) for d, p in zip(datasets, paths, strict=True)}
    head = ("held out", "best there", "nearest", "model", f"model {args.seeds} seeds", "single")
    print(f"| {' | '.join(head)} | default | noise ceiling |")
    print("|" + "---|" * (len(head) + 2))
    for i, row in enumerate(rows):
        where = "" if row.between else " (outside)"
        nearest = f"{row.nearest.fraction:.3f} ({text(row.nearest_size)}: "
        nearest += f"{text(row.nearest.config)})"
        cells = [
            f"{text(row.problem_size)}{where}",
            text(row.best),
            nearest,
            f"{row.model.fraction:.3f} ({text(row.model.config)})",
            f"{model[:, i].mean():.3f} (min {model[:, i].min():.3f})",
            f"{row.single_best.fraction:.3f} ({text(row.single_best.config)})",
            f"{row.default.fraction:.3f}" if row.default is not None else "-",
            f"{c:.3f}" if (c := ceilings[row.dataset]) is not None else "-",
        ]
        print(f"| {' | '.join(cells)} |")
    means = mean_fractions(rows)
    cells = [
        "mean",
        "",
        f"{means['nearest']:.3f}",
        f"{means['model']:.3f}",
        f"{model.mean():.3f}",
        f"{means['single_best']:.3f}",
        f"{means['default']:.3f}" if "default" in means else "-",
        "",
    ]
    print(f"| {' | '.join(cells)} |")
    print(f"model's size feature (seed 0): {sorted({row.features.describe() for row in rows})}")
    for warning in dict.fromkeys(w for row in rows for w in row.warnings):
        print(f"warning: {warning}")


if __name__ == "__main__":
    main()
