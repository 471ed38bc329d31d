"""Kernel mode's runner: inputs, reference, checking, timing and failures as statuses.

Everything but the GPU runs here for real: the runner drives a CPU stand-in for a backend whose
"cubins" name a behaviour (correct, wrong, faulting, hanging) and whose kernels are numpy
functions. The tests marked `gpu` compile the fixture with nvcc and run it through each real
backend; they skip, saying why, where there is no GPU or no backend.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.util
import itertools
import math
import shutil
import struct
import subprocess
import time
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate.kernels import KernelSpec, kernel_specs
from annotune.annotate.source import parse_source
from annotune.builder import cubin_compiler
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, KernelResources
from annotune.run.backends import (
    BACKENDS,
    BackendError,
    BackendUnavailable,
    KernelBackend,
    KernelTimeout,
    open_backend,
    select_backend,
)
from annotune.run.backends.cuda_python_backend import CudaPythonBackend
from annotune.run.backends.pycuda_backend import PycudaBackend
from annotune.run.kernel import (
    INTEGER_INPUT_LIMIT,
    KernelReference,
    KernelRunner,
    compare_outputs,
)
from annotune.run.sampling import Sampling

FIXTURE = Path(__file__).parent.parent / "data" / "kernel" / "jacobi.cu"
DEFAULT = {"BLOCK_X": 32, "BLOCK_Y": 4}


@pytest.fixture(scope="module")
def specs() -> dict[str, KernelSpec]:
    specs = kernel_specs(parse_source(FIXTURE), ("BLOCK_X", "BLOCK_Y"))
    return {spec.name: spec for spec in specs}


def jacobi_host(grid: np.ndarray, nx: int, ny: int) -> np.ndarray:
    """What the fixture's jacobi_step computes, in the same float32 order."""
    a = grid.reshape(ny, nx)
    out = a.copy()
    out[1:-1, 1:-1] = np.float32(0.25) * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
    return out.ravel()


# --- a CPU stand-in for a backend ----------------------------------------------------------------


def _jacobi(behaviour: str, args: list) -> None:
    source, target, nx, ny = args
    assert isinstance(nx, np.int32) and isinstance(ny, np.int32)
    out = target.view(np.float32)
    out[:] = jacobi_host(source.view(np.float32), int(nx), int(ny))
    if behaviour == "wrong":
        out[7] += 1e-3
    elif behaviour == "clobber":  # right, but writes past its output into the input
        source.view(np.float32)[3] = 42.0


def _axpy(behaviour: str, args: list) -> None:
    n, a, x, y = args
    assert isinstance(n, np.uint64) and isinstance(a, np.float32)
    y.view(np.float64)[: int(n)] += a * x.view(np.float64)[: int(n)]


def _bump(behaviour: str, args: list) -> None:
    (out,) = args
    out += 1  # adds to what it finds: right only on a zeroed array


def _scribble(behaviour: str, args: list) -> None:
    inputs, out = args
    out[:] = 1
    inputs.view(np.int32)[0] = -1  # writes the array its pragma declares in(...)


KERNELS = {
    "_Z11jacobi_stepPKfPfii": _jacobi,
    "_Z4axpymfPKdPd": _axpy,
    "_Z1kPKiPhPx": lambda behaviour, args: None,
    "_Z4bumpPh": _bump,
    "_Z8scribblePiPh": _scribble,
    "_Z6lookupPf": lambda behaviour, args: None,
}


def fixed(runs: int) -> Sampling:
    """Exactly `runs` timed launches."""
    return Sampling(min_runs=runs, max_runs=runs)


class FakeBackend(KernelBackend):
    """Buffers are numpy byte arrays; a cubin's text says how its kernel behaves.

    "ok" computes the right answer, "wrong" a slightly wrong one, "fault" poisons the context
    (reported at the next wait, as CUDA reports an illegal address), "hang" never finishes,
    "refuse" is refused at launch (as a kernel's `__launch_bounds__` can be). More than 1024
    threads per block is refused at launch, as the driver does. It counts what
    the runner asks of it: allocations, uploads, fills (by size), batches of timed launches.
    """

    name = "fake"

    def __init__(self, times=(1.0,), l2=4096):
        self.times = itertools.cycle(times)
        self.l2 = l2
        self.launches = self.timed = self.recoveries = self.allocations = 0
        self.loaded: set[int] = set()
        self.buffers: set[int] = set()
        self.uploads: list[np.ndarray] = []
        self.poisoned = self.hung = False
        self.fills: list[int] = []
        self.batches: list[int] = []
        self.copies = 0
        self.globals: dict[str, int] = {}  # the cubin's __constant__ variables: their bytes
        self.constant_memory: dict[str, np.ndarray] = {}  # of the module loaded last
        self.events: list[str] = []  # "global NAME" when one is found, "launch" at each launch

    def device_name(self) -> str:
        return "Fake GPU"

    def compute_capability(self) -> tuple[int, int]:
        return (9, 0)

    def l2_cache_bytes(self) -> int:
        return self.l2

    def fill(self, buffer, nbytes: int) -> None:
        buffer[:nbytes] = 0
        self.fills.append(nbytes)

    def copy(self, target, source, nbytes: int) -> None:
        target[:nbytes] = source[:nbytes]
        self.copies += 1

    def load(self, image: bytes, symbol: str) -> object:
        if self.poisoned:
            raise BackendError("cuModuleLoadData failed: CUDA_ERROR_ILLEGAL_ADDRESS")
        if symbol not in KERNELS:
            raise BackendError(f"cuModuleGetFunction({symbol}) failed: CUDA_ERROR_NOT_FOUND")
        kernel = (KERNELS[symbol], image.decode().strip())
        self.loaded.add(id(kernel))
        return kernel

    def unload(self, kernel: object) -> None:
        self.loaded.discard(id(kernel))

    def find_global(self, kernel: object, symbol: str) -> tuple[object, int]:
        assert id(kernel) in self.loaded
        if symbol not in self.globals:
            raise BackendError(f"cuModuleGetGlobal({symbol}) failed: CUDA_ERROR_NOT_FOUND")
        memory = np.zeros(self.globals[symbol], np.uint8)  # each load: the cubin's zeros
        self.buffers.add(id(memory))
        self.constant_memory[symbol] = memory
        self.events.append(f"global {symbol}")
        return memory, memory.nbytes

    def allocate(self, nbytes: int) -> object:
        assert nbytes > 0
        if self.poisoned:
            raise BackendError("cuMemAlloc failed: CUDA_ERROR_ILLEGAL_ADDRESS")
        buffer = np.zeros(nbytes, np.uint8)
        self.buffers.add(id(buffer))
        self.allocations += 1
        return buffer

    def free(self, buffer: object) -> None:
        self.buffers.remove(id(buffer))

    def upload(self, buffer, array: np.ndarray) -> None:
        assert id(buffer) in self.buffers, "a buffer from before a context reset"
        buffer[: array.nbytes] = array.view(np.uint8)
        self.uploads.append(array.copy())

    def download(self, buffer, array: np.ndarray) -> None:
        array.view(np.uint8)[:] = buffer[: array.nbytes]

    def prepare(self, kernel, grid, block, shared, args) -> object:
        return (kernel, block, list(args))

    def launch(self, prepared) -> None:
        (function, behaviour), block, args = prepared
        if self.poisoned:
            raise BackendError("cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS")
        if math.prod(block) > 1024 or behaviour == "refuse":
            raise BackendError("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument")
        assert all(id(a) in self.buffers for a in args if isinstance(a, np.ndarray))
        self.launches += 1
        self.events.append("launch")
        if behaviour == "fault":
            self.poisoned = True
        elif behaviour == "hang":
            self.hung = True
        else:
            function(behaviour, args)

    def timed_launches(self, prepared, count, flush, *, timeout: float) -> list[float]:
        assert count >= 1
        for _ in range(count):
            if flush is not None:
                self.fill(*flush)
            self.launch(prepared)
        self.synchronize(timeout)
        self.timed += count
        self.batches.append(count)
        return [next(self.times) for _ in range(count)]

    def synchronize(self, timeout: float) -> None:
        if self.poisoned:
            raise BackendError("the device failed: CUDA_ERROR_ILLEGAL_ADDRESS")
        if self.hung:
            raise KernelTimeout(f"the device did not finish within {timeout:g} s")

    def recover(self) -> None:
        self.recoveries += 1
        if self.poisoned or self.hung:
            self.poisoned = self.hung = False
            self.loaded.clear()
            self.buffers.clear()
            self.generation += 1

    def close(self) -> None:
        pass


def build(tmp_path: Path, params: dict, behaviour: str = "ok") -> BuildResult:
    cubin = tmp_path / f"{behaviour}-{'-'.join(map(str, params.values()))}.cubin"
    cubin.write_text(behaviour)
    return BuildResult(dict(params), cubin, seconds=0.5)


# --- the runner ----------------------------------------------------------------------------------


def test_default_gives_the_reference_and_others_are_checked_against_it(specs, tmp_path):
    backend = FakeBackend(times=(5.0, 1.0, 3.0, 2.0, 4.0))
    runner = KernelRunner(specs["jacobi_step"], backend, warmup=2, sampling=fixed(5))
    default = runner.measure(build(tmp_path, DEFAULT))
    reference = runner.outputs
    assert default.status == "ok" and default.time == 3.0
    assert default.times == (5.0, 1.0, 3.0, 2.0, 4.0)
    assert backend.launches == 1 + 2 + 5 and backend.timed == 5  # check, warm-up, timed
    assert isinstance(reference, KernelReference) and list(reference.outputs) == ["out"]
    inputs = backend.uploads[0]
    np.testing.assert_array_equal(reference.outputs["out"], jacobi_host(inputs, 300, 200))
    assert default.compile_info["launch"] == {
        "grid": [10, 50, 1],
        "block": [32, 4, 1],
        "shared": 512,
    }
    assert default.compile_info["backend"] == "fake"

    other = {"BLOCK_X": 64, "BLOCK_Y": 8}
    runner.reference = reference
    measured = runner.measure(build(tmp_path, other))
    mine = runner.outputs
    assert measured.status == "ok" and measured.params == other
    assert mine is not None and mine.params == other
    assert len(backend.uploads) == 1  # the same inputs every time, uploaded once
    assert not backend.loaded  # each configuration's module is unloaded
    assert len(backend.buffers) == 2  # the `in` and `out` arrays stay for the next one
    runner.release()
    assert not backend.buffers


def test_timed_until_the_median_is_stable(specs, tmp_path):
    steady = FakeBackend(times=(2.0, 2.01))
    measured = KernelRunner(specs["jacobi_step"], steady).measure(build(tmp_path, DEFAULT))
    assert len(measured.times) == 6 and measured.interval == (2.0, 2.01)
    noisy = FakeBackend(times=(1.0, 2.0))
    rule = Sampling(min_runs=3, max_runs=40)
    runner = KernelRunner(specs["jacobi_step"], noisy, sampling=rule)
    assert len(runner.measure(build(tmp_path, DEFAULT)).times) == 40
    assert len(runner.measure(build(tmp_path, DEFAULT), stop_above=0.5).times) == 3


@pytest.mark.parametrize(("l2", "flush_l2", "flushed"), [
    (1 << 22, None, True),  # the arrays fit in L2: flushed by default
    (4096, None, False),  # they do not: nothing to flush
    (1 << 22, False, False),
    (4096, True, True),
])  # fmt: skip
def test_l2_is_flushed_before_each_timed_launch_when_the_data_fit(
    specs, tmp_path, l2, flush_l2, flushed
):
    backend = FakeBackend(l2=l2)
    runner = KernelRunner(specs["jacobi_step"], backend, sampling=fixed(4), flush_l2=flush_l2)
    measured = runner.measure(build(tmp_path, DEFAULT))
    assert measured.compile_info["l2_flush"] is flushed
    assert backend.fills.count(2 * l2) == (4 if flushed else 0)
    assert len(backend.buffers) == 2 + flushed  # the flush buffer is kept too, once
    runner.measure(build(tmp_path, {"BLOCK_X": 16, "BLOCK_Y": 8}))
    assert backend.allocations == 2 + flushed
    runner.release()
    assert not backend.buffers


def test_gpu_conditions_are_recorded_when_a_monitor_is_given(specs, tmp_path):
    class Monitor:
        def sample(self):
            return {"sm_clock_mhz": 1410, "temperature_c": 84, "power_w": 700.0,
                    "throttled": ["thermal slowdown"]}  # fmt: skip

    runner = KernelRunner(specs["jacobi_step"], FakeBackend(), monitor=Monitor())
    measured = runner.measure(build(tmp_path, DEFAULT))
    assert measured.compile_info["gpu"]["throttled"] == ["thermal slowdown"]


def test_a_different_answer_is_wrong_output_with_the_largest_error(specs, tmp_path):
    runner = KernelRunner(specs["jacobi_step"], FakeBackend())
    runner.measure(build(tmp_path, DEFAULT))
    runner.reference = runner.outputs
    measured = runner.measure(build(tmp_path, DEFAULT, "wrong"))
    mine = runner.outputs
    assert measured.status == "wrong_output" and mine is None and measured.time is None
    assert "output 'out' differs from the default configuration's at 1 of 60000 elements" in (
        measured.error
    )
    assert "max error 0.001 at index 7" in measured.error
    # Without a reference (the default failed, say), nothing is checked.
    runner.reference = None
    assert runner.measure(build(tmp_path, DEFAULT, "wrong")).status == "ok"


def test_tolerances_decide_what_is_wrong(specs, tmp_path):
    loose = KernelRunner(specs["jacobi_step"], FakeBackend(), atol=1e-2)
    loose.measure(build(tmp_path, DEFAULT))
    loose.reference = loose.outputs
    assert loose.measure(build(tmp_path, DEFAULT, "wrong")).status == "ok"


def test_a_launch_the_device_refuses_is_a_runtime_error(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend)
    measured = runner.measure(build(tmp_path, DEFAULT, "refuse"))
    mine = runner.outputs
    assert measured.status == "runtime_error" and mine is None
    assert "CUDA_ERROR_INVALID_VALUE" in measured.error
    assert backend.recoveries == 1 and not backend.loaded
    assert runner.measure(build(tmp_path, DEFAULT)).status == "ok"
    assert backend.allocations == 2 and len(backend.uploads) == 1  # no reset: all kept


def test_a_launch_no_gpu_can_run_is_refused_before_its_module_is_loaded(specs, tmp_path):
    """A block of 2,048 threads: invalid for good, with the reason, and the device untouched."""
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend)
    measured = runner.measure(build(tmp_path, {"BLOCK_X": 128, "BLOCK_Y": 16}))
    assert measured.status == "runtime_error" and not measured.transient
    reason = "a block of 128 x 16 = 2048 threads: at most 1024 a block"
    assert measured.error == f"cannot launch: {reason}"
    assert backend.events == [] and backend.recoveries == 0 and backend.allocations == 0


@pytest.mark.parametrize(
    ("registers", "block", "ok"),
    [(191, (64, 4), True), (191, (64, 8), False), (191, (32, 32), False), (128, (64, 8), True)],
)
def test_a_block_needing_more_registers_than_a_multiprocessor_has_is_refused(
    specs, tmp_path, registers, block, ok
):
    """By the compiler's report: 191 registers x 512 threads need 98304 of the 65536."""
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend)
    params = {"BLOCK_X": block[0], "BLOCK_Y": block[1]}
    used = {"_Z11jacobi_stepPKfPfii": KernelResources(registers=registers)}
    built = replace(build(tmp_path, params), resources=used)
    measured = runner.measure(built)
    if ok:
        assert measured.status == "ok"
        return
    assert measured.status == "runtime_error" and backend.events == []
    threads = block[0] * block[1]
    assert f"a block of {threads} threads of 191 registers needs" in measured.error
    assert "a multiprocessor has 65536" in measured.error
    assert "blocks of at most 256 threads of this kernel" in measured.error


def test_a_fault_resets_the_device_and_tuning_goes_on(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend)
    measured = runner.measure(build(tmp_path, DEFAULT, "fault"))
    assert measured.status == "runtime_error" and "ILLEGAL_ADDRESS" in measured.error
    assert not backend.poisoned
    assert runner.measure(build(tmp_path, DEFAULT)).status == "ok"


def test_a_hanging_kernel_is_a_timeout(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend, timeout=0.5)
    measured = runner.measure(build(tmp_path, DEFAULT, "hang"))
    assert measured.status == "timeout" and "0.5 s" in measured.error
    assert runner.measure(build(tmp_path, DEFAULT)).status == "ok"


def test_compile_errors_and_uncomputable_launches(specs, tmp_path):
    runner = KernelRunner(specs["jacobi_step"], FakeBackend())
    failed = BuildResult(DEFAULT, None, error="compile failed: error: expected ';'")
    measured = runner.measure(failed)
    assert measured.status == "compile_error" and "expected ';'" in measured.error
    measured = runner.measure(build(tmp_path, {"BLOCK_X": 0, "BLOCK_Y": 4}))
    assert measured.status == "runtime_error" and "undefined" in measured.error
    missing = BuildResult(DEFAULT, tmp_path / "gone.cubin")
    assert runner.measure(missing).status == "runtime_error"


def test_a_symbol_missing_from_the_cubin_is_a_runtime_error(specs, tmp_path):
    runner = KernelRunner(specs["typed"], FakeBackend())
    measured = runner.measure(build(tmp_path, DEFAULT))
    assert measured.status == "runtime_error" and "typed" in measured.error


def test_inout_arrays_and_scalars_of_the_signatures_types(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["axpy"], backend, warmup=0, sampling=fixed(1))
    measured = runner.measure(build(tmp_path, DEFAULT))
    reference = runner.outputs
    assert measured.status == "ok"
    x, y = backend.uploads[0], backend.uploads[1]
    assert x.dtype == y.dtype == np.float64 and x.size == 10000
    np.testing.assert_allclose(reference.outputs["y"], y + np.float32(0.5) * x)
    assert list(reference.outputs) == ["y"] and not reference.outputs["y"].flags.writeable


def test_inputs_depend_on_the_seed_only(specs, tmp_path):
    def first_input(seed: int) -> np.ndarray:
        backend = FakeBackend()
        KernelRunner(specs["jacobi_step"], backend, seed=seed).measure(build(tmp_path, DEFAULT))
        return backend.uploads[0]

    a, b, c = first_input(1), first_input(1), first_input(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and a.min() >= 0 and a.max() < 1


def test_integer_inputs_are_small_and_out_arrays_start_at_zero(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "#pragma annotune kernel k grid(1) block(B) args(in(1000), out(10), inout(10))\n"
        "__global__ void k(const int *i, unsigned char *o, long long *io) {}\n"
    )
    (spec,) = kernel_specs(parse_source(source), ("B",))
    backend = FakeBackend()
    runner = KernelRunner(spec, backend)
    measured = runner.measure(build(tmp_path, {"B": 1}))
    reference = runner.outputs
    assert measured.status == "ok"
    inputs, both = backend.uploads  # `out` arrays are zeroed on the device, not uploaded
    assert inputs.dtype == np.int32 and inputs.min() >= 0 and inputs.max() < 100
    assert both.dtype == np.int64 and both.any()
    zeros = reference.outputs["o"]  # the kernel does nothing
    assert zeros.dtype == np.uint8 and zeros.size == 10 and not zeros.any()
    assert list(reference.outputs) == ["o", "io"]


KERNELS_CU = """
#pragma annotune kernel bump grid(1) block(B) args(out(10))
__global__ void bump(unsigned char *o) {}
#pragma annotune kernel scribble grid(1) block(B) args(in(S), out(S))
__global__ void scribble(int *i, unsigned char *o) {}
#pragma annotune kernel axpy grid(1) block(B) args(S, 0.5, in(S), inout(S))
__global__ void axpy(size_t n, float a, const double *x, double *y) {}
"""


@pytest.fixture
def sized(tmp_path) -> dict[str, KernelSpec]:
    """Kernels whose array lengths are the tunable S."""
    source = tmp_path / "sized.cu"
    source.write_text(KERNELS_CU)
    return {spec.name: spec for spec in kernel_specs(parse_source(source), ("B", "S"))}


def test_buffers_are_allocated_and_inputs_uploaded_once_per_size(sized, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(sized["axpy"], backend, warmup=0, sampling=fixed(2), flush_l2=False)
    for block in (32, 64, 128):
        assert runner.measure(build(tmp_path, {"B": block, "S": 100})).status == "ok"
    assert backend.allocations == 3  # x, y and y's pristine copy
    assert [u.size for u in backend.uploads] == [100, 100]  # x and y, once
    # Another length gets buffers of its size; the old ones are freed, not kept beside them.
    measured = runner.measure(build(tmp_path, {"B": 32, "S": 300}))
    out = runner.outputs
    assert measured.status == "ok" and out.outputs["y"].size == 300
    assert backend.allocations == 6 and len(backend.buffers) == 3
    assert [u.size for u in backend.uploads] == [100, 100, 300, 300]
    runner.release()
    assert not backend.buffers


def test_inout_arrays_start_from_their_input_every_configuration(sized, tmp_path):
    """axpy adds to y at every launch (check, warm-up, 3 timed): each configuration's checked
    launch must still see the original y."""
    backend = FakeBackend()
    runner = KernelRunner(sized["axpy"], backend, warmup=1, sampling=fixed(3))
    launch = sized["axpy"].launch({"B": 32, "S": 50})
    x, y = runner.input_array(2, launch.args[2]), runner.input_array(3, launch.args[3])
    expected = y + np.float32(0.5) * x
    runner.measure(build(tmp_path, {"B": 32, "S": 50}))
    runner.reference = runner.outputs
    for block in (64, 128, 256):
        measured = runner.measure(build(tmp_path, {"B": block, "S": 50}))
        out = runner.outputs
        assert measured.status == "ok", measured.error
        np.testing.assert_array_equal(out.outputs["y"], expected)
    assert backend.copies == 4 and len(backend.uploads) == 2


def test_out_arrays_are_zeroed_before_every_checked_launch(sized, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(sized["bump"], backend, warmup=2, sampling=fixed(3), flush_l2=False)
    runner.measure(build(tmp_path, {"B": 1, "S": 1}))
    runner.reference = runner.outputs
    for block in (2, 4):
        measured = runner.measure(build(tmp_path, {"B": block, "S": 1}))
        out = runner.outputs
        assert measured.status == "ok", measured.error  # not 1 + 2 + 3 from the last one
        np.testing.assert_array_equal(out.outputs["o"], np.ones(10, np.uint8))
    assert backend.fills == [10, 10, 10] and not backend.uploads


def test_a_kernel_that_writes_an_in_array_is_an_error_at_that_argument(sized, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(sized["scribble"], backend)
    with pytest.raises(AnnotuneError) as caught:
        runner.measure(build(tmp_path, {"B": 1, "S": 8}))
    assert caught.value.location == sized["scribble"].args[0].location
    assert "writes 'i'" in caught.value.message and "declare it inout(...)" in caught.value.message
    assert not backend.buffers and not backend.loaded


def test_inputs_are_checked_for_writes_once(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend, warmup=0, sampling=fixed(1))
    original = backend.download
    downloads = []
    backend.download = lambda buffer, array: (downloads.append(array.size), original(buffer, array))
    runner.measure(build(tmp_path, DEFAULT))
    runner.reference = runner.outputs
    runner.measure(build(tmp_path, {"BLOCK_X": 16, "BLOCK_Y": 8}))
    assert downloads == [60000, 60000, 60000]  # out, in (the first time only), out


def test_inputs_an_earlier_configuration_overwrote_are_uploaded_again(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend, warmup=0, sampling=fixed(2))
    runner.measure(build(tmp_path, DEFAULT))
    runner.reference = runner.outputs
    clobbered = runner.measure(build(tmp_path, {"BLOCK_X": 16, "BLOCK_Y": 8}, "clobber"))
    assert clobbered.status == "ok"  # its own output was right
    measured = runner.measure(build(tmp_path, {"BLOCK_X": 64, "BLOCK_Y": 2}))
    assert measured.status == "ok", measured.error  # judged again on fresh inputs
    assert len(backend.uploads) == 2
    wrong = runner.measure(build(tmp_path, DEFAULT, "wrong"))
    assert wrong.status == "wrong_output" and len(backend.uploads) == 2  # inputs intact: kept


def test_after_a_fault_the_kept_buffers_are_dropped_and_uploaded_again(specs, tmp_path):
    backend = FakeBackend()
    runner = KernelRunner(specs["jacobi_step"], backend, sampling=fixed(2))
    runner.measure(build(tmp_path, DEFAULT))
    reference = runner.reference = runner.outputs
    assert runner.measure(build(tmp_path, DEFAULT, "fault")).status == "runtime_error"
    assert not backend.buffers  # the reset took them
    measured = runner.measure(build(tmp_path, {"BLOCK_X": 16, "BLOCK_Y": 8}))
    out = runner.outputs
    assert measured.status == "ok", measured.error  # the fake refuses any stale buffer
    np.testing.assert_array_equal(out.outputs["out"], reference.outputs["out"])
    assert len(backend.uploads) == 2 and len(backend.buffers) == 2


def one_at_a_time(rule: Sampling, sequence: list[float], stop_above=None) -> int:
    """How many times the rule keeps when asked after every launch (no time cap reached)."""
    for n in range(1, len(sequence) + 1):
        if rule.enough(sequence[:n], 0.0, stop_above):
            return n
    raise AssertionError("the sequence is too short")


@pytest.mark.parametrize(
    "sequence",
    [
        [2.0, 2.01],
        [1.0, 2.0],
        [1.0, 1.1, 1.05, 0.98, 1.2, 1.01, 1.0, 0.97],
        list(np.random.default_rng(2).lognormal(0.0, 0.02, 60)),  # stable before the batch ends
        list(np.random.default_rng(4).lognormal(0.0, 0.05, 60)),
    ],
    ids=["steady", "noisy", "slowly-stable", "surplus", "lognormal"],
)
@pytest.mark.parametrize("rule", [Sampling(), Sampling(min_runs=3, max_runs=40)], ids=str)
def test_batched_timing_keeps_what_the_rule_keeps_one_at_a_time(specs, tmp_path, sequence, rule):
    backend = FakeBackend(times=sequence)
    runner = KernelRunner(specs["jacobi_step"], backend, sampling=rule)
    measured = runner.measure(build(tmp_path, DEFAULT))
    repeated = (sequence * rule.max_runs)[: rule.max_runs]
    kept = one_at_a_time(rule, repeated)
    assert measured.times == tuple(repeated[:kept])
    assert backend.batches[0] == rule.min_runs
    assert kept <= backend.timed <= rule.max_runs  # some surplus perhaps, never past the cap
    assert all(size <= max(rule.min_runs, sum(backend.batches[:i])) for i, size in
               enumerate(backend.batches))  # fmt: skip


def test_a_clearly_slow_configuration_gets_one_batch(specs, tmp_path):
    backend = FakeBackend(times=(1.0, 2.0))
    runner = KernelRunner(specs["jacobi_step"], backend, sampling=Sampling(min_runs=4))
    measured = runner.measure(build(tmp_path, DEFAULT), stop_above=0.5)
    assert len(measured.times) == 4 and backend.batches == [4]


class SlowBatches(FakeBackend):
    """Each batch of timed launches takes 20 ms of wall time; each launch 1 ms on the 'GPU'."""

    def timed_launches(self, prepared, count, flush, *, timeout):
        time.sleep(0.02)
        return super().timed_launches(prepared, count, flush, timeout=timeout)


def test_each_measurement_says_where_its_time_went(specs, tmp_path):
    backend = SlowBatches(times=(1.0,))
    runner = KernelRunner(specs["jacobi_step"], backend, sampling=fixed(5))
    measured = runner.measure(build(tmp_path, DEFAULT))
    seconds = measured.compile_info["run_seconds"]
    assert set(seconds) == {"wall", "setup", "gpu"}
    assert seconds["gpu"] == pytest.approx(5 * 1e-3)  # five launches' event times
    assert seconds["wall"] >= 0.02 + seconds["setup"]  # the timed batch is not setup
    assert seconds["setup"] > 0 and seconds["gpu"] <= seconds["wall"]
    for failed in (
        BuildResult(DEFAULT, None, error="compile failed"),
        build(tmp_path, {"BLOCK_X": 128, "BLOCK_Y": 16}),
        build(tmp_path, DEFAULT, "fault"),
    ):
        measured = runner.measure(failed)
        seconds = measured.compile_info["run_seconds"]
        assert measured.status != "ok" and seconds["gpu"] == 0
        assert 0 <= seconds["setup"] == seconds["wall"]


def test_compare_outputs():
    reference = KernelReference({}, {"o": np.array([1.0, np.nan, np.inf]), "i": np.array([1, 2])})
    same = {"o": np.array([1.0 + 1e-9, np.nan, np.inf]), "i": np.array([1, 2])}
    assert compare_outputs(same, reference, rtol=1e-5, atol=1e-8) == ""
    nan = {"o": np.array([np.nan, np.nan, np.inf]), "i": np.array([1, 2])}
    assert "max error inf at index 0" in compare_outputs(nan, reference, rtol=1e-5, atol=1e-8)
    ints = {"o": same["o"], "i": np.array([1, 3])}
    assert "output 'i'" in compare_outputs(ints, reference, rtol=1, atol=1)
    short = {"o": same["o"], "i": np.array([1])}
    assert "has 1 elements" in compare_outputs(short, reference, rtol=1e-5, atol=1e-8)


def test_vectors_are_compared_lane_by_lane_and_structs_number_by_number_not_padding():
    lanes = np.arange(8, dtype=np.float32).reshape(4, 2)
    reference = KernelReference({}, {"v": lanes})
    moved = lanes.copy()
    moved[2, 1] = 9
    said = compare_outputs({"v": moved}, reference, rtol=1e-5, atol=1e-8)
    assert "at 1 of 8 elements" in said and "index 5 (9.0, expected 5.0)" in said
    particles = np.zeros(3, "(2,)<f4,V4,<i4")
    particles["f0"] = [[1, 2], [3, 4], [5, 6]]
    reference = KernelReference({}, {"p": particles})
    padded = particles.copy()
    padded["f1"] = b"junk"  # what the device leaves in padding is nobody's output
    assert compare_outputs({"p": padded}, reference, rtol=1e-5, atol=1e-8) == ""
    wrong = particles.copy()
    wrong["f2"][1] = 7
    said = compare_outputs({"p": wrong}, reference, rtol=1e-5, atol=1e-8)
    assert said.startswith("output 'p.f2' differs") and "index 1 (7, expected 0)" in said


LOOKUP = """\
#define N 8
#pragma annotune kernel lookup grid(1) block(B) args(out(N)) constants(table = range(0, N))
__constant__ float table[N];
__constant__ int offsets[4];
__constant__ float ready[2] = {1, 2};
__global__ void lookup(float *out) { out[threadIdx.x] = table[offsets[threadIdx.x % 4]]; }
"""


def lookup_spec(tmp_path: Path) -> KernelSpec:
    (tmp_path / "lookup.cu").write_text(LOOKUP)
    (spec,) = kernel_specs(parse_source(tmp_path / "lookup.cu"), ("B",))
    return spec


def test_constants_are_filled_in_each_loaded_module_before_its_first_launch(tmp_path):
    spec = lookup_spec(tmp_path)
    backend = FakeBackend()
    backend.globals = {"table": 4 * 12, "offsets": 4 * 4}  # this cubin's table: 12 floats
    runner = KernelRunner(spec, backend, warmup=0, sampling=fixed(2))
    constants = spec.launch({"B": 32}).constants
    assert [c.name for c in constants] == ["offsets", "table"]  # `ready` is initialised
    for _ in range(2):  # each configuration's module starts from the cubin's zeros
        backend.events.clear()
        assert runner.measure(build(tmp_path, {"B": 32})).status == "ok"
        assert backend.events[:3] == ["global offsets", "global table", "launch"]
        table = backend.constant_memory["table"].view(np.float32)
        assert table.size == 12 and set(table.tolist()) <= set(range(8))  # range(0, N)
        np.testing.assert_array_equal(table, runner.constant_array(1, constants[1], 12))
        offsets = backend.constant_memory["offsets"].view(np.int32)
        assert offsets.min() >= 0 and offsets.max() < INTEGER_INPUT_LIMIT  # the default rule
    assert runner.to_json()["constants"] == {
        "offsets": "default",
        "table": {"rule": "range", "bounds": ["0", "N"]},
    }
    backend.globals = {"offsets": 16}  # a cubin without it: that configuration cannot run
    missing = runner.measure(build(tmp_path, {"B": 64}))
    assert missing.status == "runtime_error" and "cuModuleGetGlobal(table)" in missing.error


def test_settings(specs):
    runner = KernelRunner(specs["jacobi_step"], FakeBackend(), sampling=fixed(7), seed=3)
    assert runner.to_json() == {
        "mode": "kernel",
        "kernel": "jacobi_step",
        "warmup": 1,
        "sampling": {"min_runs": 7, "max_runs": 7, "max_seconds": 30.0, "within": 0.02},
        "seed": 3,
        "rtol": 1e-5,
        "atol": 1e-8,
        "flush_l2": None,
    }
    with pytest.raises(ValueError):
        KernelRunner(specs["jacobi_step"], FakeBackend(), warmup=-1)
    argv = cubin_compiler((9, 0)).render(Path("k.cu"), Path("k.cubin"), ["-DB=1"], ["inc"])
    assert argv == [
        "nvcc", "-cubin", "-arch=sm_90", "-O3", "-Xptxas", "-v", "-Iinc", "-DB=1", "k.cu", "-o",
        "k.cubin",
    ]  # fmt: skip


# --- the real backends' plumbing, on the CPU ----------------------------------------------------
#
# Stand-ins for `cuda.bindings.driver` and `pycuda.driver` keep "device" memory in host buffers
# and run the fixture's kernels in numpy, reading each parameter where CUDA would: through
# cuLaunchKernel's array of pointers, or at its offset in pycuda's packed argument buffer. So
# the backends' argument packing, copies, events and error handling run for real.

SIGNATURES = {  # per kernel: each parameter's ctypes type (pointers as c_uint64)
    "_Z11jacobi_stepPKfPfii": (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32),
    "_Z4axpymfPKdPd": (ctypes.c_uint64, ctypes.c_float, ctypes.c_uint64, ctypes.c_uint64),
}
OFFSETS = {"_Z11jacobi_stepPKfPfii": (0, 8, 16, 20), "_Z4axpymfPKdPd": (0, 8, 16, 24)}


def device_array(address: int, ctype, count: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctype * count).from_address(address))


def run_on_host(symbol: str, values: list) -> None:
    """The fixture's kernels on host memory, given the parameter values read as CUDA would."""
    if symbol == "_Z11jacobi_stepPKfPfii":
        source, target, nx, ny = values
        cells = nx * ny
        out = device_array(target, ctypes.c_float, cells)
        out[:] = jacobi_host(device_array(source, ctypes.c_float, cells), nx, ny)
    else:
        n, a, x, y = values
        y_array = device_array(y, ctypes.c_double, n)
        y_array += np.float32(a) * device_array(x, ctypes.c_double, n)


class Memory:
    """Host buffers standing in for device memory, addressed by their real addresses."""

    def __init__(self) -> None:
        self.buffers: dict[int, ctypes.Array] = {}

    def allocate(self, nbytes: int) -> int:
        buffer = ctypes.create_string_buffer(nbytes)
        self.buffers[ctypes.addressof(buffer)] = buffer
        return ctypes.addressof(buffer)


class FakeCudaDriver:
    """Enough of `cuda.bindings.driver`: calls return (CUresult, values...) tuples."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1
        CUDA_ERROR_NOT_FOUND = 500
        CUDA_ERROR_NOT_READY = 600
        CUDA_ERROR_ILLEGAL_ADDRESS = 700

    class CUevent_flags(enum.IntEnum):
        CU_EVENT_DEFAULT = 0

    class CUdevice_attribute(enum.IntEnum):
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

    class CUfunction_attribute(enum.IntEnum):
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self) -> None:
        self.memory = Memory()
        self.clock = 0.0
        self.poisoned = False
        self.resets = 0
        self.shared_opt_in: list[int] = []

    def _status(self, *values):
        return (self.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS if self.poisoned else 0, *values)

    def cuInit(self, flags):
        return (self.CUresult.CUDA_SUCCESS,)

    def cuDeviceGetCount(self):
        return (0, 1)

    def cuDeviceGet(self, ordinal):
        return (0, ordinal)

    def cuDevicePrimaryCtxRetain(self, device):
        return (0, "context")

    def cuDevicePrimaryCtxRelease(self, device):
        return (0,)

    def cuDevicePrimaryCtxReset(self, device):
        self.poisoned, self.resets = False, self.resets + 1
        return (0,)

    def cuCtxSetCurrent(self, context):
        return (0,)

    def cuGetErrorName(self, error):
        return (0, self.CUresult(error).name.encode())

    def cuGetErrorString(self, error):
        texts = {1: b"invalid argument", 500: b"named symbol not found", 700: b"illegal address"}
        return (0, texts[error])

    def cuDeviceGetName(self, length, device):
        return (0, b"Fake GPU\0\0\0")

    def cuDeviceGetAttribute(self, attribute, device):
        values = {
            self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
            self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: 1 << 16,
        }
        return (0, values.get(attribute, 0))

    def cuMemsetD8(self, address, value, nbytes):
        ctypes.memset(address, value, nbytes)
        return self._status()

    def cuModuleLoadData(self, address):
        return self._status(ctypes.string_at(address).decode())

    def cuModuleGetFunction(self, module, name):
        if name.decode() not in SIGNATURES:
            return (self.CUresult.CUDA_ERROR_NOT_FOUND, None)
        return (0, (module, name.decode()))

    def cuModuleUnload(self, module):
        return self._status()

    def cuModuleGetGlobal(self, module, name):
        if name != b"coef":  # the one __constant__ variable of these "cubins": float coef[16]
            return (self.CUresult.CUDA_ERROR_NOT_FOUND, None, None)
        return (0, self.memory.allocate(64), 64)

    def cuMemAlloc(self, nbytes):
        return self._status(self.memory.allocate(nbytes))

    def cuMemFree(self, address):
        del self.memory.buffers[address]
        return self._status()

    def cuMemcpyHtoD(self, device, host, nbytes):
        ctypes.memmove(device, host, nbytes)
        return self._status()

    def cuMemcpyDtoH(self, host, device, nbytes):
        ctypes.memmove(host, device, nbytes)
        return self._status()

    def cuMemcpyDtoDAsync(self, target, source, nbytes, stream):
        ctypes.memmove(target, source, nbytes)
        return self._status()

    def cuFuncSetAttribute(self, function, attribute, value):
        self.shared_opt_in.append(value)
        return (0,)

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        behaviour, symbol = function
        if bx * by * bz > 1024 or behaviour == "refuse":
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE,)
        pointers = (ctypes.c_uint64 * len(SIGNATURES[symbol])).from_address(params)
        values = [
            ct.from_address(p).value for ct, p in zip(SIGNATURES[symbol], pointers, strict=True)
        ]
        if behaviour == "fault":
            self.poisoned = True
        else:
            run_on_host(symbol, values)
        return self._status()

    def cuEventCreate(self, flags):
        return (0, [0.0])

    def cuEventDestroy(self, event):
        return (0,)

    def cuEventRecord(self, event, stream):
        self.clock += 0.25
        event[0] = self.clock
        return self._status()

    def cuEventQuery(self, event):
        return self._status()

    def cuEventElapsedTime(self, start, stop):
        return (0, stop[0] - start[0])

    def cuCtxSynchronize(self):
        return self._status()


class FakePycuda(types.SimpleNamespace):
    """Enough of `pycuda.driver`: prepared calls pack their arguments with `struct`."""

    class Error(Exception):
        pass

    def __init__(self) -> None:
        memory = Memory()
        error = self.Error
        poisoned = []

        class Allocation(int):
            def free(self) -> None:
                del memory.buffers[int(self)]

        class Function:
            def __init__(self, behaviour: str, symbol: str) -> None:
                self.behaviour, self.symbol, self.format = behaviour, symbol, ""

            def prepare(self, format: str) -> None:
                self.format = format

            def set_attribute(self, attribute, value) -> None:
                pass

            def prepared_call(self, grid, block, *args, shared_size=0) -> None:
                if math.prod(block) > 1024 or self.behaviour == "refuse":
                    raise error("cuLaunchKernel failed: invalid argument")
                packed = struct.pack(self.format, *args)
                values = [
                    ct.from_buffer_copy(packed, offset).value
                    for ct, offset in zip(
                        SIGNATURES[self.symbol], OFFSETS[self.symbol], strict=True
                    )
                ]
                if self.behaviour == "fault":
                    poisoned.append(True)
                else:
                    run_on_host(self.symbol, values)

        class Module:
            def __init__(self, image: bytes) -> None:
                self.behaviour = image.decode()

            def get_function(self, symbol: str) -> Function:
                if symbol not in SIGNATURES:
                    raise error("cuModuleGetFunction failed: named symbol not found")
                return Function(self.behaviour, symbol)

            def get_global(self, name: str) -> tuple[int, int]:
                if name != "coef":  # as the cuda-python stand-in: float coef[16]
                    raise error("cuModuleGetGlobal failed: named symbol not found")
                return memory.allocate(64), 64

        class Event:
            clock = [0.0]

            def record(self) -> None:
                self.clock[0] += 0.5
                self.time = self.clock[0]

            def query(self) -> bool:
                if poisoned:
                    raise error("cuEventQuery failed: an illegal memory access was encountered")
                return True

            def time_till(self, other) -> float:
                return other.time - self.time

        class Context:
            def pop(self) -> None:
                poisoned.clear()

            def detach(self) -> None:
                pass

            @staticmethod
            def synchronize() -> None:
                pass

        class Device:
            def __init__(self, ordinal: int) -> None:
                pass

            @staticmethod
            def count() -> int:
                return 1

            def name(self) -> str:
                return "Fake GPU"

            def compute_capability(self) -> tuple[int, int]:
                return (8, 6)

            def get_attribute(self, attribute) -> int:
                return {"L2_CACHE_SIZE": 1 << 16}[attribute]

            def make_context(self) -> Context:
                return Context()

        super().__init__(
            init=lambda: None,
            Device=Device,
            Context=Context,
            Event=Event,
            module_from_buffer=Module,
            mem_alloc=lambda nbytes: Allocation(memory.allocate(nbytes)),
            memcpy_htod=lambda buffer, array: ctypes.memmove(
                int(buffer), array.ctypes.data, array.nbytes
            ),
            memcpy_dtoh=lambda array, buffer: ctypes.memmove(
                array.ctypes.data, int(buffer), array.nbytes
            ),
            memcpy_dtod_async=lambda target, source, nbytes: ctypes.memmove(
                int(target), int(source), nbytes
            ),
            memset_d8=lambda buffer, value, nbytes: ctypes.memset(int(buffer), value, nbytes),
            function_attribute=types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=8),
            device_attribute=types.SimpleNamespace(L2_CACHE_SIZE="L2_CACHE_SIZE"),
            memory=memory,
        )


def fake_backends() -> list[KernelBackend]:
    return [
        CudaPythonBackend(driver=FakeCudaDriver()),
        PycudaBackend(driver=FakePycuda()),
    ]


@pytest.mark.parametrize("backend", fake_backends(), ids=lambda b: b.name)
def test_the_backends_pack_arguments_where_cuda_reads_them(specs, tmp_path, backend):
    assert backend.device_name() == "Fake GPU"
    assert backend.compute_capability() in ((9, 0), (8, 6))
    jacobi = KernelRunner(specs["jacobi_step"], backend, sampling=fixed(3))
    default = jacobi.measure(build(tmp_path, DEFAULT))
    reference = jacobi.outputs
    assert default.status == "ok" and default.time > 0 and len(default.times) == 3
    inputs = jacobi.input_array(0, specs["jacobi_step"].launch(DEFAULT).args[0])
    np.testing.assert_array_equal(reference.outputs["out"], jacobi_host(inputs, 300, 200))
    axpy = KernelRunner(specs["axpy"], backend, warmup=0, sampling=fixed(1))
    measured = axpy.measure(build(tmp_path, DEFAULT))
    out = axpy.outputs
    assert measured.status == "ok"
    launch = specs["axpy"].launch(DEFAULT)
    x, y = axpy.input_array(2, launch.args[2]), axpy.input_array(3, launch.args[3])
    np.testing.assert_array_equal(out.outputs["y"], y + np.float32(0.5) * x)


@pytest.mark.parametrize("backend", fake_backends(), ids=lambda b: b.name)
def test_the_backends_report_failures_and_recover(specs, tmp_path, backend):
    runner = KernelRunner(specs["jacobi_step"], backend)
    refused = runner.measure(build(tmp_path, DEFAULT, "refuse"))
    assert refused.status == "runtime_error" and "invalid argument" in refused.error.lower()
    fault = runner.measure(build(tmp_path, DEFAULT, "fault"))
    assert fault.status == "runtime_error" and "illegal" in fault.error.lower()
    assert runner.measure(build(tmp_path, DEFAULT)).status == "ok"
    missing = KernelRunner(specs["typed"], backend).measure(build(tmp_path, DEFAULT))
    assert missing.status == "runtime_error" and "typed" in missing.error


def test_more_than_48k_of_shared_memory_is_opted_into(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "#pragma annotune kernel axpy grid(1) block(B) shared(B * 1024)"
        " args(4, 2, in(4), inout(4))\n"
        "__global__ void axpy(size_t n, float a, const double *x, double *y) {}\n"
    )
    (spec,) = kernel_specs(parse_source(source), ("B",))
    driver = FakeCudaDriver()
    runner = KernelRunner(spec, CudaPythonBackend(driver=driver), warmup=0, sampling=fixed(1))
    assert runner.measure(build(tmp_path, {"B": 32})).status == "ok"
    assert driver.shared_opt_in == []
    assert runner.measure(build(tmp_path, {"B": 64})).status == "ok"
    assert driver.shared_opt_in == [65536]  # once, when the launch is prepared


@pytest.mark.parametrize("backend", fake_backends(), ids=lambda b: b.name)
def test_the_backends_write_a_modules_constant_memory(backend):
    kernel = backend.load(b"ok", "_Z11jacobi_stepPKfPfii")
    address, nbytes = backend.find_global(kernel, "coef")
    assert nbytes == 64
    backend.upload(address, np.arange(16, dtype=np.float32))
    assert device_array(int(address), ctypes.c_float, 16).tolist() == list(range(16))
    with pytest.raises(BackendError, match="missing"):
        backend.find_global(kernel, "missing")


# --- choosing a backend --------------------------------------------------------------------------

NO_BACKEND_PACKAGE = importlib.util.find_spec("pycuda") is None and (
    importlib.util.find_spec("cuda") is None
)


def test_unknown_backend_name():
    with pytest.raises(AnnotuneError, match="unknown kernel backend 'opencl'"):
        select_backend("opencl")


@pytest.mark.skipif(not NO_BACKEND_PACKAGE, reason="a CUDA backend package is installed here")
def test_without_pycuda_or_cuda_python_the_error_says_what_to_install():
    with pytest.raises(AnnotuneError) as caught:
        select_backend()
    message = caught.value.message
    assert "pycuda: pycuda is not installed" in message
    assert "cuda-python: the cuda-python package is not installed" in message
    assert "pip install" in caught.value.hint
    with pytest.raises(AnnotuneError, match=r"^no usable CUDA kernel backend \(pycuda: "):
        select_backend("pycuda")


# --- on a GPU ------------------------------------------------------------------------------------


def real_backend(name: str) -> KernelBackend:
    try:
        return open_backend(name)
    except (BackendUnavailable, BackendError) as reason:
        pytest.skip(f"{name}: {reason}")


def nvcc_cubin(tmp_path: Path, backend: KernelBackend, params: dict) -> BuildResult:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    argv = cubin_compiler(backend.compute_capability()).render(
        FIXTURE,
        tmp_path / f"{'-'.join(map(str, params.values()))}.cubin",
        [f"-D{k}={v}" for k, v in params.items()],
        [str(FIXTURE.parent)],
    )
    subprocess.run(argv, check=True, capture_output=True)
    return BuildResult(dict(params), Path(argv[-1]))


@pytest.mark.gpu
@pytest.mark.parametrize("name", BACKENDS)
def test_real_kernels_on_the_gpu(name, specs, tmp_path):
    with real_backend(name) as backend:
        runner = KernelRunner(specs["jacobi_step"], backend, sampling=fixed(3))
        default = runner.measure(nvcc_cubin(tmp_path, backend, DEFAULT))
        reference = runner.outputs
        assert default.status == "ok", default.error
        assert default.time > 0 and len(default.times) == 3
        seconds = default.compile_info["run_seconds"]
        assert sum(default.times) / 1e3 == pytest.approx(seconds["gpu"])
        assert 0 < seconds["gpu"] <= seconds["wall"] - seconds["setup"]  # inside the batches
        inputs = runner.input_array(0, specs["jacobi_step"].launch(DEFAULT).args[0])
        np.testing.assert_allclose(
            reference.outputs["out"], jacobi_host(inputs, 300, 200), rtol=1e-6
        )
        runner.reference = reference
        other = runner.measure(nvcc_cubin(tmp_path, backend, {"BLOCK_X": 16, "BLOCK_Y": 8}))
        assert other.status == "ok", other.error
        too_big = runner.measure(nvcc_cubin(tmp_path, backend, {"BLOCK_X": 128, "BLOCK_Y": 16}))
        assert too_big.status == "runtime_error"
        axpy = KernelRunner(specs["axpy"], backend, sampling=fixed(2))
        measured = axpy.measure(nvcc_cubin(tmp_path, backend, DEFAULT))
        out = axpy.outputs
        assert measured.status == "ok", measured.error
        launch = specs["axpy"].launch(DEFAULT)
        x, y = axpy.input_array(2, launch.args[2]), axpy.input_array(3, launch.args[3])
        np.testing.assert_allclose(out.outputs["y"], y + np.float32(0.5) * x, rtol=1e-12)
        axpy.reference = out
        again = axpy.measure(nvcc_cubin(tmp_path, backend, {"BLOCK_X": 64, "BLOCK_Y": 2}))
        same = axpy.outputs
        assert again.status == "ok", again.error  # y starts from its input again
        np.testing.assert_array_equal(same.outputs["y"], out.outputs["y"])
        typed = KernelRunner(specs["typed"], backend, sampling=fixed(1))
        assert typed.measure(nvcc_cubin(tmp_path, backend, DEFAULT)).status == "ok"


@pytest.mark.gpu
@pytest.mark.parametrize("name", BACKENDS)
def test_constants_are_filled_on_the_gpu(name, tmp_path):
    source = tmp_path / "lookup.cu"
    rules = "constants(table = iota, offsets = range(0, N))"
    source.write_text(LOOKUP.replace("constants(table = range(0, N))", rules))
    (spec,) = kernel_specs(parse_source(source), ("B",))
    with real_backend(name) as backend:
        if shutil.which("nvcc") is None:
            pytest.skip("nvcc is not installed")
        cubin = tmp_path / "lookup.cubin"
        argv = cubin_compiler(backend.compute_capability()).render(
            source, cubin, ["-DB=8"], [str(tmp_path)]
        )
        subprocess.run(argv, check=True, capture_output=True)
        runner = KernelRunner(spec, backend, warmup=0, sampling=fixed(1))
        measured = runner.measure(BuildResult({"B": 8}, Path(argv[-1])))
        out = runner.outputs
        assert measured.status == "ok", measured.error
        offsets_rule, table_rule = spec.launch({"B": 8}).constants
        offsets = runner.constant_array(0, offsets_rule, 4)
        table = runner.constant_array(1, table_rule, 8)
        np.testing.assert_array_equal(out.outputs["out"], table[offsets[np.arange(8) % 4]])


VECTORS = """\
#ifndef B
#define B 64 // @tune values(64, 128)
#endif
#define N 4096
struct Body { char tag; double mass; float pos[3]; };
#pragma annotune kernel lanes grid(N / B) block(B) args(in(N), out(N), inout(N), N)
__global__ void lanes(const float4 *in, float *out, Body *bodies, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  if (i < n) out[i] = in[i].x + 2 * in[i].y + 3 * in[i].z + 4 * in[i].w;
  if (i < n) bodies[i].mass += bodies[i].pos[2] + bodies[i].tag;
}
"""


@pytest.mark.gpu
def test_float4_and_struct_arrays_reach_the_kernel_as_laid_out_on_the_gpu(tmp_path):
    """An array of a vector type is (count, lanes) on the host, one of a struct of numbers is
    laid out as the compiler lays it: the kernel reads each float4 and each struct's fields
    where the host put them."""
    from annotune.annotate import read_problem
    from annotune.builder import Builder

    (tmp_path / "lanes.cu").write_text(VECTORS)
    problem = read_problem(tmp_path / "lanes.cu")
    (spec,) = problem.kernels
    with real_backend("cuda-python") as backend:
        arch = backend.compute_capability()
        with Builder(problem, cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=arch) as builder:
            (build,) = builder.build([{"B": 128}])
        assert build.ok, build.error
        runner = KernelRunner(spec, backend, warmup=0, sampling=fixed(1))
        measured = runner.measure(build)
        assert measured.status == "ok", measured.error
        data = runner.input_array(0, spec.launch(build.params).args[0])
        assert data.shape == (4096, 4)
        expected = data @ np.array([1, 2, 3, 4], dtype=np.float32)
        np.testing.assert_allclose(runner.outputs.outputs["out"], expected, rtol=1e-6)
        bodies = runner.input_array(2, spec.launch(build.params).args[2])  # char, double, float[3]
        assert bodies.dtype.itemsize == 32
        moved = bodies["f2"] + bodies["f3"][:, 2] + bodies["f0"]
        np.testing.assert_allclose(runner.outputs.outputs["bodies"]["f2"], moved, rtol=1e-12)


# --- kernel mode inside the tuning loop -------------------------------------------------------


def test_tune_in_kernel_mode_uses_the_defaults_outputs_as_reference(tmp_path, monkeypatch):
    """The loop picks the kernel runner, builds with the given command, captures the default's
    outputs, and on a second run (the default reused) launches it again only for them."""
    import sys

    from annotune.annotate import read_problem
    from annotune.builder import CompilerCommand
    from annotune.run.program import RunSpec
    from annotune.session.options import TuneOptions
    from annotune.session.tuner import tune

    for name in ("jacobi.cu", "params.cuh", "axpy.cuh"):
        shutil.copy(FIXTURE.parent / name, tmp_path / name)
    backend = FakeBackend(times=(2.0, 1.0))
    monkeypatch.setattr("annotune.session.measurers.select_backend", lambda name=None: backend)
    monkeypatch.setattr("annotune.session.tuner.gpu_name", lambda: "Fake GPU")  # one is there
    # A stand-in "compiler": the cubin says how the kernel behaves (here: always right). Kernel
    # mode would compile with NVRTC, or make an nvcc cubin command of the user's: not here.
    from annotune.builder.nvrtc_flags import NO_FLAGS

    monkeypatch.setattr("annotune.builder.builds.nvrtc_missing", lambda *_: "not in this test")
    monkeypatch.setattr("annotune.builder.builds.kernel_commands", lambda user, _: (user, NO_FLAGS))
    fake_nvcc = CompilerCommand(
        (
            sys.executable,
            "-c",
            "import sys; open(sys.argv[1], 'w').write('ok')",
            "{output}",
            "{source}",
        )
    )
    options = TuneOptions(
        strategy="random",
        budget=4,
        device="fake-gpu",
        kernel="jacobi_step",
        compiler=fake_nvcc,
        run=RunSpec(warmup=0, repeats=2),
    )
    problem = read_problem(tmp_path / "jacobi.cu")
    first = tune(problem, options)
    assert first.evaluations == 4 and first.invalid == 0
    assert first.default.time == 1.5  # median of the fake's 2.0 and 1.0
    assert first.header.is_file()
    launches = backend.launches
    second = tune(problem, options)
    assert second.reused == 4
    assert backend.launches > launches  # the default ran once more, for its outputs only


def test_a_template_kernel_is_loaded_by_the_symbol_its_build_names(specs, tmp_path):
    """A template kernel's symbol depends on the configuration: the builder names it in
    `BuildResult.symbols`, and the runner loads that one, not the spec's `mangled_name`."""
    from dataclasses import replace

    template = replace(specs["jacobi_step"], mangled_name="")
    backend = FakeBackend()
    runner = KernelRunner(template, backend, warmup=0, sampling=fixed(1))
    named = replace(build(tmp_path, DEFAULT), symbols={"jacobi_step": "_Z11jacobi_stepPKfPfii"})
    assert runner.measure(named).status == "ok"
    unnamed = build(tmp_path, {**DEFAULT})
    assert runner.measure(unnamed).status == "runtime_error"
