"""Transfer scale: how long the zero-shot step (CV-DFS, then the ranking fit: what `annotune
predict` does once the sources are gathered) takes as source GPUs are added, and how long
`annotune bench --transfer` takes on six GPUs (issue 38).

Only four recorded convolution GPUs share one space (A100, A4000, MI250X, W6600), so the
extra GPUs are synthetic, made from a recorded one (A100, MI250X, W6600 in turn; never the
A4000, the prediction's target, so that nothing of the target leaks into its sources):

* times: the recorded time of every configuration times exp(0.1 * z) per configuration and
  exp(0.2 * u) per value of every parameter (z, u standard normal, seeded by the GPU's
  number), so that the optimum moves as it does between GPUs of one family;
* device features (a `[[gpu]]`-style entry, stored as the file's own, as a T4 file stores
  them): the base GPU's, every size and speed (all but vendor and compute capability)
  scaled by 0.75 + 0.1 * k for the k-th synthetic GPU.

The zero-shot's quality is the normalized performance on the A4000 of the configuration it
ranks first (from the three recorded sources alone: 0.985, docs/experiments/transfer.md).

`--compare` instead leaves each recorded GPU out and scores CV-DFS's subsets with the forest
and with the blend (`annotune.transfer.adapt.select_features`'s `ranking`), where both run.

Usage: PYTHONPATH=. python benchmarks/transfer_scale.py [--sources 3 5 10] [--bench-gpus 6]
[--repeats 3] [--ranking auto] [--compare]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from annotune.bench.transfer import as_task, device_features, transfer_bench
from annotune.core.records import Measurement
from annotune.results.replay import ReplayDataset, load_replay
from annotune.results.t4 import write_t4
from annotune.search.multitask import encode_space, score_space, sources_for
from annotune.transfer.adapt import select_features
from annotune.transfer.features import DeviceFeatures, dataset_device
from annotune.transfer.resolve import shared_names

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "replay"
CONVOLUTION = ROOT / "examples" / "cuda" / "convolution" / "convolution.cu"
RECORDED = ("A100", "A4000", "MI250X", "W6600")
TARGET = "A4000"
BASES = ("A100", "MI250X", "W6600")
KEPT = ("vendor_nvidia", "compute_capability")


def synthetic(base: ReplayDataset, k: int) -> ReplayDataset:
    """The k-th synthetic GPU made from `base` (see the module docstring)."""
    rng = np.random.default_rng(1000 + k)
    values = base.candidates.values
    log_factor = 0.1 * rng.standard_normal(len(base))
    for column in values.T:
        levels, index = np.unique(column, return_inverse=True)
        log_factor += 0.2 * rng.standard_normal(levels.size)[index]
    features = device_features(base).features()
    assert features is not None
    scale = 0.75 + 0.1 * k
    entry = DeviceFeatures(
        name=f"Synthetic GPU {k} (from {dataset_device(base)})",
        architecture=features.architecture,
        values={n: v if n in KEPT else v * scale for n, v in features.values.items()},
        source="user",
    )
    return dataclasses.replace(
        base,
        name=f"synthetic_{k}",
        times=base.times * np.exp(log_factor),
        device=entry.name,
        device_features=entry.to_json(),
    )


def sources_of(count: int, recorded: dict[str, ReplayDataset]) -> list[ReplayDataset]:
    """The recorded non-target GPUs, then synthetic ones, `count` in all."""
    chosen = [recorded[g] for g in RECORDED if g != TARGET][:count]
    k = 0
    while len(chosen) < count:
        chosen.append(synthetic(recorded[BASES[k % len(BASES)]], k))
        k += 1
    return chosen


def zero_shot_row(count: int, recorded: dict[str, ReplayDataset], ranking: str) -> str:
    target = recorded[TARGET]
    sources = sources_of(count, recorded)
    resolved = [device_features(d) for d in [target, *sources]]
    names = shared_names(resolved)
    tasks = [as_task(d, f, names) for d, f in zip(sources, resolved[1:], strict=True)]
    aligned = sources_for(tasks, target.candidates)
    space = encode_space(target.candidates)
    rng = np.random.default_rng(0)  # drawn from as `adapt.zero_shot` draws
    started = time.perf_counter()
    selection = select_features(space, aligned, names, rng=rng, ranking=ranking)
    selected = time.perf_counter() - started
    scores = score_space(space, aligned, selection.columns, resolved[0].vector(names), rng)
    total = time.perf_counter() - started
    pick = float(target.normalized()[np.argmax(scores)])
    return (
        f"| {count} | {selected:.1f} | {total:.1f} | {selection.ranking} "
        f"| {selection.describe()} | {pick:.3f} |"
    )


def ranking_rows(recorded: dict[str, ReplayDataset]) -> list[str]:
    """Each recorded GPU left out, its zero-shot with CV-DFS scored by the forest and by the
    blend: does the cheaper model choose as well where both can run?"""
    lines = []
    for held in RECORDED:
        target = recorded[held]
        sources = [recorded[g] for g in RECORDED if g != held]
        resolved = [device_features(d) for d in [target, *sources]]
        names = shared_names(resolved)
        tasks = [as_task(d, f, names) for d, f in zip(sources, resolved[1:], strict=True)]
        aligned = sources_for(tasks, target.candidates)
        space = encode_space(target.candidates)
        cells = []
        for ranking in ("forest", "blend"):
            rng = np.random.default_rng(0)
            selection = select_features(space, aligned, names, rng=rng, ranking=ranking)
            scores = score_space(space, aligned, selection.columns, resolved[0].vector(names), rng)
            pick = float(target.normalized()[np.argmax(scores)])
            cells.append(f"{selection.describe()} | {pick:.3f}")
        lines.append(f"| {held} | {' | '.join(cells)} |")
    return lines


def predict_row(count: int, recorded: dict[str, ReplayDataset]) -> str:
    """`annotune predict` for the A4000 from `count` GPUs' result files, timed as a user waits
    for it: a fresh process that reads the files (the synthetic ones written as T4 files with
    their device features, as `annotune export` writes them), gathers, selects and ranks."""
    target = recorded[TARGET]
    with tempfile.TemporaryDirectory() as scratch:
        files = []
        for dataset in sources_of(count, recorded):
            if dataset.name.startswith("synthetic_"):
                path = Path(scratch) / f"{dataset.name}.t4.json"
                write_t4(
                    path,
                    _measurements(dataset),
                    device=dataset.device,
                    device_features=dataset.device_features,
                )
            else:
                path = DATA / f"{dataset.name}.json.gz"
            files += ["--transfer-from", str(path)]
        command = [sys.executable, "-m", "annotune", "predict", str(CONVOLUTION)]
        command += ["--device", target.device, *files]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"annotune predict failed:\n{done.stderr}")
    return f"| {count} | {seconds:.1f} |"


def _measurements(dataset: ReplayDataset) -> list[Measurement]:
    names = dataset.candidates.names
    rows = []
    for values, time_ms, error in zip(
        dataset.candidates.values, dataset.times, dataset.errors, strict=True
    ):
        params = {
            n: int(v) if float(v).is_integer() else float(v)
            for n, v in zip(names, values, strict=True)
        }
        if error:
            rows.append(Measurement(params, "runtime_error", error=error))
        else:
            rows.append(Measurement(params, "ok", float(time_ms), (float(time_ms),)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, nargs="*", default=[3, 5, 10])
    parser.add_argument("--bench-gpus", type=int, default=6, help="0: no bench --transfer")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranking", default="auto", help="CV-DFS's model for --sources rows")
    parser.add_argument(
        "--predict", type=int, nargs="*", default=[3, 10], help="annotune predict from N GPUs"
    )
    parser.add_argument(
        "--compare", action="store_true", help="only: forest against blend, recorded GPUs"
    )
    args = parser.parse_args()
    recorded = {g: load_replay(DATA / f"convolution_{g}.json.gz") for g in RECORDED}
    if args.compare:
        print("| left out | forest: features | zero-shot | blend: features | zero-shot |")
        print("|---|---|---|---|---|")
        for line in ranking_rows(recorded):
            print(line, flush=True)
        return
    print(f"target {TARGET}; seconds of wall time (the machine may be shared)")
    print("| sources | CV-DFS s | zero-shot s | ranking | features | zero-shot on target |")
    print("|---|---|---|---|---|---|")
    for count in args.sources:
        print(zero_shot_row(count, recorded, args.ranking), flush=True)
    if args.predict:
        print("\n| `annotune predict` from GPUs | wall s (whole process) |")
        print("|---|---|")
        for count in args.predict:
            print(predict_row(count, recorded), flush=True)
    if args.bench_gpus:
        group = [recorded[g] for g in RECORDED]
        group += [synthetic(recorded[BASES[k % 3]], k) for k in range(args.bench_gpus - 4)]
        started = time.perf_counter()
        rows = transfer_bench(group, repeats=args.repeats)
        elapsed = time.perf_counter() - started
        print(f"\nbench --transfer, {len(group)} GPUs, {args.repeats} repeats: {elapsed:.0f} s")
        print("| target | features | zero-shot | transfer std1/std2 | iterml std1/std2 |")
        print("|---|---|---|---|---|")
        for row in rows:
            print(
                f"| {row.device} | {row.features.describe()} | {row.zero_shot:.3f} "
                f"| {row.transfer.std1} / {row.transfer.std2} "
                f"| {row.iterml.std1} / {row.iterml.std2} |"
            )


if __name__ == "__main__":
    main()
