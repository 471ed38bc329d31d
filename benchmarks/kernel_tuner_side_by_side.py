"""Kernel Tuner's and annotune's strategies on the same replay files, in one table.

Kernel Tuner is never a dependency of annotune; install it in a separate environment and run
this script there with annotune on the path:

    python -m venv /tmp/ktvenv && /tmp/ktvenv/bin/pip install kernel_tuner
    PYTHONPATH=. /tmp/ktvenv/bin/python benchmarks/kernel_tuner_side_by_side.py \\
        --repeats 20 --max-fevals 800 ../shared/data/replay/pnpoly_RTX_3090.json.gz ...

`--strategy` picks Kernel Tuner's strategies, `--annotune-strategy` annotune's (both
repeatable). annotune's run through `annotune.bench.bench` with the same repeats and with
`--max-fevals` as their cap, so both sides get the same budget; their rows are named
`annotune:NAME`.

Each run uses Kernel Tuner's simulation mode (every "measurement" is read from the cache file)
with a budget of `--max-fevals` unique configurations. `kernel_tuner.tune_cache` restricts the
space to the cache's *valid* configurations, i.e. it tells the strategy in advance which
configurations would fail, something no tuner knows on a real GPU and annotune's runs are not
told. So by default this script calls `tune_kernel` in simulation mode the way `tune_cache`
does but with the space restricted to every configuration in the cache, invalid ones
included (they are measured and count, as in annotune's runs). `--known-invalid` uses
`tune_cache` unchanged, for reference. The count
of measurements is the number of *unique* configurations the run had evaluated when its best
normalized performance first reached 0.95 (invalid configurations count, repeats do not),
the same count annotune's bench uses. Standards 1 and 2 follow from those first hits with
`annotune.bench.standards_from_hits`, so both sides share one definition.

Measured with Kernel Tuner 1.5, 100 repeats (the paper's standards; with 20, the 5th
percentile is the second-worst run and moved, e.g., dual annealing's 161 on MI250X to never),
`--annotune-strategy iterml --strategy dual_annealing --strategy genetic_algorithm --strategy
pso`, `--max-fevals 800` (1500 for W6600). Standard 1 / Standard 2, "-" not reached in the
budget (runs reaching 0.95 in brackets when not all):

| dataset | iterml | dual annealing | genetic | pso |
|---|---|---|---|---|
| pnpoly RTX 3090 | 36 / 72 | 40 / 160 | 54 / - (93) | 52 / 97 |
| convolution A4000 | 94 / 196 | 141 / - (79) | 181 / - (78) | 98 / 329 (97) |
| convolution MI250X | 82 / 157 | 89 / - (91) | 93 / 211 (99) | 103 / 375 |
| convolution RTX 3090 | 48 / 93 | 124 / - (92) | 103 / 193 (99) | 96 / 206 (96) |
| gemm RTX 3090 | 75 / 160 | 167 / - (53) | 192 / 340 | 203 / - (89) |
| convolution A100 | 146 / 341 | - / - (12) | 174 / - (73) | 404 / - (83) |
| convolution W6600 | 346 / 672 | 225 / - (69) | - / - (27) | 220 / - (70) |

The iterml column is the default since the climbs' batches dropped their uniform random fifth
(the same runs as `benchmarks/replay_table.py --strategy iterml --repeats 100`; with it: 36 /
72, 94 / 243, 82 / 145, 48 / 105, 82 / 152, 192 / 405, 431 / 852; also without the two checks
of the best configuration's small parameters: 36 / 113, 98 / 211, 82 / 157, 48 / 121, 81 / 153,
167 / 383, 362 / 790; with climbs every other batch and uniform random picks: 40 / 151, 71 /
241, 77 / 176, 54 / 125, 84 / 181, 164 / 313, 342 / 822; before the climbs: 40 / 133, 74 /
248, 82 / 207, 54 / 106, 108 / 222, 155 / 304, 511 / 915). IterML now has the best Standard 2
on every dataset: on pnpoly 72 against PSO's 97 (84 on 500 seeds). Dual annealing and PSO
have the better Standard 1 on W6600 (225, 220 against 346), where a third of their runs never
get there. W6600's median moves a lot between sets of seeds: on 200 other seeds (seed 1000)
the default gives 311 / 611; the previous one gave 347 / 761 on 400 seeds that include them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from annotune.bench import bench, random_standards, standards_from_hits
from annotune.results.replay import ReplayDataset, load_replay
from annotune.search import STRATEGY_NAMES

STRATEGIES = (
    "bayes_opt",
    "pso",
    "genetic_algorithm",
    "dual_annealing",
    "simulated_annealing",
    "mls",
    "random_sample",
)

ANNOTUNE_STRATEGIES = ("iterml", "starchart", "predictive", "random")


def first_hit(results: list[dict], keys: list[str], normalized: dict[tuple, float]) -> int | None:
    """Unique configurations evaluated when the best normalized performance first hit 0.95."""
    seen: set[tuple] = set()
    for record in results:
        config = tuple(record[k] for k in keys)
        if config in seen:
            continue
        seen.add(config)
        if normalized.get(config, 0.0) >= 0.95:
            return len(seen)
    return None


def annotune_rows(
    dataset: ReplayDataset, names: list[str], repeats: int, cap: int, workers: int
) -> list[dict]:
    """annotune's strategies on `dataset`, one row each, in the records Kernel Tuner's get."""
    rows = []
    for name in names:
        started = time.time()
        [row] = bench(dataset, [name], repeats=repeats, cap=cap, workers=workers)
        hits = [trace.first_hit for trace in row.traces]
        rows.append(
            {
                **row.to_json(),
                "strategy": f"annotune:{name}",
                "first_hits": hits,
                "max_fevals": cap,
                "seconds": time.time() - started,
            }
        )
    return rows


def print_row(row: dict, repeats: int) -> None:
    reached = sum(h is not None for h in row["first_hits"])
    print(
        f"| {row['dataset']} | {row['strategy']} | {row['std1_evals']} | {row['std2_evals']} | "
        f"{reached}/{repeats} | {row['seconds']:.0f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--strategy", action="append", dest="strategies")
    parser.add_argument(
        "--annotune-strategy",
        action="append",
        dest="annotune_strategies",
        help=f"repeatable; default: {', '.join(ANNOTUNE_STRATEGIES)}",
    )
    parser.add_argument("--workers", type=int, default=1, help="processes for annotune's runs")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--max-fevals", type=int, default=800)
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--known-invalid", action="store_true", help="use tune_cache as is (invalid pre-excluded)"
    )
    args = parser.parse_args()
    annotune_names = args.annotune_strategies or list(ANNOTUNE_STRATEGIES)
    for name in annotune_names:
        if name not in STRATEGY_NAMES:
            parser.error(f"unknown annotune strategy {name!r}; choose from {STRATEGY_NAMES}")
    if args.workers < 1:
        parser.error("--workers must be at least 1")

    # Imported late: only this script needs Kernel Tuner.
    from constraint import FunctionConstraint
    from kernel_tuner import tune_cache, tune_kernel
    from kernel_tuner.util import infer_args_from_cache, read_cache

    def tune(cache_path: str, **options: object) -> list[dict]:
        if args.known_invalid:
            return tune_cache(cache_path, **options)[0]
        cache = read_cache(cache_path, open_cache=False)
        keys = cache["tune_params_keys"]
        space = {tuple(r[k] for k in keys) for r in cache["cache"].values()}
        legal = FunctionConstraint(lambda *values: values in space)
        kernel_args = infer_args_from_cache(cache)
        return tune_kernel(
            **kernel_args, cache=cache_path, restrictions=[legal], simulation_mode=True, **options
        )[0]

    warnings.filterwarnings("ignore")
    rows = []
    print("| dataset | strategy | std1 | std2 | runs reaching 0.95 | seconds |")
    print("|---|---|---|---|---|---|")
    for path in args.datasets:
        dataset = load_replay(path)
        keys = list(dataset.names)
        norm = dataset.normalized()
        normalized = {
            tuple(int(v) if float(v).is_integer() else v for v in row): float(x)
            for row, x in zip(dataset.candidates.values.tolist(), norm, strict=True)
        }
        exact = random_standards(norm)
        ours = annotune_rows(dataset, annotune_names, args.repeats, args.max_fevals, args.workers)
        for row in ours:
            print_row(row, args.repeats)
        rows.extend(ours)
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / "cache.json"
            raw = path.read_bytes()
            plain.write_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
            for strategy in args.strategies or STRATEGIES:
                started = time.time()
                hits = []
                for seed in range(args.repeats):
                    random.seed(seed)
                    np.random.seed(seed)
                    results = tune(
                        str(plain),
                        strategy=strategy,
                        strategy_options={"max_fevals": args.max_fevals},
                        verbose=False,
                        quiet=True,
                    )
                    hits.append(first_hit(results, keys, normalized))
                std = standards_from_hits(hits)
                row = {
                    "dataset": dataset.name,
                    "strategy": strategy,
                    "size": len(dataset),
                    "std1_evals": std.std1,
                    "std2_evals": std.std2,
                    "random_std1_evals": exact.std1,
                    "random_std2_evals": exact.std2,
                    "first_hits": hits,
                    "max_fevals": args.max_fevals,
                    "seconds": time.time() - started,
                }
                print_row(row, args.repeats)
                rows.append(row)
    if args.json:
        args.json.write_text(json.dumps({"results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
