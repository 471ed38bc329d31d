"""Score annotune's strategies beside Kernel Tuner's with the field's own judge.

`autotuning-methodology` (Willemsen et al. 2024, "A methodology for comparing optimization
algorithms for auto-tuning") replays each optimizer in Kernel Tuner's simulation mode on a
brute-forced space, charges every configuration its recorded compile, verification and
benchmark time and the optimizer its own wall time, and scores the best-found performance over
*tuning time* against random search calculated exactly on the space: 0 is random search, 1 is
the optimum from the first moment. annotune's strategies enter through Kernel Tuner's
custom-strategy hook (`annotune_strategy.py`, beside this file).

For every shared recorded space (`shared/data/replay/*.json.gz`, Kernel Tuner caches) this
writes, under `--out`, what the package reads: a T1 input file (the space's parameters and
the conditions that make its legal configurations, checked to give exactly the recorded
ones), the cache for the simulation and the same space as a T4 results file for the
statistics; then one experiments file per strategy, run with NumPy's and Python's global
generators seeded from (`--seed`, space, strategy), so a rerun replays the same choices (only
wall time differs). `transfer` is warm-started from the other GPUs of the space's group, with
the device features `annotune bench --transfer` chooses. Prints one table: space x strategy ->
score.

    /tmp/methvenv/bin/python benchmarks/methodology/judge.py

Needs `autotuning-methodology` and `kernel_tuner` beside annotune (a separate environment;
see benchmarks/README.md, "The field's judge").
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import pickle
import random
import shutil
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from autotuning_methodology.report_experiments import get_strategy_scores

from annotune.bench import load_recordings
from annotune.bench.transfer import device_features, group_by_space, warm_start
from annotune.results.replay import ReplayDataset

HERE = Path(__file__).resolve().parent
ADAPTER = HERE / "annotune_strategy.py"
DEFAULT_DATA = HERE.parents[2] / "shared" / "data" / "replay"

ANNOTUNE = ("iterml", "transfer")
KERNEL_TUNER = (
    "simulated_annealing",
    "pso",
    "dual_annealing",
    "genetic_algorithm",
    "random_sample",
)

# Conditions for the spaces no shipped T1 file describes: the kernels' own rules (CLBlast's
# divisibility constraints; Kernel Tuner's convolution example's block and tile limits).
# `t1_input` checks that they give exactly the recorded configurations before anything runs.
CONDITIONS: dict[str, tuple[str, ...]] = {
    "gemm_RTX_3090": (
        "KWG % KWI == 0",
        "MWG % (MDIMC * VWM) == 0",
        "NWG % (NDIMC * VWN) == 0",
        "MWG % (MDIMA * VWM) == 0",
        "NWG % (NDIMB * VWN) == 0",
        "KWG % ((MDIMC * NDIMC) / MDIMA) == 0",
        "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
    ),
    "convolution_RTX_3090": (
        "block_size_x * block_size_y >= 64",
        "block_size_x * block_size_y <= 1024",
        "tile_size_x * tile_size_y < 30",
    ),
}

_ERROR_KINDS = {
    "CompilationFailedConfig": "compile",
    "RuntimeFailedConfig": "runtime",
    "InvalidConfig": "constraints",
}


@dataclass(frozen=True)
class Space:
    """One recorded space: `application` and `gpu` are the file name's two parts."""

    name: str
    application: str
    gpu: str
    cache: dict[str, Any]
    dataset: ReplayDataset


@dataclass(frozen=True)
class Score:
    """The package's score of one strategy on one space: its mean and spread over time."""

    space: str
    strategy: str
    score: float
    spread: float
    seconds: float
    strategy_share: float


def load_space(path: Path, dataset: ReplayDataset) -> Space:
    name = path.name.removesuffix(".json.gz")
    application, _, gpu = name.partition("_")
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        cache = json.load(stream)
    return Space(name, application, gpu, cache, dataset)


def conditions_for(space: Space, data: Path) -> tuple[str, ...]:
    """The shipped T1 file's conditions when it has this space's parameters, else ours."""
    params = list(space.cache["tune_params_keys"])
    for t1 in sorted(data.glob(f"{space.application}_*.T1.json")):
        described = json.loads(t1.read_text(encoding="utf-8"))["ConfigurationSpace"]
        if [p["Name"] for p in described["TuningParameters"]] == params:
            return tuple(c["Expression"] for c in described["Conditions"])
    return CONDITIONS.get(space.name, ())


def check_conditions(space: Space, conditions: Sequence[str]) -> str:
    """Why `conditions` over the parameters' values do not give exactly the recorded space;
    "" when they do (Kernel Tuner's simulation stops at a legal configuration not recorded)."""
    tune_params = space.cache["tune_params"]
    keys = list(space.cache["tune_params_keys"])
    compiled = [compile(c, "<condition>", "eval") for c in conditions]
    legal = {
        values
        for values in itertools.product(*(tune_params[k] for k in keys))
        if all(eval(c, {}, dict(zip(keys, values, strict=True))) for c in compiled)  # noqa: S307
    }
    recorded = {tuple(r[k] for k in keys) for r in space.cache["cache"].values()}
    if legal == recorded:
        return ""
    return (
        f"its conditions give {len(legal)} configurations, {len(legal - recorded)} not "
        f"recorded, and miss {len(recorded - legal)} of the {len(recorded)} recorded"
    )


def t1_input(space: Space, conditions: Sequence[str], kernel_file: Path) -> dict[str, Any]:
    """A T1 input file for simulation: the space, and a kernel that is never compiled."""
    tune_params = space.cache["tune_params"]
    return {
        "General": {"BenchmarkName": space.application, "OutputFormat": "JSON"},
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": k, "Type": "int", "Values": json.dumps(tune_params[k])}
                for k in space.cache["tune_params_keys"]
            ],
            "Conditions": [{"Expression": c, "Parameters": []} for c in conditions],
        },
        "KernelSpecification": {
            "Language": "CUDA",
            "KernelName": space.cache["kernel_name"],
            "KernelFile": str(kernel_file),
            "ProblemSize": space.cache["problem_size"],
            "GlobalSize": {"X": "1", "Y": "1", "Z": "1"},
            "LocalSize": {"X": "1", "Y": "1", "Z": "1"},
            "Arguments": [],
        },
    }


def t4_results(cache: dict[str, Any]) -> dict[str, Any]:
    """The brute-forced space as T4 results: the package's statistics read this format."""
    keys = cache["tune_params_keys"]
    results = []
    for record in cache["cache"].values():
        value = record["time"]
        results.append(
            {
                "configuration": {k: record[k] for k in keys},
                "times": {
                    "compilation": record.get("compile_time", 0.0),
                    "benchmark": record.get("benchmark_time", 0.0),
                    "framework": record.get("framework_time", 0.0),
                    "search_algorithm": record.get("strategy_time", 0.0),
                    "validation": record.get("verification_time", 0.0),
                    "runtimes": record.get("times", []),
                },
                "invalidity": _ERROR_KINDS.get(value, "correct")
                if isinstance(value, str)
                else "correct",
                "correctness": 1,
                "measurements": [{"name": "time", "value": value, "unit": "ms"}],
                "objectives": ["time"],
            }
        )
    return {
        "schema_version": "1.0.0",
        "metadata": {"timeunit": "milliseconds"},
        "results": results,
    }


def transfer_options(space: Space, group: Sequence[ReplayDataset], seed: int) -> dict | None:
    """The transfer strategy's prior from the other GPUs of the space, as `annotune bench
    --transfer` builds it (CV-DFS device features); None when no other GPU shares it."""
    if all(d is space.dataset for d in group):
        return None
    warm = warm_start(space.dataset, group, [device_features(d) for d in group], seed)
    return warm[1] if warm is not None else None


def strategy_entry(name: str, options_file: Path | None) -> dict[str, Any]:
    if name not in ANNOTUNE:
        return {"name": name, "search_method": name, "display_name": name}
    return {
        "name": name,
        "search_method": "AnnotuneStrategy",
        "display_name": f"annotune {name}",
        "custom_search_method_path": str(ADAPTER),
        "search_method_hyperparameters": [
            {"name": "strategy", "value": name},
            {"name": "options_file", "value": str(options_file) if options_file else ""},
        ],
    }


def experiments_file(
    space: Space, folder: Path, input_file: Path, strategy: dict[str, Any], repeats: int
) -> dict[str, Any]:
    """The package's experiments file for one strategy on one space (its defaults otherwise:
    cutoff at 95% from the median to the optimum, the time axis, every time key charged)."""
    samples = max(len(r.get("times", [])) for r in space.cache["cache"].values()) or 1
    return {
        "version": "1.2.0",
        "name": f"{space.name}_{strategy['name']}",
        "parent_folder": str(folder),
        "experimental_groups_defaults": {
            "applications": [
                {
                    "name": space.application,
                    "folder": str(folder),
                    "input_file": str(input_file),
                    "objective_performance_keys": ["time"],
                }
            ],
            "gpus": [space.gpu],
            "pattern_for_full_search_space_filenames": {
                "regex": str(folder / "cachefiles" / "${applications}" / "${gpus}_T4.json")
            },
            "autotuner": "KernelTuner",
            "stochastic": True,
            "repeats": repeats,
            "samples": samples,
            "minimum_fraction_of_budget_valid": 0.25,
            "minimum_number_of_valid_search_iterations": 25,
            "ignore_cache": True,
        },
        "search_strategies": [strategy],
        "statistics_settings": {
            "cutoff_percentile": 0.95,
            "cutoff_percentile_start": 0.01,
            "cutoff_type": "time",
            "objective_time_keys": ["all"],
        },
        "visualization_settings": {
            "plots": [{"scope": "aggregate", "style": "line"}],
            "resolution": 1000.0,
            "confidence_level": 0.95,
            "compare_baselines": False,
            "compare_split_times": False,
        },
    }


def prepare(space: Space, folder: Path, conditions: Sequence[str]) -> Path:
    """Write the space's T1 input, simulation cache and T4 statistics file; the T1's path."""
    if folder.exists():
        shutil.rmtree(folder)
    caches = folder / "cachefiles" / space.application
    caches.mkdir(parents=True)
    kernel = folder / f"{space.application}.cu"
    kernel.write_text("// Simulation mode: every measurement comes from the cache.\n")
    (caches / f"{space.gpu}.json").write_text(json.dumps(space.cache), encoding="utf-8")
    (caches / f"{space.gpu}_T4.json").write_text(
        json.dumps(t4_results(space.cache)), encoding="utf-8"
    )
    input_file = folder / f"{space.application}.T1.json"
    input_file.write_text(json.dumps(t1_input(space, conditions, kernel)), encoding="utf-8")
    return input_file


def strategy_share(folder: Path, space: Space, name: str) -> float:
    """The strategy's own share of all the time the package charged its runs: what the
    machine's speed (and its load) weighed in the score."""
    path = folder / "run" / name / f"{space.gpu}_{space.application}.npz"
    arrays = np.load(path, allow_pickle=True)  # the package pickles its description in
    keys = arrays["resultsdescription"].item().objective_time_keys
    per_key = np.nansum(arrays["objective_time_results_per_key"], axis=(1, 2))
    return float(per_key[keys.index("search_algorithm")] / per_key.sum())


def seed_for(seed: int, *parts: str) -> int:
    return zlib.crc32("/".join((str(seed), *parts)).encode())


def judge(
    space: Space,
    group: Sequence[ReplayDataset],
    strategies: Sequence[str],
    folder: Path,
    input_file: Path,
    repeats: int,
    seed: int,
    say: Any,
) -> list[Score]:
    options_file = None
    if "transfer" in strategies:
        options = transfer_options(space, group, seed_for(seed, space.name, "prior"))
        if options is None:
            say(f"{space.name}: no other GPU shares this space: transfer is left out")
            strategies = [s for s in strategies if s != "transfer"]
        else:
            options_file = folder / "transfer_options.pickle"
            options_file.write_bytes(pickle.dumps(options))
            sources = ", ".join(t.name for t in options["prior"])
            say(f"{space.name}: transfer warm-started from {sources}")
    scores = []
    for name in strategies:
        path = folder / f"experiments_{name}.json"
        entry = strategy_entry(name, options_file if name == "transfer" else None)
        path.write_text(json.dumps(experiments_file(space, folder, input_file, entry, repeats)))
        run_seed = seed_for(seed, space.name, name)
        random.seed(run_seed)
        np.random.seed(run_seed)
        started = time.monotonic()
        result = get_strategy_scores(str(path))[name]
        seconds = time.monotonic() - started
        share = strategy_share(folder, space, name)
        scores.append(Score(space.name, name, result["score"], result["error"], seconds, share))
        say(
            f"{space.name} {name}: {result['score']:.3f}, strategy's own time "
            f"{share:.1%} of the charged time ({seconds:.0f} s)"
        )
    return scores


def table(scores: Sequence[Score], strategies: Sequence[str]) -> str:
    """Markdown: one row per space, one column per strategy, then the mean over spaces."""
    spaces = list(dict.fromkeys(s.space for s in scores))
    by_cell = {(s.space, s.strategy): s for s in scores}
    lines = [
        "| space | " + " | ".join(strategies) + " |",
        "|---|" + "---:|" * len(strategies),
    ]
    for space in spaces:
        cells = [by_cell.get((space, name)) for name in strategies]
        lines.append(
            f"| {space} | "
            + " | ".join("—" if c is None else f"{c.score:.2f}" for c in cells)
            + " |"
        )
    means = []
    for name in strategies:
        mine = [s.score for s in scores if s.strategy == name]
        means.append(f"{sum(mine) / len(mine):.2f}" if mine else "—")
    lines.append("| mean | " + " | ".join(means) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the replay folder")
    parser.add_argument(
        "--out", type=Path, default=Path("/tmp/annotune-methodology"), help="work folder"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per space and strategy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spaces", nargs="*", help="file stems, e.g. convolution_A100")
    parser.add_argument("--strategies", nargs="*", default=[*ANNOTUNE, *KERNEL_TUNER])
    parser.add_argument("--json", type=Path, help="also write the scores here")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    paths = sorted(args.data.glob("*.json.gz"))
    if args.spaces:
        unknown = set(args.spaces) - {p.name.removesuffix(".json.gz") for p in paths}
        if unknown:
            parser.error(f"no such space in {args.data}: {', '.join(sorted(unknown))}")
    datasets = load_recordings(paths)
    groups = group_by_space(datasets)
    group_of = {id(d): g for g in groups for d in g}
    scores: list[Score] = []
    for path, dataset in zip(paths, datasets, strict=True):
        space = load_space(path, dataset)
        if args.spaces and space.name not in args.spaces:
            continue
        conditions = conditions_for(space, args.data)
        why = check_conditions(space, conditions)
        if why:
            say(f"{space.name}: left out: {why}")
            continue
        folder = (args.out / space.name).resolve()
        input_file = prepare(space, folder, conditions)
        scores += judge(
            space,
            group_of[id(dataset)],
            args.strategies,
            folder,
            input_file,
            args.repeats,
            args.seed,
            say,
        )
    print(table(scores, args.strategies))
    if args.json:
        args.json.write_text(
            json.dumps([s.__dict__ for s in scores], indent=1) + "\n", encoding="utf-8"
        )
    return 0 if scores and all(math.isfinite(s.score) for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
