"""The builder: configurations in, executables (or the reason there is none) out, in
parallel behind the content-hash cache (see the package's docstring for what keys an entry)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from annotune.annotate import Problem
from annotune.annotate.kernels import LaunchError
from annotune.builder.compiler import CompilerCommand, default_compiler
from annotune.builder.dependencies import (
    Digests,
    command_files,
    compile_environment,
    compiler_fingerprint,
    tracks_dependencies,
)
from annotune.builder.entries import (
    Batch,
    entry_key,
    fresh,
    install,
    load,
    located,
    save,
    scratch_beside,
    transient,
)
from annotune.builder.nvrtc_builds import NvrtcBuilds, nvrtc_missing, nvrtc_setup
from annotune.builder.nvrtc_flags import NO_FLAGS, kernel_commands
from annotune.builder.preprocessed import program_digest
from annotune.builder.symbols import found_instances, instantiating
from annotune.builder.units import Job, ProgramCompile, compile_includes
from annotune.builder.variants import VariantSource, materialize, read_files, variant_source
from annotune.builder.verify import checks_values
from annotune.core.inputs import argument_path
from annotune.core.records import BuildResult, Number
from annotune.core.tools import version_output

_PREPROCESSED = "preprocessed.i"


class Builder:
    """Compiles configurations of one problem into a cache directory.

    `dependency_tracking` says whether the compiler reports the files each compile read
    (`-MD -MF`, or `-M` per translation unit; gcc, clang, nvcc, nvc). When it is False (a
    compiler annotune does not know), a cache entry is checked against the variant's files, the
    files the command names, its include directories and those of its other sources only: a
    header found some other way can be edited without a rebuild, which the session should tell
    the user; and another source of the command that includes a rewritten header beside it
    reads the original, unchecked.

    `verifies_values` says whether each compiled variant's macros are read back with the
    compiler's preprocessor (`-E -dM`; gcc, clang, nvcc, nvc). When it is False (a compiler
    annotune cannot run preprocess-only), a definition annotune did not read can override a
    tuned value unnoticed, which the session should tell the user too.

    `nvrtc_arch` asks for kernel mode's cubins for it: by NVRTC given the flags of `compiler`
    (the user's compile command) it understands, by nvcc's cubin command made from `compiler`
    for what NVRTC cannot compile (`nvrtc_flags`). `nvrtc_unavailable` says why NVRTC is not
    used (the package is missing, the problem has no `device_code`, NVRTC does not know the
    architecture, the command has a flag NVRTC cannot take): then nvcc compiles every variant,
    each build's `fallback` says why, and the session should say so ("" when NVRTC is used).
    A builder that may have started NVRTC's worker processes is closed (`close()`, or `with`).
    """

    def __init__(
        self,
        problem: Problem,
        *,
        compiler: CompilerCommand | None = None,
        cache_dir: Path,
        jobs: int | None = None,
        timeout: float = 300.0,
        nvrtc_arch: tuple[int, int] | None = None,
    ):
        self.problem = problem
        command = NO_FLAGS
        if nvrtc_arch is not None:  # kernel mode: cubins, by NVRTC given the command's flags
            compiler, command = kernel_commands(compiler, nvrtc_arch)
        self.compiler = (
            compiler.for_pragmas(problem.pragmas)
            if compiler is not None
            else default_compiler(problem.language, problem.pragmas)
        )
        self.cache_dir = cache_dir
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout = timeout
        self.dependency_tracking = tracks_dependencies(self.compiler.argv[0])
        self.verifies_values = checks_values(self.compiler.argv[0])
        self._originals = read_files(problem)
        version = version_output(self.compiler.argv[0])
        self._version_line = _version_line(self.compiler, version)
        self._fingerprint = compiler_fingerprint(self.compiler.argv[0], version)
        self._settled: dict[tuple[object, ...], bytes] = {}  # `Digests`' memo
        self._cubins = "-cubin" in self.compiler.argv  # kernel mode's builds
        self.nvrtc_unavailable = ""
        self._nvrtc: NvrtcBuilds | None = None
        if nvrtc_arch is not None:
            self.nvrtc_unavailable = nvrtc_missing(problem, nvrtc_arch) or command.refusal()
            if not self.nvrtc_unavailable:
                setup = nvrtc_setup(problem, nvrtc_arch, self.jobs, command)
                self._nvrtc = NvrtcBuilds(problem, setup, timeout)
        self._program = ProgramCompile(
            problem, self.compiler, timeout, self.dependency_tracking, self._originals
        )

    def __enter__(self) -> Builder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop NVRTC's worker processes, if any were started; a later build starts them again."""
        if self._nvrtc is not None:
            self._nvrtc.setup.pool.close()

    def identity(self) -> str:
        """The compile command and compiler version as a person reads them (studies are keyed
        by it); the cache key holds more: the whole version output, paths, environment. With
        NVRTC: its version and architecture, and the nvcc command of its fallback."""
        nvcc = f"{self.compiler.describe()} | {self._version_line}"
        if self._nvrtc is None:
            return nvcc
        return self._nvrtc.identity(nvcc)

    def program_inputs(self) -> str:
        """A digest of every file the compile command reads beyond the tuned source's own
        files: the files it names (other sources, objects, libraries, response files) and the
        headers each other translation unit reads (one `-M` run each, on the originals); ""
        for a command that reads nothing else. A study's measurements belong to this digest
        too: they were of a program built from those bytes, and an edit of `other.c` makes
        another program."""
        return self._program.program_inputs(self._settled)

    def build(self, configs: list[dict[str, Number]]) -> list[BuildResult]:
        """Build every configuration (in parallel); one result per config, in order."""
        results: list[BuildResult | None] = [None] * len(configs)
        for index, result in self.build_iter(configs):
            results[index] = result
        return [result for result in results if result is not None]

    def build_iter(self, configs: list[dict[str, Number]]) -> Iterator[tuple[int, BuildResult]]:
        """Each configuration's build as it finishes: (its index in `configs`, the build), each
        index once. Closing the generator early cancels the builds not yet started (those
        running finish, so that no cache entry is left half written)."""
        variants = [variant_source(self.problem, c, self._originals) for c in configs]
        digests = Digests(self._settled)
        batch = Batch(compile_environment(), digests, command_files(self.compiler.argv))
        build_one = self._build_nvrtc if self._nvrtc is not None else self._build_one
        if self.nvrtc_unavailable:  # every variant is NVRTC's fallback: each one says why
            build_one = self._build_without_nvrtc
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            futures = {
                pool.submit(build_one, variant, batch): index
                for index, variant in enumerate(variants)
            }
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _build_one(self, variant: VariantSource, batch: Batch) -> BuildResult:
        try:
            instances = _instances(self.problem, variant.params, self._cubins)
        except LaunchError as error:
            return BuildResult(variant.params, None, f"no template instance: {error}")
        if instances:  # nvcc instantiates what the source names: name the instances there
            variant = instantiating(variant, instances)
        checks = f"{self.dependency_tracking} {self.verifies_values}"
        key = entry_key(self.compiler, self._fingerprint, checks, batch, variant)
        final = self.cache_dir / key[:2] / key
        cached = load(final, variant.params, batch.digests)
        if cached is not None:
            return cached
        scratch = scratch_beside(final, key)
        try:
            includes = compile_includes(self.problem, variant)
            job = Job(variant, scratch, materialize(variant, scratch), includes)
            result = self._program.compile(job, batch)
            if result.ok and instances:
                result = found_instances(result, instances)
            program = ""
            if result.ok and self.verifies_values:
                result = self._program.checked(result, job, batch)
            if result.ok and self.verifies_values:
                output = scratch / _PREPROCESSED
                argv = self._program.argv(job, output, batch)
                main = argument_path(job.source)
                program, seconds = program_digest(argv, main, output, scratch, self.timeout)
                result = replace(result, seconds=result.seconds + seconds)
            if variant.rewritten:  # point the messages at the user's files, not the copies
                result = located(result, scratch, variant)
            if result.transient:  # the machine's failure, not the variant's: never cached
                shutil.rmtree(scratch, ignore_errors=True)
                return transient(variant, result)
            dependencies = self._program.dependencies(job, batch, result.ok)
            save(scratch, result, batch.digests.of(dependencies), program)
            install(scratch, final, variant, batch.digests)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return fresh(final, variant)

    def _build_without_nvrtc(self, variant: VariantSource, batch: Batch) -> BuildResult:
        """`variant` compiled by nvcc, NVRTC's fallback, saying why NVRTC was not used."""
        return replace(self._build_one(variant, batch), fallback=self.nvrtc_unavailable)

    def _build_nvrtc(self, variant: VariantSource, batch: Batch) -> BuildResult:
        """`variant` compiled by NVRTC; by nvcc (`_build_one`) when NVRTC could not."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        try:
            instances = _instances(self.problem, variant.params, self._cubins)
        except LaunchError as error:
            return BuildResult(variant.params, None, f"no template instance: {error}")
        sliced = nvrtc.sliced(variant)
        setup = nvrtc.setup
        includes = [*compile_includes(self.problem, variant), *setup.command.includes]
        includes += setup.toolkit
        key = nvrtc.key(variant, sliced, includes, instances)
        final = self.cache_dir / key[:2] / key
        built = load(final, variant.params, batch.digests)
        if built is None:
            built = nvrtc.compile(variant, sliced, includes, instances, (final, key), batch.digests)
        if built.ok or built.transient:
            return built
        by_nvcc = self._build_one(variant, batch)
        return replace(
            by_nvcc,
            seconds=built.seconds + by_nvcc.seconds,
            cached=built.cached and by_nvcc.cached,
            fallback=built.error,
        )


def _instances(problem: Problem, params: dict[str, Number], cubins: bool) -> dict[str, str]:
    """Each template kernel's instance for `params`, by its declared name (LaunchError when a
    template argument cannot be computed); none but for a cubin build."""
    if not cubins:
        return {}
    found = {kernel.declared: kernel.instance(params) for kernel in problem.kernels}
    return {name: instance for name, instance in found.items() if instance}


def _version_line(compiler: CompilerCommand, output: str) -> str:
    """The line of `--version` that names the version: nvcc's last, other compilers' first."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if compiler.argv[0].endswith("nvcc") else lines[0]
