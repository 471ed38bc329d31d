"""The field's judge, fast: `judge.py`'s runs scored by our own `fastscore.py`.

`judge.py` hands everything to `autotuning-methodology`, which spends most of its time outside
the runs (validating and reloading the space's T4 file, writing and reading its result
archives) and gives one number per cell. This script runs the same runs, each strategy once
per repeat through Kernel Tuner's simulation mode in this one process (`tune_kernel_T1`, the
call the package makes, with the same input file: the space, the simulation cache, the
strategy, and the package's time budget), so the charging of time is Kernel Tuner's own: each
configuration its recorded compile, verification and benchmark time, and the strategy and
the framework their wall time on this machine. annotune's strategies enter through the same
custom-strategy hook (`annotune_strategy.py`). A repeat that ends with fewer than the
package's minimum of valid evaluations inside the time range is run again, as the package
does. `fastscore.py` then scores the runs as the package defines its score, and gives each
cell's spread across repeats (each repeat's own score; a 95% bootstrap interval over repeats
of the pooled score).

    /tmp/methvenv/bin/python benchmarks/methodology/fastjudge.py --repeats 10 --json out.json

`--rescore FOLDER` scores the runs that `judge.py --out FOLDER` left (the package's own
archives) with `fastscore`, beside the package's score from `judge.py --json`: the check that
the two scores agree on the same runs. Seeds as in `judge.py`: NumPy's and Python's global
generators seeded once per space and strategy from `--seed`.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastscore  # noqa: E402
import judge  # noqa: E402

from annotune.bench import load_recordings  # noqa: E402
from annotune.bench.transfer import group_by_space  # noqa: E402

TIME_KEYS = ("compilation", "runtimes", "framework", "search_algorithm", "validation")
MIN_VALID = 25  # the package's minimum_number_of_valid_search_iterations (judge.py's)
MIN_FRACTION = 0.25  # its minimum_fraction_of_budget_valid


@dataclass
class Cell:
    space: str
    strategy: str
    repeats: int
    score: float
    per_repeat_mean: float
    std: float
    low: float
    high: float
    strategy_share: float
    seconds: float


def charged_run(results: Sequence[dict]) -> tuple[fastscore.Run, float]:
    """A repeat's T4 results as the package charges them: per evaluation the sum of its time
    keys in seconds (none for a configuration outside the constraints), the best valid
    objective so far; and the strategy's own seconds."""
    charged, values, strategy = [], [], 0.0
    for result in results:
        if str(result["invalidity"]) == "constraints":
            charged.append(math.nan)
            values.append(math.nan)
            continue
        parts = []
        for key in TIME_KEYS:
            value = result["times"].get(key)
            if isinstance(value, list):
                value = sum(value)
            if value is not None and not (math.isnan(value) or value < 0):
                parts.append(value)
        charged.append(sum(parts) / 1000.0 if parts else math.nan)
        strategy += result["times"].get("search_algorithm") or 0.0
        value = next(m["value"] for m in result["measurements"] if m["name"] == "time")
        valid = result["invalidity"] == "correct" and isinstance(value, int | float)
        values.append(float(value) if valid and math.isfinite(value) else math.nan)
    return fastscore.run_from_evaluations(charged, values), strategy / 1000.0


def enough(run: fastscore.Run, results: Sequence[dict], stats: fastscore.SpaceStats) -> bool:
    """The package's check of a repeat: enough evaluations, two of them valid, in the range."""
    budget = stats.budget_seconds
    max_fevals = max(round(budget / stats.time_per_feval), 2)
    minimum = max(round(MIN_FRACTION * min(max_fevals, len(stats.dist))), 2)
    minimum = max(min(minimum, MIN_VALID), 2)

    def seconds(result: dict) -> float:
        times = result["times"]
        return sum(sum(v) if isinstance(v, list) else v for k, v in times.items() if k in TIME_KEYS)

    cumulative = np.cumsum([seconds(r) for r in results]) / 1000.0
    start = stats.fevals_start * stats.median_time
    inside = [r for r, t in zip(results, cumulative, strict=True) if start <= t <= budget]
    return len(inside) >= minimum and sum(r["invalidity"] == "correct" for r in inside) >= 2


def input_file(
    space: judge.Space, folder: Path, t1: Path, entry: dict[str, Any], budget: float
) -> Path:
    """The input file the package would write for this strategy (its `generate_input_file`
    and budget: device, simulation cache, search and its attributes, time limit)."""
    data = json.loads(t1.read_text(encoding="utf-8"))
    spec = data["KernelSpecification"]
    spec["Device"] = {"Name": space.gpu}
    spec["SimulationInput"] = str(folder / "cachefiles" / space.application / f"{space.gpu}.json")
    data["General"]["OutputFile"] = str(folder / f"fast_{entry['name']}")
    data["General"]["TimeUnit"] = "Milliseconds"
    data["Search"] = {"Name": entry["search_method"]}
    if "search_method_hyperparameters" in entry:
        data["Search"]["Attributes"] = [
            {"Name": p["name"], "Value": p["value"]} for p in entry["search_method_hyperparameters"]
        ]
    data["Budget"] = [{"Type": "TuningDuration", "BudgetValue": budget}]
    path = folder / f"fast_{entry['name']}_input.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run_cell(
    space: judge.Space,
    stats: fastscore.SpaceStats,
    path: Path,
    entry: dict[str, Any],
    repeats: int,
    samples: int,
) -> tuple[list[fastscore.Run], float]:
    """`repeats` runs of one strategy; the strategy's share of all the charged time."""
    from kernel_tuner import tune_kernel_T1

    runs, strategy, total = [], 0.0, 0.0
    for _ in range(repeats):
        for _attempt in range(20):
            options: dict[str, Any] = {}
            if "custom_search_method_path" in entry:
                options["custom_search_method_path"] = entry["custom_search_method_path"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, output = tune_kernel_T1(
                    path,
                    objective="time",
                    objective_higher_is_better=False,
                    simulation_mode=True,
                    output_T4=True,
                    iterations=samples,
                    strategy_options=options,
                )
            results = output["results"]
            run, own = charged_run(results)
            if enough(run, results, stats):
                break
        else:
            raise RuntimeError(f"{space.name} {entry['name']}: 20 repeats too short")
        runs.append(run)
        strategy += own
        total += float(np.nanmax(run.times)) if np.isfinite(run.times).any() else 0.0
    return runs, strategy / total if total else math.nan


def fast_judge(args: argparse.Namespace, say: Any) -> list[Cell]:
    paths = sorted(args.data.glob("*.json.gz"))
    datasets = load_recordings(paths)
    group_of = {id(d): g for g in group_by_space(datasets) for d in g}
    cells = []
    for path, dataset in zip(paths, datasets, strict=True):
        space = judge.load_space(path, dataset)
        if args.spaces and space.name not in args.spaces:
            continue
        conditions = judge.conditions_for(space, args.data)
        why = judge.check_conditions(space, conditions)
        if why:
            say(f"{space.name}: left out: {why}")
            continue
        folder = (args.out / space.name).resolve()
        t1 = judge.prepare(space, folder, conditions)
        stats = fastscore.space_stats(space.cache)
        samples = max(len(r.get("times", [])) for r in space.cache["cache"].values()) or 1
        for name in args.strategies:
            options_file = None
            if name == "transfer":
                group = group_of[id(dataset)]
                prior_seed = judge.seed_for(args.seed, space.name, "prior")
                options = judge.transfer_options(space, group, prior_seed)
                if options is None:
                    say(f"{space.name}: no other GPU shares this space: transfer is left out")
                    continue
                options_file = folder / "transfer_options.pickle"
                options_file.write_bytes(pickle.dumps(options))
            if name == "iterml" and args.options:
                options_file = folder / "iterml_options.pickle"
                options_file.write_bytes(pickle.dumps(json.loads(args.options)))
            entry = judge.strategy_entry(name, options_file)
            run_path = input_file(space, folder, t1, entry, stats.budget_seconds)
            run_seed = judge.seed_for(args.seed, space.name, name)
            random.seed(run_seed)
            np.random.seed(run_seed)
            started = time.monotonic()
            runs, share = run_cell(space, stats, run_path, entry, args.repeats, samples)
            seconds = time.monotonic() - started
            result = fastscore.cell_score(stats, runs)
            cell = Cell(
                space.name,
                name,
                len(runs),
                result.score,
                float(np.mean(result.per_repeat)),
                result.std,
                result.low,
                result.high,
                share,
                seconds,
            )
            cells.append(cell)
            say(
                f"{space.name} {name}: {cell.score:.3f} [{cell.low:.2f}, {cell.high:.2f}], "
                f"per repeat {cell.per_repeat_mean:.2f} +- {cell.std:.2f}, strategy's own "
                f"time {share:.2%} ({seconds:.0f} s)"
            )
            if args.curves:
                archive = args.curves / f"{space.name}_{name}.npz"
                archive.parent.mkdir(parents=True, exist_ok=True)
                width = max(r.times.shape[0] for r in runs)
                np.savez_compressed(
                    archive,
                    times=np.array(
                        [
                            np.pad(r.times, (0, width - r.times.shape[0]), constant_values=np.nan)
                            for r in runs
                        ]
                    ),
                    best=np.array(
                        [
                            np.pad(r.best, (0, width - r.best.shape[0]), constant_values=np.nan)
                            for r in runs
                        ]
                    ),
                )
    return cells


def rescore(folder: Path, scores_file: Path | None, say: Any) -> list[dict[str, Any]]:
    """fastscore's score of the runs `judge.py` left in `folder`, beside the package's: the
    plain fit, the package's bagged fit over 20 seeds (its mean and range), and its score."""
    package = {}
    if scores_file is not None:
        package = {
            (s["space"], s["strategy"]): s["score"]
            for s in json.loads(scores_file.read_text(encoding="utf-8"))
        }
    rows = []
    for space_folder in sorted(p for p in folder.iterdir() if (p / "run").is_dir()):
        caches = space_folder / "cachefiles"
        cache_path = next(p for p in caches.glob("*/*.json") if "_T4" not in p.name)
        stats = fastscore.space_stats(json.loads(cache_path.read_text(encoding="utf-8")))
        for archive in sorted(space_folder.glob("run/*/*.npz")):
            arrays = np.load(archive, allow_pickle=True)
            times = arrays["objective_time_results"]
            best = arrays["objective_performance_best_results"]
            runs = [fastscore.Run(times[:, j], best[:, j]) for j in range(times.shape[1])]
            bagged = [fastscore.score(stats, runs, bagging_seed=s) for s in range(20)]
            row = {
                "space": space_folder.name,
                "strategy": archive.parent.name,
                "repeats": len(runs),
                "fastscore": fastscore.score(stats, runs),
                "bagged_mean": float(np.mean(bagged)),
                "bagged_min": float(min(bagged)),
                "bagged_max": float(max(bagged)),
                "package": package.get((space_folder.name, archive.parent.name), math.nan),
            }
            rows.append(row)
            say(
                ", ".join(
                    f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                )
            )
    return rows


def rescore_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| space | strategy | repeats | package | fastscore | bagged, 20 seeds: mean [min, max] |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['space']} | {r['strategy']} | {r['repeats']} | {r['package']:.3f} | "
            f"{r['fastscore']:.3f} | {r['bagged_mean']:.3f} [{r['bagged_min']:.3f}, "
            f"{r['bagged_max']:.3f}] |"
        )
    return "\n".join(lines)


def table(cells: Sequence[Cell], strategies: Sequence[str]) -> str:
    """Markdown: space x strategy -> pooled score and its 95% interval over repeats."""
    spaces = list(dict.fromkeys(c.space for c in cells))
    by = {(c.space, c.strategy): c for c in cells}
    lines = ["| space | " + " | ".join(strategies) + " |", "|---|" + "---:|" * len(strategies)]
    for space in spaces:
        row = []
        for name in strategies:
            c = by.get((space, name))
            row.append("—" if c is None else f"{c.score:.2f} [{c.low:.2f}, {c.high:.2f}]")
        lines.append(f"| {space} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=judge.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path("/tmp/annotune-fastjudge"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spaces", nargs="*")
    parser.add_argument("--strategies", nargs="*", default=[*judge.ANNOTUNE, *judge.KERNEL_TUNER])
    parser.add_argument("--json", type=Path, help="also write the cells here")
    parser.add_argument("--curves", type=Path, help="keep every cell's runs here (npz)")
    parser.add_argument(
        "--options", help="IterML's options as JSON, e.g. '{\"initial\": 10}' (a variant)"
    )
    parser.add_argument("--rescore", type=Path, help="a judge.py --out folder to rescore")
    parser.add_argument("--package-scores", type=Path, help="judge.py --json, for --rescore")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.rescore:
        rows = rescore(args.rescore, args.package_scores, say)
        print(rescore_table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        return 0 if rows else 1
    cells = fast_judge(args, say)
    strategies = list(dict.fromkeys(c.strategy for c in cells))
    print(table(cells, strategies))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cells], indent=1) + "\n")
    return 0 if cells and all(math.isfinite(c.score) for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
