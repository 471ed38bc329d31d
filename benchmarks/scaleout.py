"""Scale-out: configurations a minute on 1, 2, 4 and 8 devices, and what it costs the search.

    python benchmarks/scaleout.py [--json] [--devices 1 2 4 8] [--per-device 40] [--sync]
    python benchmarks/scaleout.py --quality [--repeats 100] [--quality-devices 8]
        [--choice-seconds S] [--measure-seconds S] [--sequential-pick N] [--lag L] [--sync]
        [DATASET ...]

(a) Throughput (the default): `examples/cuda/convolution/convolution.cu` tuned through Ray
(`annotune.session.distributed.tune_devices`) on N replay devices serving
`convolution_A100.json.gz`, each measurement taking 100 ms, on a local Ray cluster started
once; the default strategy (iterml), `--per-device` measurements per device, a fresh study,
no final check and no drift check. A rate is the tune's measurements over its own wall time
(the baseline's measurement and the search's time included; the cluster's and the actors'
start-up, printed apart, not). Efficiency is the rate over N times the one-device rate.
`--json` prints the list of `{devices, configs_per_min, efficiency}`.

(b) Quality (`--quality`): does searching with N devices cost measurements? On each replay
dataset, the concurrent search (`annotune.session.concurrent.run_concurrent_search`, the
loop a Ray tune runs, asking as its `room` says) with N simulated devices taking 100 ms
(+-10%, seeded; `--measure-seconds`) per measurement in virtual time, the search's own time
(measured here) charged to that clock so that the loop sizes its batches as on the real path,
against the sequential search (`annotune.bench.run_once`: `run_search` with the strategy's
own batches), with the same seeds, by the IterML paper's Standard 1 and 2 (`annotune.bench`;
runs capped at random search's exact Standard 2, as `annotune bench` caps them). The search's
time depends on this machine's load: the batches it leads to, and so the figures, vary a
little from run to run;
`--choice-seconds S` charges a fixed S per choice instead (the same seeds then give the same
figures on any machine). `--sequential-pick N` adds the sequential search with batches of N
(N/2 while it learns): what choosing on fewer results costs without any concurrency. `--lag L`
adds the sequential search whose every choice is made without its newest L results (`Lagged`):
L devices still measuring whenever it chooses, with nothing waiting behind them and choices
that take no time, about the least a loop that keeps L devices busy must hide from it. Each
column also gives the median simulated seconds to 0.95 of the optimum (the time Standard 1
counts in measurements): the sequential search on one device, where nothing overlaps, against
N devices, and a 90% bootstrap interval of each change (`change_interval`, the runs paired by
seed): with 100 runs, two seed sets of the same sequential search give standards up to 24%
apart.

`--sync` measures `tune --sync`: in (a) the Ray tunes run with it instead of the default; (b)
gains a column, the sequential search's own batches, each measured on the N devices at once and
waited for whole (`annotune.session.concurrent.measure_whole`): the same runs as the sequential
search, seed for seed, in fewer simulated seconds.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "cuda" / "convolution" / "convolution.cu"
REPLAY_DIR = ROOT.parent / "shared" / "data" / "replay"
RECORDING = REPLAY_DIR / "convolution_A100.json.gz"
DELAY_S = 0.1


# -- (a) throughput through Ray ------------------------------------------------------------------


def throughput(
    devices: list[int], per_device: int, strategy: str, sync: bool = False
) -> list[dict]:
    import ray

    from annotune.annotate import read_problem
    from annotune.session.distributed import tune_devices
    from annotune.session.options import TuneOptions

    problem = read_problem(SOURCE)
    started = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    print(f"Ray started in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    rows: list[dict] = []
    try:
        for count in devices:
            with tempfile.TemporaryDirectory() as scratch:
                where = Path(scratch)
                options = TuneOptions(
                    strategy=strategy,
                    budget=per_device * count,
                    ray=True,
                    devices=count,
                    replay=(RECORDING,),
                    replay_delay=DELAY_S,
                    db_path=where / "results.db",
                    out_dir=where / "tuned",
                    cache_dir=where / "cache",
                    recheck=0,
                    drift_every=0,
                    transfer=False,
                    sync=sync,
                )
                began = time.perf_counter()
                (report,) = tune_devices(problem, options)
                total = time.perf_counter() - began
            wall = report.wall_breakdown
            assert wall is not None
            rate = 60.0 * report.evaluations / wall.wall
            one = rows[0]["configs_per_min"] / rows[0]["devices"] if rows else rate / count
            rows.append(
                {
                    "devices": count,
                    "configs_per_min": round(rate, 1),
                    "efficiency": round(rate / (count * one), 3),
                    "ideal_per_min": round(60.0 / DELAY_S * count),
                    "measurements": report.evaluations,
                    "wall_s": round(wall.wall, 2),
                    "search_s": round(wall.search, 2),
                    "actor_startup_s": round(total - wall.wall, 2),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
    return rows


# -- (b) search quality: concurrent against sequential ------------------------------------------


class SimulatedDevices:
    """`Measurements` of N devices in virtual time, asked for work as a Ray tune's devices
    are (`annotune.session.concurrent.room`): each measures what it is given one after
    another, each measurement taking `delay` (100 ms) +- 10%; `collect` advances the clock to
    the next finish and returns every measurement done by then."""

    def __init__(self, dataset, devices: int, rng: np.random.Generator, delay: float = DELAY_S):
        self.dataset = dataset
        self.rng = rng
        self.delay = delay
        self.now = 0.0
        self.ends = [0.0] * devices  # when each device's last configuration is done
        self.load = [0] * devices
        self.events: list[tuple[float, int, int, int]] = []  # finish, order, device, row
        self.order = 0

    def room(self, batch: int) -> int:
        from annotune.session.concurrent import room

        return room(len(self.ends), len(self.events), batch)

    def devices(self) -> int:
        return len(self.ends)

    def start(self, rows) -> None:
        for row in rows:
            device = min(range(len(self.ends)), key=lambda d: (self.load[d], self.ends[d]))
            took = self.delay * (1.0 + 0.1 * (2.0 * self.rng.random() - 1.0))
            self.ends[device] = max(self.now, self.ends[device]) + took
            self.load[device] += 1
            self.order += 1
            heapq.heappush(self.events, (self.ends[device], self.order, device, int(row)))

    def collect(self):
        self.now = self.events[0][0]
        rows = []
        while self.events and self.events[0][0] <= self.now:
            _, _, device, row = heapq.heappop(self.events)
            self.load[device] -= 1
            rows.append(row)
        return self.dataset.measure(rows)


class Charged:
    """A strategy whose asks and tells cost the simulated devices' clock what they took here
    (the search runs on the driver while the devices measure), so that the loop sizes its
    batches as it would on the real path; with `fixed`, each tell (one a choice) costs
    `fixed` seconds and the asks nothing."""

    def __init__(self, strategy, pool: SimulatedDevices | Clock, fixed: float | None = None):
        self.strategy = strategy
        self.pool = pool
        self.fixed = fixed
        self.name = strategy.name

    def start(self, candidates, rng) -> None:
        self.strategy.start(candidates, rng)

    def ask(self, max_count: int) -> list[int]:
        began = time.perf_counter()
        asked = self.strategy.ask(max_count)
        if self.fixed is None:
            self.pool.now += time.perf_counter() - began
        return asked

    def tell(self, results) -> None:
        began = time.perf_counter()
        self.strategy.tell(results)
        self.pool.now += time.perf_counter() - began if self.fixed is None else self.fixed

    def progress(self) -> dict:
        return self.strategy.progress()


class Lagged:
    """A strategy that chooses without the newest `lag` results it was told: they reach it only
    once `lag` newer ones have come (what `lag` devices still measuring would hide)."""

    def __init__(self, strategy, lag: int):
        self.strategy = strategy
        self.lag = lag
        self.held: list = []
        self.name = strategy.name

    def start(self, candidates, rng) -> None:
        self.strategy.start(candidates, rng)

    def ask(self, max_count: int) -> list[int]:
        known = len(self.held) - self.lag
        if known > 0:
            self.strategy.tell(self.held[:known])
            self.held = self.held[known:]
        return self.strategy.ask(max_count)

    def tell(self, results) -> None:
        self.held.extend(results)

    def progress(self) -> dict:
        return self.strategy.progress()


class Clock:
    """The simulated time of a sequential search on one device (`Charged` charges it)."""

    now = 0.0


class Stop:
    """Stops a search at 0.95 of the optimum, as `annotune.bench.run_once` does, and notes
    when: the measurements it took (`hit`) and the simulated clock then (`seconds`)."""

    def __init__(self, dataset, clock) -> None:
        from annotune.bench import THRESHOLD

        self.good = dataset.normalized() >= THRESHOLD
        self.clock = clock
        self.hit: int | None = None
        self.seconds = math.inf

    def __call__(self, results, outcome, strategy) -> bool:
        if self.hit is not None:  # rows still in flight at the stop, told after it
            return True
        before = len(outcome.results) - len(results)
        for offset, result in enumerate(results):
            if self.good[result.index]:
                self.hit, self.seconds = before + offset + 1, self.clock.now
                return True
        return False


def sequential_run(
    dataset,
    strategy: str,
    seed: int,
    cap: int,
    settings: dict,
    choice,
    delay: float = DELAY_S,
    lag: int = 0,
):
    """`annotune.bench.run_once` (the same seed gives the same search) on one simulated
    device: each measurement takes `delay`, each choice what it took here (or `choice`); with
    `lag`, each choice without the newest `lag` results (`Lagged`)."""
    from annotune.search import Budget, create, run_search

    clock = Clock()

    def measure(rows):
        clock.now += delay * len(rows)
        return dataset.measure(rows)

    stop = Stop(dataset, clock)
    search = create(strategy, **settings)
    run_search(
        Charged(Lagged(search, lag) if lag else search, clock, choice),
        dataset.candidates,
        measure,
        budget=Budget(evaluations=cap),
        rng=np.random.default_rng(seed),
        on_batch=stop,
    )
    return stop.hit, stop.seconds


def concurrent_run(
    dataset, strategy: str, seed: int, cap: int, devices: int, choice, delay: float = DELAY_S
):
    """One concurrent search with `devices` simulated devices, stopped at 0.95 like
    `annotune.bench.run_once`."""
    from annotune.search import Budget, create
    from annotune.session.concurrent import run_concurrent_search

    pool = SimulatedDevices(dataset, devices, np.random.default_rng([seed, 7]), delay)
    stop = Stop(dataset, pool)
    run_concurrent_search(
        Charged(create(strategy), pool, choice),
        dataset.candidates,
        pool,
        budget=Budget(evaluations=cap),
        rng=np.random.default_rng(seed),
        on_batch=stop,
        clock=lambda: pool.now,
    )
    return stop.hit, stop.seconds


def sync_run(
    dataset, strategy: str, seed: int, cap: int, devices: int, choice, delay: float = DELAY_S
):
    """The sequential search's own batches, each measured on `devices` simulated devices at
    once and waited for whole (`tune --sync`, `annotune.session.concurrent.measure_whole`)."""
    from functools import partial

    from annotune.search import Budget, create, run_search
    from annotune.session.concurrent import measure_whole

    pool = SimulatedDevices(dataset, devices, np.random.default_rng([seed, 7]), delay)
    stop = Stop(dataset, pool)
    run_search(
        Charged(create(strategy), pool, choice),
        dataset.candidates,
        partial(measure_whole, pool),
        budget=Budget(evaluations=cap),
        rng=np.random.default_rng(seed),
        on_batch=stop,
    )
    return stop.hit, stop.seconds


_DATASET = None


def _init(path: Path) -> None:
    global _DATASET
    from annotune.results.replay import load_replay

    _DATASET = load_replay(path)


def _one(mode: str, strategy: str, seed: int, cap: int, options: dict):
    choice, delay = options["choice_seconds"], options["measure_seconds"]
    if mode == "sequential":
        return sequential_run(_DATASET, strategy, seed, cap, {}, choice, delay)
    if mode == "sequential_pick":
        settings = {"pick": options["pick"], "early_pick": max(1, options["pick"] // 2)}
        return sequential_run(_DATASET, strategy, seed, cap, settings, choice, delay)
    if mode == "sequential_lag":
        return sequential_run(_DATASET, strategy, seed, cap, {}, choice, delay, options["lag"])
    if mode == "sync":
        return sync_run(_DATASET, strategy, seed, cap, options["devices"], choice, delay)
    return concurrent_run(_DATASET, strategy, seed, cap, options["devices"], choice, delay)


def quality(
    paths: list[Path],
    strategy: str,
    repeats: int,
    devices: int,
    choice_seconds: float | None = None,
    sequential_pick: int | None = None,
    measure_seconds: float = DELAY_S,
    lag: int | None = None,
    sync: bool = False,
) -> list[dict]:
    from annotune.bench import random_standards, run_seeds, standards_from_hits
    from annotune.results.replay import load_replay

    rows = []
    seeds = run_seeds(0, repeats)
    for path in paths:
        dataset = load_replay(path)
        random = random_standards(dataset.normalized())
        cap = random.std2 if random.std2 is not None else len(dataset)
        row: dict = {"dataset": dataset.name, "cap": cap}
        began = time.perf_counter()
        with ProcessPoolExecutor(os.cpu_count(), initializer=_init, initargs=(path,)) as pool:
            options = {
                "devices": devices,
                "choice_seconds": choice_seconds,
                "measure_seconds": measure_seconds,
                "pick": sequential_pick,
                "lag": lag,
            }
            modes = ("sequential", "concurrent") + ("sequential_pick",) * bool(sequential_pick)
            modes += ("sequential_lag",) * bool(lag)
            modes += ("sync",) * sync
            for mode in modes:
                runs = list(
                    pool.map(
                        _one,
                        [mode] * repeats,
                        [strategy] * repeats,
                        seeds,
                        [cap] * repeats,
                        [options] * repeats,
                    )
                )
                hits = [hit for hit, _ in runs]
                standards = standards_from_hits(hits)
                seconds = float(np.median([seconds for _, seconds in runs]))
                row[mode] = {
                    "std1": standards.std1,
                    "std2": standards.std2,
                    "seconds_to_std1": round(seconds, 1) if math.isfinite(seconds) else None,
                    "hits": hits,
                }
        for mode in modes[1:]:
            row[mode]["interval"] = change_interval(
                row["sequential"]["hits"], row[mode]["hits"], cap
            )
        row["seconds"] = round(time.perf_counter() - began)
        rows.append(row)
        shown = {k: {**v, "hits": "..."} if isinstance(v, dict) else v for k, v in row.items()}
        print(json.dumps(shown), file=sys.stderr, flush=True)
    return rows


def change_interval(
    before: list[int | None], after: list[int | None], cap: int, draws: int = 2000
) -> dict[str, list[float]]:
    """A 90% bootstrap interval of each standard's change (after / before - 1): with 100 runs,
    two seed sets of the same search give standards up to 24% apart, so a change is only told
    from noise with its interval. The runs are paired by seed (`before[i]` and `after[i]` ran
    with the same one) and resampled in pairs, so a search that makes the same runs as the
    other (`--sync`) shows no change at all. A standard not reached counts as the cap."""
    from annotune.bench import standards_from_hits

    if len(before) != len(after):
        raise ValueError("the runs are paired by seed: give as many of each")
    rng = np.random.default_rng(0)
    changes: dict[str, list[float]] = {"std1": [], "std2": []}
    for _ in range(draws):
        picks = rng.integers(len(before), size=len(before))
        b = standards_from_hits([before[i] for i in picks])
        a = standards_from_hits([after[i] for i in picks])
        for name in changes:
            old, new = getattr(b, name) or cap, getattr(a, name) or cap
            changes[name].append(new / old - 1.0)
    return {
        name: [round(float(q), 3) for q in np.quantile(values, [0.05, 0.95])]
        for name, values in changes.items()
    }


def _change(before: int | None, after: int | None, cap: int) -> str:
    """after / before - 1 as a percentage; a standard not reached counts as the cap."""
    b, a = before or cap, after or cap
    return f"{100.0 * (a / b - 1.0):+.0f}%"


def _span(interval: list[float]) -> str:
    low, high = interval
    return f"{100.0 * low:+.0f}..{100.0 * high:+.0f}%"


def _std(value: int | None, cap: int) -> str:
    return str(value) if value is not None else f"> {cap}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path, help="replay files (--quality)")
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--per-device", type=int, default=40, help="measurements per device")
    parser.add_argument("--strategy", default="iterml")
    parser.add_argument("--quality", action="store_true", help="compare the searches instead")
    parser.add_argument("--quality-devices", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument(
        "--choice-seconds", type=float, help="charge this per choice, not the time it took"
    )
    parser.add_argument(
        "--measure-seconds", type=float, default=DELAY_S, help="each simulated measurement"
    )
    parser.add_argument(
        "--sequential-pick", type=int, help="also the sequential search with batches of N"
    )
    parser.add_argument(
        "--lag", type=int, help="also the sequential search choosing without its newest L results"
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="the devices measure the search's own batches, each waited for whole (tune --sync)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    if args.lag is not None and args.lag < 1:
        parser.error("--lag needs at least 1")
    if args.sequential_pick and args.strategy != "iterml":
        parser.error("--sequential-pick sets IterML's batches: it needs --strategy iterml")
    if args.quality:
        paths = args.datasets or sorted(REPLAY_DIR.glob("*.json.gz"))
        rows = quality(
            paths,
            args.strategy,
            args.repeats,
            args.quality_devices,
            args.choice_seconds,
            args.sequential_pick,
            args.measure_seconds,
            args.lag,
            args.sync,
        )
        if args.json:
            print(json.dumps(rows, indent=1))
            return 0
        columns = {"concurrent": f"{args.quality_devices} devices"}
        if args.sequential_pick:
            columns["sequential_pick"] = f"sequential, batches of {args.sequential_pick}"
        if args.lag:
            columns["sequential_lag"] = f"sequential, {args.lag} results late"
        if args.sync:
            columns["sync"] = f"{args.quality_devices} devices, --sync"
        heads = [f"{c} std1 / std2 | change | 90% interval | s to std1" for c in columns.values()]
        print("| dataset | sequential std1 / std2 | s to std1 | " + " | ".join(heads) + " |")
        print("|---" * (3 + 4 * len(columns)) + "|")
        for row in rows:
            s, cap = row["sequential"], row["cap"]
            cells = [f"{_std(s['std1'], cap)} / {_std(s['std2'], cap)} | {s['seconds_to_std1']}"]
            for mode in columns:
                c = row[mode]
                cells.append(
                    f"{_std(c['std1'], cap)} / {_std(c['std2'], cap)} | "
                    f"{_change(s['std1'], c['std1'], cap)} / {_change(s['std2'], c['std2'], cap)}"
                    f" | {_span(c['interval']['std1'])} / {_span(c['interval']['std2'])}"
                    f" | {c['seconds_to_std1']}"
                )
            print(f"| {row['dataset']} | " + " | ".join(cells) + " |")
        return 0

    rows = throughput(args.devices, args.per_device, args.strategy, args.sync)
    if args.json:
        print(
            json.dumps(
                [{k: row[k] for k in ("devices", "configs_per_min", "efficiency")} for row in rows],
                indent=1,
            )
        )
        return 0
    print(
        "| devices | configs / min | efficiency | ideal / min | measurements | wall s | "
        "search s | actors' start-up s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['devices']} | {row['configs_per_min']:.0f} | {row['efficiency']:.2f} | "
            f"{row['ideal_per_min']} | {row['measurements']} | {row['wall_s']} | "
            f"{row['search_s']} | {row['actor_startup_s']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
