"""Whether one configuration's launch can run on a GPU architecture, decided without the GPU:
its grid and block within the device's dimensions, its shared memory within a block's, and its
block's registers within a multiprocessor's, given the compiler's resource report.

Why before the launch: `--compile-only` has no GPU, and would otherwise say "compiled" of a
configuration no GPU can run; a tune would load its module, have the launch refused and recover
the device for nothing. Such a configuration is invalid for its own reasons, on every GPU of its
architecture: `LaunchError`, a permanent failure (never a transient one).

The limits, for the architectures NVRTC and nvcc 13 compile for (5.0 and later):

- CUDA C++ Programming Guide (CUDA 13), "Compute Capabilities", table "Technical
  Specifications per Compute Capability": at most 1,024 threads a block, block dimensions
  (1,024, 1,024, 64), grid dimensions (2^31 - 1, 65,535, 65,535), 64 K 32-bit registers a block
  and a multiprocessor, 255 a thread, and the shared memory a block may have
  (`SHARED_PER_BLOCK`: the opt-in maximum, `cudaDevAttrMaxSharedMemoryPerBlockOptin`, which the
  backends opt into for a launch above 48 KB; static and dynamic together);
- cuda_occupancy.h (CUDA 13), `cudaOccMaxBlocksPerSMRegsLimit`: registers are allocated per
  warp, 32 threads' worth rounded up to 256 (`cudaOccRegAllocationGranularity`), and the
  hardware's check rounds a block's warps up to the multiprocessor's sub-partitions (4; 2 on
  sm_60, `cudaOccSubPartitionsPerMultiprocessor`): a block of 512 threads of a 191-register
  kernel needs 16 x 6,144 = 98,304 registers, more than the 65,536 there are.

A limit a launch can break only at run time (a kernel's `__launch_bounds__`, the device's memory)
stays the device's to refuse: the runner reports that refusal as a runtime error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from annotune.annotate.kernels import KernelSpec, Launch, LaunchError
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, KernelResources, Number

THREADS_PER_BLOCK = 1024
BLOCK_DIMS = (1024, 1024, 64)
GRID_DIMS = (2**31 - 1, 65535, 65535)
REGISTERS_PER_BLOCK = 65536  # and per multiprocessor, on every architecture of the table
REGISTERS_PER_THREAD = 255
REGISTER_UNIT = 256  # a warp's registers are allocated in units of this many
WARP = 32

_KB = 1024
SHARED_PER_BLOCK = {
    (5, 0): 48 * _KB,
    (5, 2): 48 * _KB,
    (5, 3): 48 * _KB,
    (6, 0): 48 * _KB,
    (6, 1): 48 * _KB,
    (6, 2): 48 * _KB,
    (7, 0): 96 * _KB,
    (7, 2): 96 * _KB,
    (7, 5): 64 * _KB,
    (8, 0): 163 * _KB,
    (8, 6): 99 * _KB,
    (8, 7): 163 * _KB,
    (8, 9): 99 * _KB,
    (9, 0): 227 * _KB,
    (10, 0): 227 * _KB,
    (10, 3): 227 * _KB,
    (11, 0): 227 * _KB,
    (12, 0): 99 * _KB,
    (12, 1): 99 * _KB,
}
"""The most shared memory (static and dynamic) one block may have, by compute capability: the
Programming Guide's "maximum amount of shared memory per thread block" (the module's sources)."""


@dataclass(frozen=True)
class LaunchLimits:
    """What one architecture lets a block have. `arch` names it in messages ("sm_90"; "any
    GPU" when none is known: the largest limits of the table, so that only what no GPU can
    run is refused)."""

    arch: str
    shared_per_block: int
    sub_partitions: int = 4

    def check(self, launch: Launch, resources: KernelResources | None = None) -> None:
        """LaunchError (with its clause) when `launch` cannot run here: its dimensions, its
        dynamic shared memory, and with the compiler's `resources` for the kernel, its static
        shared memory added and its registers for the block's threads."""
        threads = math.prod(launch.block)
        if threads > THREADS_PER_BLOCK:
            rank = _rank(launch.block)
            shape = " x ".join(map(str, launch.block[:rank])) + " = " if rank > 1 else ""
            raise LaunchError(
                f"a block of {shape}{threads} threads: at most {THREADS_PER_BLOCK} a block",
                "block",
            )
        sizes = (("block", launch.block, BLOCK_DIMS), ("grid", launch.grid, GRID_DIMS))
        for what, dims, most in sizes:
            for axis, dim, limit in zip("xyz", dims, most, strict=True):
                if dim > limit:
                    raise LaunchError(f"{what} {axis} is {dim}: at most {limit}", what)
        static = resources.shared_bytes if resources is not None else 0
        if launch.shared + static > self.shared_per_block:
            used = f"{launch.shared} bytes of dynamic shared memory"
            if static:
                used += f" and {static} of static"
            raise LaunchError(
                f"{used}: {self.arch} allows a block at most {self.shared_per_block} bytes",
                "shared",
            )
        if resources is not None and resources.registers:
            self._check_registers(resources.registers, threads)

    def _check_registers(self, registers: int, threads: int) -> None:
        if registers > REGISTERS_PER_THREAD:
            raise LaunchError(
                f"{registers} registers a thread: at most {REGISTERS_PER_THREAD}", "block"
            )
        needed = self.block_registers(registers, threads)
        if needed > REGISTERS_PER_BLOCK:
            raise LaunchError(
                f"a block of {threads} threads of {registers} registers needs {needed} "
                f"registers (allocated per warp, in units of {REGISTER_UNIT}): a multiprocessor "
                f"has {REGISTERS_PER_BLOCK}, enough for blocks of at most "
                f"{self.most_threads(registers)} threads of this kernel",
                "block",
            )

    def block_registers(self, registers: int, threads: int) -> int:
        """The registers the hardware checks a block of `threads` threads of a kernel of
        `registers` registers against (`cudaOccMaxBlocksPerSMRegsLimit`'s hardware check)."""
        per_warp = _round_up(registers * WARP, REGISTER_UNIT)
        return per_warp * _round_up(-(-threads // WARP), self.sub_partitions)

    def most_threads(self, registers: int) -> int:
        """The largest block (a whole number of warps) a kernel of `registers` registers fits."""
        per_warp = _round_up(registers * WARP, REGISTER_UNIT)
        warps = REGISTERS_PER_BLOCK // per_warp // self.sub_partitions * self.sub_partitions
        return min(THREADS_PER_BLOCK, warps * WARP)


def launch_limits(capability: tuple[int, int] | None) -> LaunchLimits:
    """The limits of compute capability `capability`: its row of `SHARED_PER_BLOCK`, else the
    nearest earlier one of its major version (a later minor version runs that one's cubins),
    else (None, or an architecture the table lacks) the largest limits of the table."""
    largest = max(SHARED_PER_BLOCK.values())
    if capability is None:
        return LaunchLimits("any GPU", largest)
    major, minor = capability
    known = [cc for cc in SHARED_PER_BLOCK if cc[0] == major and cc[1] <= minor]
    if not known:
        return LaunchLimits(f"sm_{major}{minor}", largest)
    row = max(known)
    return LaunchLimits(f"sm_{major}{minor}", SHARED_PER_BLOCK[row], 2 if row == (6, 0) else 4)


def kernel_resources(build: BuildResult, spec: KernelSpec) -> KernelResources | None:
    """The compiler's report of `spec`'s kernel in `build`'s cubin (a template kernel's
    instance is the configuration's symbol); None when the compiler reported none."""
    symbol = build.symbols.get(spec.declared) or spec.mangled_name
    return build.resources.get(symbol) if symbol else None


def refusal(
    spec: KernelSpec,
    params: dict[str, Number],
    limits: LaunchLimits,
    resources: KernelResources | None = None,
) -> LaunchError | None:
    """Why `params` cannot launch `spec`'s kernel under `limits` (None: it can): its launch
    cannot be computed, or breaks a limit."""
    try:
        limits.check(spec.launch(params), resources)
    except LaunchError as error:
        return error
    return None


def unlaunchable(
    spec: KernelSpec, refused: list[tuple[dict[str, Number], LaunchError]], limits: LaunchLimits
) -> AnnotuneError:
    """The error when none of the configurations tried can launch: at the clause of the most
    common reason, where the declaration writes it, with one configuration for an example."""
    kinds: dict[tuple[str, str], list[tuple[dict[str, Number], LaunchError]]] = {}
    for params, error in refused:
        kinds.setdefault((error.clause, _shape(str(error))), []).append((params, error))
    (clause, _), examples = max(kinds.items(), key=lambda kind: len(kind[1]))
    params, error = examples[0]
    every = "the one configuration" if len(refused) == 1 else f"all {len(refused)} configurations"
    return AnnotuneError(
        f"kernel '{spec.declared}' cannot launch for {every} tried on {limits.arch}: {error} "
        f"(e.g. {params})",
        spec.where(clause),
        hint="declare a launch the configurations can run, or leave out those that cannot "
        "with a constraint (#pragma annotune constraint, or constraints = [...] in the config)",
    )


def _shape(message: str) -> str:
    """A message with its numbers blanked: failures that differ only there are one kind."""
    return "".join("#" if ch.isdigit() else ch for ch in message)


def _rank(dims: tuple[int, int, int]) -> int:
    return 3 if dims[2] > 1 else 2 if dims[1] > 1 else 1


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit
