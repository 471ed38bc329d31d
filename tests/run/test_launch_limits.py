"""Whether a launch can run, decided without a GPU (`run.kernel.launch_limits`): the device's
dimensions, a block's shared memory on each architecture, and a block's registers by the
compiler's report (191 registers x 512 threads need more than a multiprocessor has)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from annotune.annotate.kernels import Launch, LaunchError, kernel_specs
from annotune.annotate.source import parse_source
from annotune.core.records import BuildResult, KernelResources
from annotune.run.kernel.launch_limits import (
    SHARED_PER_BLOCK,
    kernel_resources,
    launch_limits,
    refusal,
    unlaunchable,
)

SM90 = launch_limits((9, 0))


def launch(grid=(1, 1, 1), block=(1, 1, 1), shared=0) -> Launch:
    return Launch(grid, block, shared, ())


def reason(limits, the_launch, resources=None) -> tuple[str, str]:
    with pytest.raises(LaunchError) as raised:
        limits.check(the_launch, resources)
    return raised.value.clause, str(raised.value)


@pytest.mark.parametrize(
    ("the_launch", "clause", "message"),
    [
        (launch(block=(2048, 1, 1)), "block", "a block of 2048 threads: at most 1024 a block"),
        (launch(block=(64, 32, 1)), "block", "a block of 64 x 32 = 2048 threads: at most 1024"),
        (launch(block=(1, 1, 65)), "block", "block z is 65: at most 64"),
        (launch(grid=(2**31, 1, 1)), "grid", "grid x is 2147483648: at most 2147483647"),
        (launch(grid=(1, 65536, 1)), "grid", "grid y is 65536: at most 65535"),
        (launch(grid=(1, 1, 65536)), "grid", "grid z is 65536: at most 65535"),
        (launch(shared=228 * 1024), "shared", "233472 bytes of dynamic shared memory: sm_90"),
    ],
)
def test_what_no_launch_may_have(the_launch, clause, message):
    assert reason(SM90, the_launch)[0] == clause
    assert message in reason(SM90, the_launch)[1]


def test_the_largest_launch_there_is_can_run():
    SM90.check(launch((2**31 - 1, 65535, 65535), (1024, 1, 1), 227 * 1024))
    SM90.check(launch(block=(1, 16, 64)))


@pytest.mark.parametrize(
    ("capability", "arch", "kb"),
    [
        ((7, 5), "sm_75", 64),
        ((8, 0), "sm_80", 163),
        ((8, 6), "sm_86", 99),
        ((8, 9), "sm_89", 99),
        ((9, 0), "sm_90", 227),
        ((12, 0), "sm_120", 99),
        ((8, 8), "sm_88", 163),  # a minor version the table lacks: its major's nearest earlier
        ((42, 0), "sm_420", 227),  # an architecture it lacks: the largest limits
        (None, "any GPU", 227),
    ],
)
def test_shared_memory_a_block_may_have_by_architecture(capability, arch, kb):
    limits = launch_limits(capability)
    assert (limits.arch, limits.shared_per_block) == (arch, kb * 1024)
    limits.check(launch(shared=kb * 1024))
    clause, message = reason(limits, launch(shared=kb * 1024 + 1))
    assert clause == "shared" and f"{arch} allows a block at most {kb * 1024} bytes" in message


def test_static_shared_memory_counts_with_the_dynamic():
    static = KernelResources(registers=32, shared_bytes=40 * 1024)
    limits = launch_limits((7, 5))
    limits.check(launch(shared=24 * 1024), static)
    clause, message = reason(limits, launch(shared=24 * 1024 + 1), static)
    assert clause == "shared" and "24577 bytes of dynamic shared memory and 40960 of static" in (
        message
    )


@pytest.mark.parametrize(
    ("registers", "threads", "fits"),
    [
        (191, 256, True),
        (191, 512, False),  # 16 warps x 6144 = 98304 registers
        (191, 1024, False),
        (128, 512, True),  # 16 x 4096: exactly 65536
        (129, 512, False),  # 16 x 4352
        (255, 256, True),
        (64, 1024, True),
        (65, 1024, False),
        (176, 352, False),  # 11 x 5632 would fit; checked as 12 (4 sub-partitions): 67584
    ],
)
def test_a_blocks_registers_are_checked_as_the_hardware_does(registers, threads, fits):
    used = KernelResources(registers=registers)
    for capability in [(7, 5), (8, 0), (9, 0), (12, 0), None]:
        limits = launch_limits(capability)
        if fits:
            limits.check(launch(block=(threads, 1, 1)), used)
            continue
        clause, message = reason(limits, launch(block=(threads, 1, 1)), used)
        assert clause == "block"
        assert f"a block of {threads} threads of {registers} registers needs" in message
        assert "a multiprocessor has 65536" in message


def test_the_issues_kernel_of_191_registers_fits_blocks_of_256():
    limits = launch_limits((9, 0))
    assert limits.block_registers(191, 512) == 98304
    assert limits.most_threads(191) == 256 and limits.most_threads(32) == 1024
    clause, message = reason(limits, launch(block=(512, 1, 1)), KernelResources(registers=191))
    assert message == (
        "a block of 512 threads of 191 registers needs 98304 registers (allocated per warp, in "
        "units of 256): a multiprocessor has 65536, enough for blocks of at most 256 threads of "
        "this kernel"
    )


def test_without_a_report_no_register_is_counted():
    SM90.check(launch(block=(1024, 1, 1)), None)
    SM90.check(launch(block=(1024, 1, 1)), KernelResources())  # a compiler that reported none


def test_the_table_covers_what_nvrtc_compiles_for():
    assert {(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)} <= set(SHARED_PER_BLOCK)
    assert launch_limits((6, 0)).sub_partitions == 2 and launch_limits((6, 1)).sub_partitions == 4


KERNEL = """\
#define N 4096
#pragma annotune kernel k grid(N / (B - 64), 2.5 * B / B) block(B) shared(B * 4) args(out(N))
__global__ void k(float *x) { x[threadIdx.x] = 0; }
"""


@pytest.fixture
def spec(tmp_path: Path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    (spec,) = kernel_specs(parse_source(path), ("B",))
    return spec


def test_a_launch_c_cannot_compute_names_its_clause(spec):
    with pytest.raises(LaunchError, match=r"grid\(...\) is undefined") as undefined:
        spec.launch({"B": 64})
    assert undefined.value.clause == "grid"
    with pytest.raises(LaunchError, match=r"grid y \(2\.5 \* B / B\) is 2\.5, not an integer"):
        spec.launch({"B": 128})
    error = pickle.loads(pickle.dumps(undefined.value))  # across processes, its clause too
    assert error.clause == "grid" and str(error) == str(undefined.value)


def test_refusal_and_the_error_when_no_configuration_can_launch(spec, tmp_path):
    assert "undefined" in str(refusal(spec, {"B": 64}, SM90))
    refused = [(params, refusal(spec, params, SM90)) for params in ({"B": 64}, {"B": 64})]
    error = unlaunchable(spec, refused, SM90)  # type: ignore[arg-type]
    assert error.location == spec.where("grid")
    assert (error.location.line, error.location.column) == (2, 27)  # grid(...) in the pragma
    assert "kernel 'k' cannot launch for all 2 configurations tried on sm_90" in error.message
    assert "(e.g. {'B': 64})" in error.message
    assert spec.where("block").column == KERNEL.splitlines()[1].index("block(") + 1
    assert spec.where("args") != spec.where("tolerance") == spec.location


def test_the_resources_of_the_declared_kernel_or_its_template_instance(spec, tmp_path):
    used = KernelResources(registers=40)
    plain = BuildResult(
        {}, tmp_path, resources={spec.mangled_name: used, "_Z5otherv": KernelResources()}
    )
    assert kernel_resources(plain, spec) is used
    instance = BuildResult(
        {}, tmp_path, resources={"_Z1kILi4EEvPf": used}, symbols={"k": "_Z1kILi4EEvPf"}
    )
    assert kernel_resources(instance, spec) is used
    assert kernel_resources(BuildResult({}, tmp_path), spec) is None
