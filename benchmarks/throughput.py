"""Configurations a minute, and where the time goes: compile-only everywhere, tunes on a GPU.

    python benchmarks/throughput.py [--configs 60] [--nvcc-configs 12] [--example conv2d] [--json]
    python benchmarks/throughput.py --gpu [--kernel-configs 1000] [--program-configs 30]

(a) Compile-only, on this machine, for every CUDA example with a `#pragma annotune kernel`:
the same configurations (the default, then the random strategy's picks under seed 0; the
default is the one `annotune tune --compile-only` compiles) compiled to sm_90 cubins by the
NVRTC pool (`annotune.builder.nvrtc`) and by one nvcc process per variant, the pool as wide
as the core count in both cases, each into a fresh compile cache. nvcc gets fewer
configurations (`--nvcc-configs`): it is the slow side, and its rate per variant does not
depend on how many there are.

Beside it, the whole-process figure (`--whole-process N`, 120 by default, 0 to leave it out):
`annotune tune conv2d.cu --mode kernel --compile-only --arch sm_90 --budget N` as a user runs
it, a fresh interpreter and a fresh copy of the example (so a fresh compile cache), its wall
time from start to exit (imports, libclang's parse, the pool's start and every compile), set
against N times the seconds one nvcc variant takes in (a).

(b) With `--gpu` (needs a CUDA GPU and cuda-python): conv2d tuned end to end in kernel mode
and in program mode by `annotune.session.tuner.tune` (random strategy, fresh study, 5 timed
runs per configuration, outputs checked against the default's, no final check and no drift
check, so that every second is spent on the configurations counted), and, when
`kernel_tuner` imports, Kernel Tuner tuning the same kernel (the device code annotune's
slice gives NVRTC, `lang="nvcuda"`) on the same GPU with the same number of configurations
and `iterations=5`, in the same run. The GPU's busy share is the kernel time the runs timed
over the tune's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cuda"
CONV2D = EXAMPLES / "conv2d" / "conv2d.cu"
ARCH = "sm_90"


def cuda_examples(names: list[str]) -> list[Path]:
    """The CUDA examples (all, or those `names` names) that declare a kernel: kernel mode is
    what NVRTC compiles."""
    found = []
    for source in sorted(EXAMPLES.glob("*/*.cu")):
        wanted = not names or source.parent.name in names
        if wanted and "#pragma annotune kernel" in source.read_text():
            found.append(source)
    return found


def compile_only(source: Path, configs: int, *, nvrtc: bool, jobs: int | None) -> dict:
    """One compile-only run into a fresh cache: its counts, seconds and rate."""
    from annotune.annotate import read_problem
    from annotune.builder import cubin_compiler
    from annotune.session.compile_only import compile_configurations
    from annotune.session.options import TuneOptions

    problem = read_problem(source)
    with tempfile.TemporaryDirectory() as cache:
        options = TuneOptions(budget=configs, seed=0, jobs=jobs, cache_dir=Path(cache))
        if nvrtc:
            report = compile_configurations(problem, options, ARCH)
        else:
            compiler = cubin_compiler((int(ARCH[3]), int(ARCH[4])))
            report = compile_configurations(problem, replace(options, compiler=compiler))
    done = report.compiled + report.failed
    return {
        "configs": done,
        "compiled": report.compiled,
        "failed": report.failed,
        "fallbacks": report.fallbacks,
        "seconds": round(report.seconds, 2),
        "per_minute": round(60 * done / report.seconds, 1) if report.seconds else None,
        "command": report.command,
    }


def compile_table(args: argparse.Namespace) -> list[dict]:
    rows = []
    for source in cuda_examples(args.example):
        name = source.parent.name
        fast = compile_only(source, args.configs, nvrtc=True, jobs=args.jobs)
        slow = compile_only(source, args.nvcc_configs, nvrtc=False, jobs=args.jobs)
        ratio = fast["per_minute"] / slow["per_minute"] if slow["per_minute"] else None
        rows.append({"example": name, "nvrtc": fast, "nvcc": slow, "ratio": ratio})
        if not args.json:
            print(
                f"{name:12} {fast['per_minute']:>9.0f} {slow['per_minute']:>9.0f} "
                f"{ratio:>7.1f}x   nvrtc {fast['compiled']}/{fast['configs']} compiled, "
                f"{fast['fallbacks']} by nvcc instead, {fast['seconds']:.1f} s; "
                f"nvcc {slow['compiled']}/{slow['configs']}, {slow['seconds']:.1f} s",
                flush=True,
            )
    return rows


def whole_process(configs: int, nvcc_seconds: float) -> dict:
    """`annotune tune --mode kernel --compile-only` on a fresh copy of conv2d, timed from the
    interpreter's start to its exit; `nvcc_seconds`: one nvcc variant's share of (a)'s wall."""
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("conv2d", "common"):
            shutil.copytree(EXAMPLES / name, Path(scratch) / name, ignore=_no_outputs)
        command = ["tune", "conv2d.cu", "--mode", "kernel", "--compile-only", "--arch", ARCH]
        command += ["--budget", str(configs), "--json"]
        done, seconds = timed_annotune(command, Path(scratch) / "conv2d")
    if done.returncode != 0:
        raise SystemExit(f"annotune {' '.join(command)} failed:\n{done.stderr}")
    report = json.loads(done.stdout)
    return {
        "command": "annotune " + " ".join(command),
        "configs": report["compiled"] + report["failed"],
        "fallbacks": report["fallbacks"],
        "seconds": round(seconds, 2),
        "compile_seconds": round(report["seconds"], 2),
        "nvcc_seconds_each": round(nvcc_seconds, 3),
        "ratio": round(configs * nvcc_seconds / seconds, 1),
    }


def timed_annotune(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """`annotune ARGS` in a fresh interpreter with this checkout importable, run in `cwd`, and
    its wall time from start to exit (what a user waits for)."""
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "annotune", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    return done, time.monotonic() - started


def _no_outputs(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in (".annotune", "tuned")]


def tune_row(mode: str, configs: int) -> dict:
    """conv2d tuned end to end in `mode`: configurations a minute and where the time went."""
    from annotune.annotate import read_problem
    from annotune.run.program import RunSpec
    from annotune.session.options import TuneOptions
    from annotune.session.tuner import tune

    problem = read_problem(CONV2D)
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        options = TuneOptions(
            strategy="random",
            budget=configs,
            mode=mode,
            fresh=True,
            db_path=where / "results.db",
            cache_dir=where / "cache",
            out_dir=where / "tuned",
            recheck=0,
            drift_every=0,
            run=RunSpec(repeats=5, max_repeats=5),
        )
        report = tune(problem, options)
    wall = report.wall_breakdown
    assert wall is not None
    return {
        "mode": mode,
        "configs": report.evaluations,
        "invalid": report.invalid,
        "per_minute": round(60 * report.evaluations / wall.wall, 1),
        "gpu_busy": round(wall.gpu / wall.wall, 3),
        "wall_breakdown": wall.to_json(),
    }


def kernel_tuner_row(configs: int) -> dict | None:
    """Kernel Tuner on the same kernel, GPU and number of configurations; None without it."""
    try:
        import kernel_tuner
    except ImportError:
        return None
    import numpy as np

    from annotune.annotate import read_problem

    problem = read_problem(CONV2D)
    assert problem.device_code is not None
    main = os.path.abspath(problem.source)
    code = problem.device_code
    source = code.prelude + code.slice(main, Path(main).read_bytes()).decode()
    params = {p.name: list(p.values) for p in problem.params}
    size = 8192
    a = np.random.default_rng(0).random(size * size).astype(np.float32)
    b = np.zeros_like(a)
    row = time_kernel_tuner(
        kernel_tuner,
        configs,
        "conv2d",
        source,
        (size, size),
        [a, b],
        params,
        grid_div_x=["BLOCK_X"],
        grid_div_y=["BLOCK_Y * ROWS_PER_THREAD"],
        block_size_names=["BLOCK_X", "BLOCK_Y"],
        restrictions=["BLOCK_X * BLOCK_Y <= 1024"],
    )
    return {"mode": row.pop("tuner"), **row}


def time_kernel_tuner(kernel_tuner, configs: int, *inputs, **options) -> dict:
    """Kernel Tuner's random sampling of `configs` configurations, timed from its call: its
    configurations a minute and the GPU's busy share (5 timed launches a configuration). Its
    outputs are not checked, where annotune's are."""
    started = time.perf_counter()
    results, _ = kernel_tuner.tune_kernel(
        *inputs,
        strategy="random_sample",
        strategy_options={"max_fevals": configs},
        lang="nvcuda",
        iterations=5,
        quiet=True,
        **options,
    )
    seconds = time.perf_counter() - started
    busy = sum(r["time"] * 5 for r in results if isinstance(r.get("time"), float)) / 1000
    return {
        "tuner": f"kernel_tuner {kernel_tuner.__version__}",
        "configs": len(results),
        "seconds": round(seconds, 2),
        "per_minute": round(60 * len(results) / seconds, 1),
        "gpu_busy": round(busy / seconds, 3),
        "outputs_checked": False,
    }


def gpu_table(args: argparse.Namespace) -> list[dict]:
    rows = [tune_row("kernel", args.kernel_configs), tune_row("program", args.program_configs)]
    theirs = kernel_tuner_row(args.kernel_configs)
    if theirs is not None:
        rows.append(theirs)
    if not args.json:
        for row in rows:
            print(
                f"{row['mode']:24} {row['configs']:>6} {row['per_minute']:>10.0f} "
                f"{row['gpu_busy']:>8.0%}  {json.dumps(row.get('wall_breakdown', {}))}",
                flush=True,
            )
        if theirs is None:
            print("kernel_tuner is not installed: no Kernel Tuner row", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=60, help="NVRTC configurations each")
    parser.add_argument("--nvcc-configs", type=int, default=12, help="nvcc configurations each")
    parser.add_argument("--jobs", type=int, default=None, help="compile pool width (cores)")
    parser.add_argument("--example", action="append", default=[], help="e.g. conv2d (repeat)")
    parser.add_argument("--gpu", action="store_true", help="also tune conv2d on this GPU")
    parser.add_argument("--kernel-configs", type=int, default=1000)
    parser.add_argument("--program-configs", type=int, default=30)
    parser.add_argument("--whole-process", type=int, default=120, help="conv2d configurations")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    if not args.json:
        print(f"compile-only, {ARCH}, {os.cpu_count()} cores: configurations a minute")
        print(f"{'example':12} {'NVRTC':>9} {'nvcc':>9} {'ratio':>8}")
    result: dict = {"compile_only": compile_table(args)}
    conv2d = [row for row in result["compile_only"] if row["example"] == "conv2d"]
    if args.whole_process and conv2d:
        nvcc = conv2d[0]["nvcc"]
        row = whole_process(args.whole_process, nvcc["seconds"] / nvcc["configs"])
        result["whole_process"] = row
        if not args.json:
            print(
                f"\nwhole process: {row['command']}: {row['configs']} configurations in "
                f"{row['seconds']:.1f} s wall ({row['compile_seconds']:.1f} s compiling, "
                f"{row['fallbacks']} by nvcc); nvcc {row['nvcc_seconds_each']:.2f} s a "
                f"variant: {row['ratio']:.1f}x",
                flush=True,
            )
    if args.gpu:
        if not args.json:
            print(
                "\nconv2d tuned end to end (5 timed runs each; outputs checked, not Kernel Tuner's)"
            )
            print(f"{'tuner':24} {'configs':>6} {'per minute':>10} {'GPU busy':>8}")
        result["tune"] = gpu_table(args)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
