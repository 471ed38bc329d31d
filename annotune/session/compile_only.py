"""`annotune tune --compile-only`: compile the configurations a tune would start with, run none.

For a machine without the GPU (a login node): does every variant compile, and what does each
kernel cost in registers, shared memory and spills? Without measurements a search learns
nothing, so the configurations are the ones every tune compiles first, the default, and then
the random strategy's first picks under the tune's seed: a uniform sample of the legal space.

Compiles go through the tune's `Builder`, in parallel (`jobs`), into the same compile cache
(the source's workspace: beside it, or in the user's cache when that is read-only), so
every result, failures included, is kept there under its compile command, and a later tune that
compiles with the same command reuses it. Nothing is written to the results database: a study
holds measurements on a device, and here there is neither.

The architecture: `arch` ("sm_90"), else the compute capability of `--device`'s entry in the GPU
table, else nvcc's default. Kernel mode compiles cubins as a tune does (for an architecture
named here, the very compiles a tune on such a GPU runs): with NVRTC given the flags of the
user's compile command it understands, nvcc's cubin command made from that command compiling
what NVRTC cannot (each such fallback counted, with its reason); NVRTC needs an architecture,
so with none named it is given the oldest it knows (`NVRTC_DEFAULT_ARCH`).
Program mode adds `-arch=sm_XY` to the program's nvcc command.

In kernel mode each configuration's launch is evaluated as a launch would be
(`run.kernel.launch_limits`): one whose grid, block or shared memory cannot be computed or
breaks the architecture's limits is not compiled, and one whose compiled kernel needs more
registers or shared memory than a block may have is refused once compiled; each is counted
(`cannot_launch`) and shown with its reason, as a tune would record it. When none of the
configurations tried can launch, that is the declaration's mistake: an AnnotuneError at the
clause (exit 2), not a report of compiles no GPU can run.

Registers, shared memory and spills are ptxas's report, which nvcc prints with `-Xptxas -v`:
the nvcc preset has it, and a command of the user's that runs nvcc without it is given it
(those compiles are cached apart from a tune's under the command as written). Another compiler
of CUDA (clang) gives no such report, and the report says so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from annotune.annotate import Problem, problem_space, read_problem
from annotune.annotate.kernels import KernelSpec, LaunchError
from annotune.annotate.problem import chosen_kernel
from annotune.annotate.summary import require_legal
from annotune.builder import Builder, CompilerCommand, default_compiler
from annotune.builder.compiler import sm, with_arch
from annotune.core.command import is_nvcc, resource_report_flags
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Candidates, KernelResources, Number
from annotune.results.workspace import workspace
from annotune.run.kernel.launch_limits import (
    LaunchLimits,
    kernel_resources,
    launch_limits,
    refusal,
    unlaunchable,
)
from annotune.search import create
from annotune.session.options import (
    TuneArguments,
    TuneOptions,
    kernel_mode,
    tune_options,
    warm_nvrtc,
)
from annotune.session.report import FailureKind, failure_kind
from annotune.transfer.features import lookup

_ARCH = re.compile(r"sm_(\d+)(\d)")

NVRTC_DEFAULT_ARCH = (7, 5)
"""The architecture kernel mode compiles for when none is named: the oldest NVRTC 13 knows."""


@dataclass(frozen=True)
class KernelRange:
    """One kernel's resources over the configurations that compiled: (least, most) of each."""

    kernel: str  # as ptxas names it (mangled)
    compiled: int  # configurations whose build holds this kernel
    registers: tuple[int, int]
    shared_bytes: tuple[int, int]
    spill_stores: tuple[int, int]  # bytes
    spill_loads: tuple[int, int]
    spilling: int  # configurations in which it spills at all

    @classmethod
    def of(cls, kernel: str, resources: Sequence[KernelResources]) -> KernelRange:
        def span(values: list[int]) -> tuple[int, int]:
            return min(values), max(values)

        return cls(
            kernel,
            len(resources),
            span([r.registers for r in resources]),
            span([r.shared_bytes for r in resources]),
            span([r.spill_stores for r in resources]),
            span([r.spill_loads for r in resources]),
            sum(1 for r in resources if r.spill_stores or r.spill_loads),
        )

    def to_json(self) -> dict:
        return {
            "compiled": self.compiled,
            "registers": list(self.registers),
            "shared_bytes": list(self.shared_bytes),
            "spill_stores": list(self.spill_stores),
            "spill_loads": list(self.spill_loads),
            "spilling": self.spilling,
        }


@dataclass(frozen=True)
class CompileReport:
    """What `compile_only` found; `transient` compiles (the machine's failure, retried once)
    are neither compiled nor failed: they say nothing about their configuration."""

    command: str  # the compiler's identity: the command (or NVRTC) and its version
    arch: str | None  # "sm_90"; None: nvcc's default (or not a CUDA compile)
    space_size: int | None  # legal configurations; None when too many to count
    compiled: int
    failed: int
    transient: int
    cached: int  # compiled or failed before: served from the compile cache
    seconds: float  # wall time
    fallbacks: int = 0  # variants NVRTC could not compile, compiled (or failed) by nvcc
    cannot_launch: int = 0  # kernel mode: configurations no GPU of the architecture can launch
    failures: tuple[FailureKind, ...] = ()  # the most common first (launch_error ones too)
    fallback_reasons: tuple[FailureKind, ...] = ()  # why NVRTC could not, the most common first
    kernels: tuple[KernelRange, ...] = ()
    warnings: tuple[str, ...] = ()  # e.g. that the compile cache is not beside the source

    def to_json(self) -> dict:
        return {
            "compiled": self.compiled,
            "failed": self.failed,
            "cannot_launch": self.cannot_launch,
            "transient": self.transient,
            "cached": self.cached,
            "fallbacks": self.fallbacks,
            "fallback_reasons": [f.to_json() for f in self.fallback_reasons],
            "seconds": self.seconds,
            "command": self.command,
            "arch": self.arch,
            "space_size": self.space_size,
            "failures": [f.to_json() for f in self.failures],
            "kernels": {k.kernel: k.to_json() for k in self.kernels},
            "warnings": list(self.warnings),
        }


def compile_configurations(
    problem: Problem, options: TuneOptions, arch: str | None = None
) -> CompileReport:
    """Compile `options.budget` configurations of `problem` (all legal ones when None) as
    `tune` would, run none, and report compiles, failures and kernel resources.

    AnnotuneError when `arch` is not "sm_XY", `--device` names no NVIDIA GPU of the table, the
    compile command cannot take an architecture, kernel mode has no kernel to compile
    (`chosen_kernel`: checked before any compile), or none of the configurations can launch
    the kernel (`launch_limits.unlaunchable`: those whose launch is wrong as declared, before
    any compile).
    """
    started = time.monotonic()
    kernel = chosen_kernel(problem, options.mode, options.kernel)
    nvrtc = kernel is not None  # NVRTC, given the compile command's flags it understands
    warm_nvrtc(nvrtc, options.jobs)  # while the space is read
    space = problem_space(problem)
    rng = np.random.default_rng(options.seed)
    legal, legal_count = space.search_rows(rng)
    cuda = problem.language == "cuda" or kernel_mode(problem, options.mode)
    capability = _compute_capability(arch, options.device if cuda else None)
    place = workspace(problem.source)
    if nvrtc and capability is None:
        capability = NVRTC_DEFAULT_ARCH
    default = space.to_dicts(space.default_row()[None, :])[0]
    strategy = create("random")
    strategy.start(Candidates(space.decode(legal), space.names), rng)
    count = len(legal) if options.budget is None else options.budget
    picks = space.to_dicts(legal[strategy.ask(count)])
    configs = [default, *(c for c in picks if c != default)][:count]
    limits = launch_limits(capability)
    refused = _refused(kernel, configs, limits) if kernel is not None else []
    if kernel is not None and refused and len(refused) == len(configs):  # as declared
        raise unlaunchable(kernel, refused, limits)  # before anything is compiled
    tried, configs = len(configs), [c for c in configs if all(c is not r for r, _ in refused)]
    unreported = "" if nvrtc or not cuda else _unreported(options.compiler)
    with Builder(
        problem,
        compiler=options.compiler if nvrtc else _compiler(problem, options, capability),
        cache_dir=options.cache_dir or place.cache_dir,
        jobs=options.jobs,
        timeout=options.compile_timeout,
        nvrtc_arch=capability if nvrtc else None,
    ) as builder:
        builds = builder.build(configs)
        retry = [i for i, b in enumerate(builds) if b.transient]
        for i, build in zip(retry, builder.build([builds[i].params for i in retry]), strict=True):
            builds[i] = build
    unable: list[int] = []  # the builds whose kernel cannot launch for its resources
    if kernel is not None:
        after = _refused_builds(kernel, builds, limits)
        unable = [i for i, _ in after]
        refused += [(builds[i].params, error) for i, error in after]
        if refused and len(refused) == tried - sum(b.transient for b in builds):
            raise unlaunchable(kernel, refused, limits)
    seconds = time.monotonic() - started
    report = _report(builds, builder, capability, legal_count, seconds, refused, set(unable))
    moved = place.warning if options.cache_dir is None else ""
    warnings = tuple(w for w in (builder.nvrtc_unavailable, moved, unreported) if w)
    return replace(report, warnings=warnings)


def _compute_capability(arch: str | None, device: str | None) -> tuple[int, int] | None:
    """`arch` as a compute capability, else `device`'s from the GPU table, else None."""
    if arch is not None:
        match = _ARCH.fullmatch(arch)
        if match is None:
            raise AnnotuneError(f"--arch {arch!r} is not sm_XY", hint="e.g. --arch sm_90")
        return int(match.group(1)), int(match.group(2))
    if device is None:
        return None
    features = lookup(device)
    if features is None or not features.values["vendor_nvidia"]:
        raise AnnotuneError(
            f"--device {device!r} is no NVIDIA GPU of annotune's table, so its architecture is "
            "unknown",
            hint="name the architecture with --arch sm_XY",
        )
    capability = round(features.values["compute_capability"] * 10)
    return capability // 10, capability % 10


def _compiler(
    problem: Problem, options: TuneOptions, capability: tuple[int, int] | None
) -> CompilerCommand | None:
    """The user's compile command, or the default one, for `capability` when one is named;
    ptxas asked for its report when the user's runs nvcc."""
    command = options.compiler
    if command is not None and command.preset is None:
        command = _with_ptxas_report(command)
    if capability is None:
        return command
    command = command or default_compiler(problem.language)
    return with_arch(command.for_pragmas(problem.pragmas), capability)


def _with_ptxas_report(command: CompilerCommand) -> CompilerCommand:
    """`command` with `-Xptxas -v` after nvcc's name, unless it asks for the report already
    or is no nvcc."""
    compiler, *rest = command.argv
    if not is_nvcc(compiler):
        return command
    return CompilerCommand((compiler, *resource_report_flags(command.argv), *rest))


def _unreported(command: CompilerCommand | None) -> str:
    """Why the kernels' resources of a CUDA source are not reported, or "": they are nvcc's
    (ptxas's) report, and `command` (None: the nvcc preset) runs another compiler."""
    if command is None or is_nvcc(command.argv[0]):
        return ""
    return (
        f"the compile command runs {command.argv[0]}, not nvcc: no kernel's registers, shared "
        "memory or spills are reported (they are ptxas's report, which nvcc prints)"
    )


def _refused(
    kernel: KernelSpec, configs: list[dict[str, Number]], limits: LaunchLimits
) -> list[tuple[dict[str, Number], LaunchError]]:
    """The configurations whose launch, as declared, cannot be computed or breaks `limits`:
    none is compiled, since no tune would run it."""
    found = ((params, refusal(kernel, params, limits)) for params in configs)
    return [(params, error) for params, error in found if error is not None]


def _refused_builds(
    kernel: KernelSpec, builds: list[BuildResult], limits: LaunchLimits
) -> list[tuple[int, LaunchError]]:
    """The compiled configurations whose kernel, by the compiler's report of it, needs more
    registers or shared memory than a block may have: (their index in `builds`, why)."""
    found = (
        (i, refusal(kernel, build.params, limits, kernel_resources(build, kernel)))
        for i, build in enumerate(builds)
        if build.ok
    )
    return [(i, error) for i, error in found if error is not None]


def _report(
    builds: list[BuildResult],
    builder: Builder,
    capability: tuple[int, int] | None,
    space_size: int | None,
    seconds: float,
    refused: list[tuple[dict[str, Number], LaunchError]],
    unable: set[int],
) -> CompileReport:
    """The report of `builds`, and of the `refused` configurations that cannot launch (those
    compiled among them: the builds at `unable`), counted and shown as a tune would record
    them; their kernels' resources are reported still: they say why."""
    failures: dict[tuple[str, str], FailureKind] = {}
    fallbacks: dict[tuple[str, str], FailureKind] = {}
    resources: dict[str, list[KernelResources]] = {}
    for build in builds:
        if build.fallback:
            _count(fallbacks, build.fallback, build.params)
        if build.ok:
            for kernel, used in build.resources.items():
                resources.setdefault(kernel, []).append(used)
        elif not build.transient:
            _count(failures, build.error, build.params)
    failed = sum(f.count for f in failures.values())
    for params, error in refused:
        _count(failures, str(error), params, "launch_error")
    return CompileReport(
        command=builder.identity(),
        arch=sm(capability) if capability else None,
        space_size=space_size,
        compiled=sum(b.ok for i, b in enumerate(builds) if i not in unable),
        failed=failed,
        transient=sum(b.transient for b in builds),
        cached=sum(b.cached for b in builds),
        seconds=seconds,
        fallbacks=sum(bool(b.fallback) for b in builds),
        cannot_launch=len(refused),
        failures=tuple(sorted(failures.values(), key=lambda f: -f.count)),
        fallback_reasons=tuple(sorted(fallbacks.values(), key=lambda f: -f.count)),
        kernels=tuple(KernelRange.of(k, r) for k, r in sorted(resources.items())),
    )


def _count(
    kinds: dict[tuple[str, str], FailureKind],
    error: str,
    params: dict,
    status: str = "compile_error",
) -> None:
    """One more configuration failing with `error`, counted with those of its kind."""
    kind = failure_kind(status, error)
    known = kinds.get(kind)
    kinds[kind] = (
        FailureKind(status, 1, error, dict(params))
        if known is None
        else replace(known, count=known.count + 1)
    )


def compile_file(
    source: Path, given: TuneArguments, *, config_path: Path | None = None
) -> CompileReport:
    """`tune --compile-only`: `source` read (its annotations legal), and
    `compile_configurations` with the options `given` and the config make."""
    warm_nvrtc(given.mode == "kernel", given.jobs)  # while libclang parses
    problem = read_problem(source, config_path=config_path)
    require_legal(problem)  # before anything is compiled
    return compile_configurations(problem, tune_options(problem, given), given.arch)
