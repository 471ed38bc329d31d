"""Record the host OpenACC matmul example at several problem sizes, as Kernel Tuner caches.

    python benchmarks/record_sizes.py [--sizes 128,192,256,384,512] [--configs 0] [--repeats 7]

Data for the held-out-size evaluation (`annotune bench --held-out-size`, benchmarks/sizes.py):
the same configurations at every size, so that one size can be left out and predicted from
the others. The space is the example's own annotations (`annotune scan`) without `VL`: built
with `gcc -fopenacc` and no offload target the region runs on the host, where `vector_length`
changes nothing, so VL would only add configurations that differ by noise.

Every (size, configuration) is compiled once (`-DN=... -DTILE_I=...`: the example guards each
macro), then timed `--repeats` times. Each repeat runs every binary once in a fresh random
order, so that the machine's slow spells (it is shared) fall on all sizes and configurations
alike rather than on one block of them. A configuration's time is the median of its repeats
(the example times its own multiply, `time_ms`, so process start-up is not in it). A binary
that fails to compile, exits non-zero or prints a wrong result (the example checks a sample)
is recorded as invalid, the way Kernel Tuner marks it.

Writes OUT/matmul_host_N<size>.json.gz (gzip with a fixed mtime: the same data gives the same
bytes) and prints the recording conditions and the noise (`noise`): per size, the median and
90th percentile over configurations of the median absolute deviation of the repeats relative
to their median, and the share of runs more than 20% slower than their configuration's median
(a run that shared its core with another process: the median of the repeats ignores them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "openacc" / "matmul" / "matmul.c"
OUT = ROOT / "benchmarks" / "data"
TIME = re.compile(r"^time_ms ([0-9.]+)$", re.MULTILINE)
HOST_ONLY = ("VL",)
"""Parameters that do nothing on the host (see the module docstring)."""

sys.path.insert(0, str(ROOT))

from annotune.space import Param, Space  # noqa: E402  (runs from a checkout, uninstalled)


def scanned_space(source: Path) -> Space:
    """The example's parameters and constraints as `annotune scan` reads them, less VL."""
    scan = subprocess.run(
        [sys.executable, "-m", "annotune", "scan", str(source), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    found = json.loads(scan.stdout)
    params = [
        Param(p["name"], tuple(p["values"]), p["default"])
        for p in found["params"]
        if p["name"] not in HOST_ONLY
    ]
    return Space(params, [c["expr"] for c in found["constraints"]])


def configurations(space: Space, count: int, seed: int) -> list[dict[str, int]]:
    """The default, then a seeded uniform sample of the legal space (all of it when count is
    0 or at least its size), in the space's order."""
    legal = space.legal_indices()
    if 0 < count < len(legal):
        rows = space.sample(count, np.random.default_rng(seed))
        rows = np.unique(np.vstack([space.default_row()[None, :], rows]), axis=0)
    else:
        rows = legal
    return space.to_dicts(rows)


def compile_binary(size: int, config: dict[str, int], output: Path, cc: str) -> float | None:
    """Build one variant; its compile time in ms, None when the compiler refused it."""
    defines = [f"-DN={size}"] + [f"-D{name}={value}" for name, value in config.items()]
    start = time.perf_counter()
    done = subprocess.run(
        [cc, "-O2", "-fopenacc", *defines, str(SOURCE), "-o", str(output), "-lm"],
        capture_output=True,
    )
    return 1e3 * (time.perf_counter() - start) if done.returncode == 0 else None


def run_ms(binary: Path) -> float | None:
    """The multiply's own time in ms; None when the run failed or its result was wrong."""
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    found = TIME.search(done.stdout)
    return float(found.group(1)) if done.returncode == 0 and found else None


def noise(repeats: list[list[float]]) -> tuple[float, float, float]:
    """Relative MAD of each configuration's repeats (median and 90th percentile over the
    configurations) and the share of all runs over 1.2x their configuration's median."""
    times = [np.asarray(t) for t in repeats]
    medians = [np.median(t) for t in times]
    mad = [np.median(np.abs(t - m)) / m for t, m in zip(times, medians, strict=True)]
    slow = sum(int(np.count_nonzero(t > 1.2 * m)) for t, m in zip(times, medians, strict=True))
    p50, p90 = np.percentile(mad, [50, 90])
    return float(p50), float(p90), slow / sum(t.size for t in times)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def cache_file(
    size: int,
    space: Space,
    configs: list[dict[str, int]],
    timings: dict[tuple[int, int], list[float | None]],
    compiled: dict[tuple[int, int], float | None],
    device: str,
) -> dict:
    """One size's Kernel Tuner cache (format: ../shared/data/replay/README.md)."""
    cache = {}
    for c, config in enumerate(configs):
        key = ",".join(str(config[name]) for name in space.names)
        compile_ms = compiled[size, c]
        times = timings.get((size, c), [])
        if compile_ms is None:
            record = {"time": "CompilationFailedConfig"}
        elif not times or any(t is None for t in times):
            record = {"time": "RuntimeFailedConfig", "compile_time": compile_ms}
        else:
            record = {
                "time": statistics.median(times),
                "times": times,
                "compile_time": round(compile_ms, 1),
            }
        cache[key] = {**config, **record}
    return {
        "device_name": device,
        "kernel_name": "matmul",
        "problem_size": [size],
        "tune_params_keys": list(space.names),
        "tune_params": {p.name: list(p.values) for p in space.params},
        "objective": "time",
        "cache": cache,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="128,192,256,384,512")
    parser.add_argument("--configs", type=int, default=0, help="Sample size (0: every one).")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cc", default="gcc")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    space = scanned_space(SOURCE)
    configs = configurations(space, args.configs, args.seed)
    work = Path(tempfile.mkdtemp(prefix="annotune-sizes-"))
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.perf_counter()

    compiled: dict[tuple[int, int], float | None] = {}
    for size in sizes:
        for c, config in enumerate(configs):
            compiled[size, c] = compile_binary(size, config, work / f"m{size}_{c}", args.cc)
        print(f"compiled N={size}", file=sys.stderr)
    built = time.perf_counter()

    pairs = [key for key, ms in compiled.items() if ms is not None]
    timings: dict[tuple[int, int], list[float | None]] = {key: [] for key in pairs}
    rng = np.random.default_rng(args.seed)
    for repeat in range(args.repeats):
        for i in rng.permutation(len(pairs)):
            size, c = pairs[i]
            timings[size, c].append(run_ms(work / f"m{size}_{c}"))
        print(f"repeat {repeat + 1}/{args.repeats}", file=sys.stderr)
    finished = time.perf_counter()
    shutil.rmtree(work, ignore_errors=True)

    device = f"{cpu_name()} (host, {args.cc} -O2 -fopenacc, 1 thread)"
    args.out.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        data = cache_file(size, space, configs, timings, compiled, device)
        text = json.dumps(data, separators=(",", ":")).encode()
        path = args.out / f"matmul_host_N{size}.json.gz"
        path.write_bytes(gzip.compress(text, mtime=0))

    print(f"device: {device}")
    print(f"space: {', '.join(space.names)} ({len(configs)} configurations, VL left out)")
    print(f"repeats: {args.repeats}, interleaved; load average before: {' '.join(load_before)}")
    print(f"load average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(f"compile {built - started:.0f} s, timing {finished - built:.0f} s")
    print(f"{'N':>6}{'invalid':>9}{'best ms':>10}{'MAD p50':>9}{'MAD p90':>9}{'slow runs':>11}")
    for size in sizes:
        runs = [t for (s, _), t in timings.items() if s == size and None not in t]
        invalid = len(configs) - len(runs)
        best = min(statistics.median(t) for t in runs)
        p50, p90, slow = noise(runs)
        print(f"{size:>6}{invalid:>9}{best:>10.2f}{p50:>9.1%}{p90:>9.1%}{slow:>11.1%}")


if __name__ == "__main__":
    main()
