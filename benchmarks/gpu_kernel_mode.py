"""Kernel mode on a GPU, on kernels we did not write: configurations a minute, GPU busy share,
and Kernel Tuner's rate on the same kernels, side by side.

    python benchmarks/gpu_kernel_mode.py --suite-root /path/to/HeCBench [--configs 300] [--json]

Four HeCBench kernels, each declared in a config of ours (`realcode/kernels/NAME.toml`, put
beside a copy of the program as its annotune.toml; the program is not edited): che-cuda's
cahnHilliard (a 3-D block over 256^3 doubles), pathfinder-cuda's pathfinder (the block a
variable of main), shuffle-cuda's bcast_shfl_sg8 (one block) and blockScan-cuda's
BlockPrefixSumKernel (a template: block size and items per thread are its template
parameters, cub's BlockScan inside). For each:

1. `annotune tune main.cu --mode kernel --strategy random --budget N --fresh --recheck 0
   --json`, from the copy's `work/` directory, as a user runs it: configurations a minute over
   the process's wall time (start-up, libclang, compiles, runs), and the GPU's busy share (the
   kernels' timed seconds over the tune's wall, the report's `wall_breakdown`).
2. When `kernel_tuner` imports, Kernel Tuner on the same kernel: the same device code (annotune's
   slice, the tuned macros' own `#define` lines blanked so that Kernel Tuner's take effect),
   the same launches (grid and block from the declaration, for each configuration), the same
   arguments (sized for the largest configuration: Kernel Tuner's are fixed), `iterations=5`,
   random sampling of N configurations. Outputs are not checked there (annotune's are). A
   template kernel is named to Kernel Tuner with its template arguments as the config writes
   them (`BlockPrefixSumKernel<BT, IPT, ...>`, the knobs Kernel Tuner's macros); a failure of
   Kernel Tuner's is its row's error, not the script's.

Everything up to the GPU is done first (copies, the configs read and checked, Kernel Tuner's
inputs built), so that a machine without a GPU says so after having checked the rest: the
script then exits 2 with the reason. Needs a CUDA GPU, cuda-python or pycuda, and NVRTC.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "benchmarks" / "realcode" / "kernels"
PROGRAMS = ("che-cuda", "pathfinder-cuda", "shuffle-cuda", "blockScan-cuda")
EXIT_NO_GPU = 2


@dataclass(frozen=True)
class Prepared:
    """One program, copied with our config and read: what both tuners need."""

    name: str
    source: Path
    kernel: str
    problem: object  # annotune.annotate.Problem
    tuner_inputs: dict | None  # Kernel Tuner's arguments, or None with `why_not`
    why_not: str = ""


def prepare(name: str, suite_root: Path, scratch: Path) -> Prepared:
    """Copy `src/NAME` with our config beside it and read it as `annotune tune` does."""
    from annotune.annotate import read_problem

    copy = scratch / name
    shutil.copytree(suite_root / "src" / name, copy)
    shutil.copy(KERNELS / f"{name}.toml", copy / "annotune.toml")
    (copy / "work").mkdir()
    source = copy / "main.cu"
    problem = read_problem(source)
    (spec,) = problem.kernels
    inputs, why_not = kernel_tuner_inputs(problem, spec)
    return Prepared(name, source, spec.name, problem, inputs, why_not)


def kernel_tuner_inputs(problem, spec) -> tuple[dict | None, str]:
    """`kernel_tuner.tune_kernel`'s keyword arguments for `spec`, or None and why not."""
    import numpy as np

    from annotune.annotate import problem_space
    from annotune.annotate.device_code import NVRTC_PRELUDE
    from annotune.builder.nvrtc import toolkit_include_dirs

    names = {p.name for p in problem.params}
    block = [" ".join(e.text.split()) for e in spec.block]
    if not all(b in names for b in block):
        return None, f"a block dimension is no parameter ({', '.join(block)})"
    assert problem.device_code is not None
    text = ""
    for file in problem.files:
        sliced = problem.device_code.slice(file, Path(file).read_bytes()).decode()
        for param in names:  # the config's knobs are the file's #defines: Kernel Tuner's win
            sliced = re.sub(rf"(?m)^[ \t]*#[ \t]*define[ \t]+{param}\b.*$", "", sliced)
        text += sliced if file == str(problem.source) else ""
    headers = [f for f in problem.files if f != str(problem.source)]
    space = problem_space(problem)
    rng = np.random.default_rng(0)
    configs = space.to_dicts(space.search_rows(rng, limit=4096)[0])
    launches = [spec.launch(c) for c in configs]
    arguments = []
    for index, arg in enumerate(launches[0].args):
        if arg.is_pointer:
            count = max(launch.args[index].count for launch in launches)
            arguments.append(rng.random(count).astype(arg.dtype))
        else:
            arguments.append(np.array(arg.value, dtype=arg.dtype)[()])
    name = spec.name
    if spec.template:  # the knobs as written: Kernel Tuner defines them as macros
        name = f"{spec.scope}{spec.name}<{', '.join(arg.text for arg in spec.template)}>"
    return {
        "kernel_name": name,
        "kernel_source": NVRTC_PRELUDE + text,
        "problem_size": lambda p: spec.launch(p).grid,
        "arguments": arguments,
        "tune_params": {p.name: list(p.values) for p in problem.params},
        "grid_div_x": [],
        "grid_div_y": [],
        "grid_div_z": [],
        "block_size_names": block,
        "restrictions": [c.expr for c in problem.constraints] or None,
        "compiler_options": [
            *(f"-I{os.path.dirname(h)}" for h in headers),
            *(f"-I{d}" for d in toolkit_include_dirs()),  # cub, libcu++
        ],
    }, ""


def annotune_row(prepared: Prepared, configs: int) -> dict:
    """The tune as a user runs it, timed from the process's start to its exit."""
    from throughput import timed_annotune  # a sibling script: benchmarks/ is on sys.path

    command = ["tune", "../main.cu", "--mode", "kernel", "--strategy", "random"]
    command += ["--budget", str(configs), "--fresh", "--recheck", "0", "--json"]
    done, seconds = timed_annotune(command, prepared.source.parent / "work")
    if done.returncode != 0:
        return {"tuner": "annotune", "error": done.stderr.strip()[-2000:]}
    report = json.loads(done.stdout)
    wall = report.get("wall_breakdown") or {}
    evaluations = report.get("evaluations", 0)
    return {
        "tuner": "annotune",
        "configs": evaluations,
        "seconds": round(seconds, 2),
        "per_minute": round(60 * evaluations / seconds, 1),
        "gpu_busy": round(wall["gpu"] / wall["wall"], 3) if wall.get("wall") else None,
        "wall_breakdown": wall,
    }


def kernel_tuner_row(prepared: Prepared, configs: int) -> dict:
    from throughput import time_kernel_tuner  # a sibling script: benchmarks/ is on sys.path

    try:
        import kernel_tuner
    except ImportError:
        return {"tuner": "kernel_tuner", "error": "kernel_tuner is not installed"}
    if prepared.tuner_inputs is None:
        return {"tuner": "kernel_tuner", "error": prepared.why_not}
    inputs = dict(prepared.tuner_inputs)
    try:
        return time_kernel_tuner(
            kernel_tuner,
            configs,
            inputs.pop("kernel_name"),
            inputs.pop("kernel_source"),
            inputs.pop("problem_size"),
            inputs.pop("arguments"),
            inputs.pop("tune_params"),
            **inputs,
        )
    except Exception as error:  # noqa: BLE001 - Kernel Tuner's failure is this row's result
        return {"tuner": "kernel_tuner", "error": f"{type(error).__name__}: {error}"[:2000]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-root", type=Path, required=True, help="a HeCBench checkout")
    parser.add_argument("--configs", type=int, default=300, help="configurations per tuner")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from annotune.run.device import gpu_name

    with tempfile.TemporaryDirectory() as scratch:
        prepared = [prepare(name, args.suite_root, Path(scratch)) for name in PROGRAMS]
        gpu = gpu_name()
        if gpu is None:
            checked = ", ".join(f"{p.name} ({p.kernel})" for p in prepared)
            print(
                f"gpu_kernel_mode: no CUDA GPU here (nvidia-smi finds none); checked without "
                f"one: the copies and configs of {checked}",
                file=sys.stderr,
            )
            return EXIT_NO_GPU
        rows = []
        for one in prepared:
            for row in (annotune_row(one, args.configs), kernel_tuner_row(one, args.configs)):
                rows.append({"program": one.name, "kernel": one.kernel, **row})
                if not args.json:
                    said = (
                        row["error"]
                        if "error" in row
                        else f"{row['configs']:>5} configs {row['per_minute']:>8.0f}/min "
                        f"GPU busy {row['gpu_busy']:.0%}"
                    )
                    print(f"{one.name:16} {one.kernel:16} {row['tuner']:20} {said}", flush=True)
    if args.json:
        print(json.dumps({"gpu": gpu, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
