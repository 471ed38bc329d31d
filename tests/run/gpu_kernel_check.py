"""Kernel mode on a real GPU, end to end, with every backend that imports here.

    python tests/run/gpu_kernel_check.py [--repeats N]

Compiles the fixture tests/data/kernel/jacobi.cu to cubins with nvcc for this GPU, for a few
block shapes, and measures them through KernelRunner with each backend (pycuda, cuda-python):
statuses, median times, outputs checked against numpy and against the default configuration,
a block of 2048 threads refused as a runtime_error, the size_t/float/double kernel `axpy`, and
the two backends' outputs compared with each other. Then throughput: for each block shape, how
many configurations a minute the runner measures (5 timed launches each, outputs checked, the
cubins compiled beforehand), with where the time went (`run_seconds`), against the goal of
1,000 a minute. Exit code 0 when every check passes, 1 when one fails, 2 when no backend or no
GPU can be used.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from annotune.annotate.kernels import KernelSpec, kernel_specs  # noqa: E402
from annotune.annotate.source import parse_source  # noqa: E402
from annotune.builder import cubin_compiler  # noqa: E402
from annotune.core.records import BuildResult  # noqa: E402
from annotune.run.backends import (  # noqa: E402
    BACKENDS,
    BackendError,
    BackendUnavailable,
    KernelBackend,
    open_backend,
)
from annotune.run.kernel import KernelReference, KernelRunner  # noqa: E402
from annotune.run.sampling import Sampling  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "kernel" / "jacobi.cu"
DEFAULT = {"BLOCK_X": 32, "BLOCK_Y": 4}
SHAPES = [
    DEFAULT,
    {"BLOCK_X": 8, "BLOCK_Y": 1},
    {"BLOCK_X": 16, "BLOCK_Y": 8},
    {"BLOCK_X": 128, "BLOCK_Y": 8},
]
TOO_BIG = {"BLOCK_X": 128, "BLOCK_Y": 16}
GOAL_PER_MINUTE = 1000  # configurations, 5 timed launches each, outputs checked (issue 21)


def jacobi_host(grid: np.ndarray, nx: int, ny: int) -> np.ndarray:
    a = grid.reshape(ny, nx)
    out = a.copy()
    out[1:-1, 1:-1] = np.float32(0.25) * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
    return out.ravel()


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def expect(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        self.failed += not ok


def compile_cubin(directory: Path, backend: KernelBackend, params: dict) -> BuildResult:
    output = directory / f"jacobi-{params['BLOCK_X']}x{params['BLOCK_Y']}.cubin"
    argv = cubin_compiler(backend.compute_capability()).render(
        FIXTURE, output, [f"-D{k}={v}" for k, v in params.items()], [str(FIXTURE.parent)]
    )
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return BuildResult(dict(params), None, error=done.stderr[-500:])
    return BuildResult(dict(params), output, seconds=time.monotonic() - started)


def check_backend(name: str, repeats: int, checks: Checks, outputs: dict) -> bool:
    try:
        backend = open_backend(name)
    except (BackendUnavailable, BackendError) as reason:
        print(f"{name}: not usable here ({reason})")
        return False
    specs = {s.name: s for s in kernel_specs(parse_source(FIXTURE), ("BLOCK_X", "BLOCK_Y"))}
    with backend, tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        major, minor = backend.compute_capability()
        print(f"{name}: {backend.device_name()} (sm_{major}{minor})")
        sampling = Sampling(min_runs=repeats, max_runs=max(repeats, 200))
        l2 = backend.l2_cache_bytes()
        checks.expect(l2 > 0, f"L2 cache: {l2 / 2**20:.0f} MiB")
        runner = KernelRunner(specs["jacobi_step"], backend, sampling=sampling)
        reference = None
        for params in SHAPES:
            runner.reference = reference
            measured = runner.measure(compile_cubin(directory, backend, params))
            mine = runner.outputs
            time_text = (
                f"{measured.time:.4f} ms, 95% interval {measured.interval}, "
                f"{len(measured.times)} launches, L2 flush {measured.compile_info.get('l2_flush')}"
                if measured.time is not None
                else measured.error
            )
            checks.expect(
                measured.status == "ok", f"jacobi {params}: {measured.status} {time_text}"
            )
            if reference is None and mine is not None:
                reference = mine
                inputs = runner.input_array(0, specs["jacobi_step"].launch(params).args[0])
                expected = jacobi_host(inputs, 300, 200)
                error = float(np.max(np.abs(mine.outputs["out"] - expected)))
                checks.expect(error <= 1e-6, f"jacobi output matches numpy (max error {error:.2g})")
                outputs[name] = mine.outputs["out"]
        measured = runner.measure(compile_cubin(directory, backend, TOO_BIG))
        checks.expect(
            measured.status == "runtime_error",
            f"2048 threads per block: {measured.status} ({measured.error})",
        )
        again = runner.measure(compile_cubin(directory, backend, DEFAULT))
        checks.expect(again.status == "ok", f"the device still works after that: {again.status}")

        axpy = KernelRunner(specs["axpy"], backend, sampling=sampling)
        measured = axpy.measure(compile_cubin(directory, backend, DEFAULT))
        mine = axpy.outputs
        checks.expect(
            measured.status == "ok", f"axpy: {measured.status} {measured.time or measured.error}"
        )
        if mine is not None:
            launch = specs["axpy"].launch(DEFAULT)
            x, y = axpy.input_array(2, launch.args[2]), axpy.input_array(3, launch.args[3])
            ok = np.allclose(mine.outputs["y"], y + np.float32(0.5) * x, rtol=1e-12, atol=0)
            checks.expect(ok, "axpy (size_t, float, const double *, double *) matches numpy")
            axpy.reference = mine
            again = axpy.measure(compile_cubin(directory, backend, DEFAULT))
            same = axpy.outputs
            checks.expect(
                again.status == "ok" and np.array_equal(same.outputs["y"], mine.outputs["y"]),
                f"axpy's inout array starts from its input again: {again.status}",
            )
        check_throughput(backend, specs["jacobi_step"], directory, checks, reference)
    return True


def check_throughput(
    backend: KernelBackend,
    spec: KernelSpec,
    directory: Path,
    checks: Checks,
    reference: KernelReference | None,
    count: int = 300,
) -> None:
    """Configurations a minute, one block shape at a time, as the tuner measures them."""
    runner = KernelRunner(spec, backend, warmup=1, sampling=Sampling(min_runs=5, max_runs=5))
    runner.reference = reference
    builds = [compile_cubin(directory, backend, params) for params in SHAPES]
    for build in builds:
        totals = {"wall": 0.0, "setup": 0.0, "gpu": 0.0}
        statuses = set()
        started = time.perf_counter()
        for _ in range(count):
            measured = runner.measure(build)
            statuses.add(measured.status)
            for key, value in measured.compile_info["run_seconds"].items():
                totals[key] += value
        rate = count / (time.perf_counter() - started) * 60
        shape = f"{build.params['BLOCK_X']}x{build.params['BLOCK_Y']}"
        checks.expect(
            statuses == {"ok"} and rate >= GOAL_PER_MINUTE,
            f"throughput {shape}: {rate:.0f} configurations a minute ({count} measured, "
            f"{statuses}); per configuration {1e3 * totals['wall'] / count:.2f} ms wall, "
            f"{1e3 * totals['setup'] / count:.2f} ms setup, "
            f"{1e3 * totals['gpu'] / count:.3f} ms on the GPU",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    options = parser.parse_args()
    checks = Checks()
    outputs: dict[str, np.ndarray] = {}
    usable = [name for name in BACKENDS if check_backend(name, options.repeats, checks, outputs)]
    if not usable:
        print("no backend could be used: nothing was checked")
        return 2
    if len(outputs) == 2:
        a, b = outputs.values()
        checks.expect(np.array_equal(a, b), "pycuda and cuda-python give the same jacobi output")
    print(f"backends checked: {', '.join(usable)}; {checks.failed} check(s) failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
