"""Build stage: configurations in, executables (or the reason there is none) out.

Compiles run in parallel (`jobs`), each with a timeout, behind a content-hash cache, so a
variant is never compiled twice, failures included, and no input change reuses a stale
binary. An entry's key covers the compile command, the compiler (its whole `--version`
output, the program's resolved path), the environment that changes compiles
(`dependencies.COMPILE_ENVIRONMENT`), the bytes of every file the command names (other
sources, objects, libraries, response files) and the exact bytes and flags of the variant; the
entry itself records every other file each translation unit read with its digest, and is
rebuilt when any of them changed (`dependencies`). A compiled variant is then read back with
the compiler's own preprocessor, in each translation unit: a tuned macro without its value
there (another definition won) makes it a failed build, so that no measurement is recorded for
values the program did not have (`verify`), and hashed as the preprocessor reads it:
configurations that are the same program share one measurement (`preprocessed`).

A program has one value per knob. A rewritten header reaches the tuned source through its copy,
but another unit of the command (`{source} file.c`, both including "header.h" beside them)
would find the original beside itself; such a unit is compiled from a copy too, made beside the
variant's copies with every file it reads under their root (`_copy_unit`).

Kernel mode compiles cubins with NVRTC when it can (`nvrtc`: the user's files sliced to their
device code, in a pool of worker processes). Its entries are keyed by NVRTC's library, the
options, the prelude and every sliced file's bytes, and depend on the user's files (whose bytes
the key already holds), annotune's include directory and the toolkit's top-level headers (a
toolkit update changes those), plus every include directory for a failed compile. A variant
NVRTC fails on is compiled by nvcc's cubin command, with every check above: the NVRTC entry
keeps why (`BuildResult.fallback`), nvcc's entry its result. Results come back as each build
finishes (`build_iter`), so that a session can measure one while the pool compiles the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import TracebackType

from annotune.annotate import Problem
from annotune.annotate.device_code import DeviceCode
from annotune.annotate.kernels import LaunchError
from annotune.annotate.source import ANNOTUNE_INCLUDE_DIR
from annotune.builder.compiler import (
    CompilerCommand,
    CompileResult,
    cubin_compiler,
    default_compiler,
    run_compiler,
    sm,
)
from annotune.builder.dependencies import (
    CommandInputs,
    Digests,
    command_files,
    command_inputs,
    compile_environment,
    compiler_fingerprint,
    dependency_flags,
    read_dependency_file,
    tracks_dependencies,
    version_output,
)
from annotune.builder.nvrtc import (
    NvrtcPool,
    NvrtcRequest,
    nvrtc_fingerprint,
    nvrtc_options,
    nvrtc_unavailable,
    nvrtc_version,
    toolkit_include_dirs,
    value_checks,
)
from annotune.builder.preprocessed import program_digest
from annotune.builder.symbols import instance_symbol
from annotune.builder.variants import (
    VariantSource,
    copies_first,
    materialize,
    needs_copy,
    original_include_dir,
    read_files,
    rewritten_originals,
    under_root,
    variant_source,
)
from annotune.builder.verify import (
    Tuned,
    check_values,
    checks_values,
    dependency_command,
    source_inputs,
    tuned_macros,
)
from annotune.core.inputs import SOURCE, argument_path, read_input
from annotune.core.records import BuildResult, KernelResources, Number

__all__ = ["Builder", "CompilerCommand", "cubin_compiler", "default_compiler"]

_RESULT_FILE = "result.json"
_PROGRAM = "program"
_DEPENDENCY_FILE = "dependencies.d"
_MACROS = "macros.txt"
_PREPROCESSED = "preprocessed.i"
_PRELUDE = "annotune_nvrtc_prelude.h"
_OUTSIDE = (
    " ({unit} is outside {root}, where annotune copies the files it compiles: move it there, "
    "or have it include the header through an -I directory)"
)


@dataclass(frozen=True)
class _Nvrtc:
    """What every NVRTC compile of one builder shares."""

    arch: tuple[int, int]
    device_code: DeviceCode
    prelude: str
    version: str  # as people read it
    fingerprint: str  # what keys the cache
    toolkit: tuple[str, ...]  # the toolkit's include directories
    pool: NvrtcPool


@dataclass(frozen=True)
class _Batch:
    """What the builds of one batch share: the environment that changes compiles, each file's
    digest (read once per batch), and the files the compile command names."""

    environment: str
    digests: Digests
    command: CommandInputs


@dataclass
class _Job:
    """One variant's compile in `scratch`. `units`: the command's translation units as it
    compiles them, the tuned source first; `copied`: each unit compiled from a copy, as the
    command names it, and its copy; `mirrored`: the directories (relative to the variant's
    root) of the files copied with them; `outside`: the units that needed a copy and lie
    outside that root; `reads`: the files each unit read (None: unknown)."""

    variant: VariantSource
    scratch: Path
    source: Path
    includes: list[str]
    units: list[str] = field(default_factory=list)
    copied: dict[str, str] = field(default_factory=dict)
    mirrored: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    reads: dict[str, list[str] | None] = field(default_factory=dict)
    seconds: float = 0.0  # the dependency lists'


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

    `nvrtc_arch` without a `compiler` asks for NVRTC cubins for that architecture (nvcc's
    cubin command compiles what NVRTC cannot). `nvrtc_unavailable` says why NVRTC was asked
    for and is not used (the package is missing, the problem has no `device_code`, NVRTC does
    not know the architecture): then nvcc compiles every variant, and the session should say
    so. It is "" when NVRTC is used or was not asked for. A builder that may have started
    NVRTC's worker processes is closed (`close()`, or `with`).
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
        nvrtc_asked = compiler is None and nvrtc_arch is not None
        if nvrtc_asked:
            compiler = cubin_compiler(nvrtc_arch)  # NVRTC's fallback, or all when NVRTC is out
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
        self._set_in = {  # a macro only a copy sets: the file that sets it
            p.name: os.path.realpath(p.value_span.file)
            for p in problem.params
            if needs_copy(p) and p.value_span is not None
        }
        self._cubins = "-cubin" in self.compiler.argv  # kernel mode's builds
        self.nvrtc_unavailable = ""
        self._nvrtc: _Nvrtc | None = None
        if nvrtc_asked and nvrtc_arch is not None:
            self.nvrtc_unavailable = _nvrtc_missing(problem, nvrtc_arch)
            if not self.nvrtc_unavailable:
                self._nvrtc = _nvrtc_setup(problem, nvrtc_arch, self.jobs)

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
            self._nvrtc.pool.close()

    def identity(self) -> str:
        """The compile command and compiler version as a person reads them (studies are keyed
        by it); the cache key holds more: the whole version output, paths, environment. With
        NVRTC: its version and architecture, and the nvcc command of its fallback."""
        nvcc = f"{self.compiler.describe()} | {self._version_line}"
        if self._nvrtc is None:
            return nvcc
        nvrtc = self._nvrtc
        return f"NVRTC {nvrtc.version} --gpu-architecture={sm(nvrtc.arch)}; fallback: {nvcc}"

    def program_inputs(self) -> str:
        """A digest of every file the compile command reads beyond the tuned source's own
        files: the files it names (other sources, objects, libraries, response files) and the
        headers each other translation unit reads (one `-M` run each, on the originals); ""
        for a command that reads nothing else. A study's measurements belong to this digest
        too: they were of a program built from those bytes, and an edit of `other.c` makes
        another program."""
        command = command_files(self.compiler.argv)
        digests = Digests(self._settled)
        files = list(command.files)
        with tempfile.TemporaryDirectory(prefix="annotune-inputs-") as scratch:
            listing = Path(scratch) / _DEPENDENCY_FILE
            default = {p.name: p.default for p in self.problem.params}
            variant = variant_source(self.problem, default, self._originals)
            source = variant.root / variant.main
            argv = command.expand(
                self.compiler.render(
                    source, listing, list(variant.defines), self._includes(variant)
                )
            )
            main = argument_path(source)
            units = [u for u in source_inputs(argv) if u != main]
            for unit in dict.fromkeys(units if self.dependency_tracking else []):
                done = run_compiler(dependency_command(argv, unit), self.timeout)
                files += (read_dependency_file(listing) or []) if done.ok else [unit]
        if not files:
            return ""  # a command of one source: its files are the study's content already
        h = hashlib.sha256()
        for path in sorted(dict.fromkeys(os.path.abspath(f) for f in files)):
            h.update(os.fsencode(f"{path}\0{digests(path)}\n"))
        return h.hexdigest()

    def _includes(self, variant: VariantSource) -> list[str]:
        """The include directories annotune gives a variant's compile: its timing header's,
        the source's own, and the config's `include` (what libclang read too)."""
        return [
            str(ANNOTUNE_INCLUDE_DIR),
            original_include_dir(variant),
            *self.problem.include_dirs,
        ]

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
        batch = _Batch(compile_environment(), digests, command_files(self.compiler.argv))
        build_one = self._build_one if self._nvrtc is None else self._build_nvrtc
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

    def _key(self, variant: VariantSource, batch: _Batch) -> str:
        """The command, the compiler, the checks made, the environment, the bytes of every file
        the command names (other sources, objects, libraries, response files) and the
        variant's; the headers the compile reads are in its entry (`dependencies`)."""
        h = hashlib.sha256(self.compiler.describe().encode())
        checks = f"{self.dependency_tracking} {self.verifies_values}"
        for part in (self._fingerprint, checks, batch.environment):
            h.update(b"\0" + part.encode(errors="surrogateescape"))
        for path in batch.command.files:
            named = f"{path}\0{batch.digests(path)}"
            h.update(b"\0" + named.encode(errors="surrogateescape"))
        h.update(os.fsencode(variant.digest()))
        return h.hexdigest()

    def _instances(self, params: dict[str, Number]) -> dict[str, str]:
        """Each template kernel's instance for `params`, by kernel name (LaunchError when a
        template argument cannot be computed); none but for a cubin build."""
        if not self._cubins:
            return {}
        found = {kernel.name: kernel.instance(params) for kernel in self.problem.kernels}
        return {name: instance for name, instance in found.items() if instance}

    def _build_one(self, variant: VariantSource, batch: _Batch) -> BuildResult:
        try:
            instances = self._instances(variant.params)
        except LaunchError as error:
            return BuildResult(variant.params, None, f"no template instance: {error}")
        if instances:  # nvcc instantiates what the source names: name the instances there
            variant = _instantiating(variant, instances)
        key = self._key(variant, batch)
        final = self.cache_dir / key[:2] / key
        cached = _load(final, variant.params, batch.digests)
        if cached is not None:
            return cached
        scratch = _scratch(final, key)
        try:
            job = _Job(variant, scratch, materialize(variant, scratch), self._includes(variant))
            result = self._compile(job, batch)
            if result.ok and instances:
                result = _found_instances(result, instances)
            program = ""
            if result.ok and self.verifies_values:
                result = self._checked(result, job, batch)
            if result.ok and self.verifies_values:
                output = scratch / _PREPROCESSED
                argv = self._argv(job, output, batch)
                main = argument_path(job.source)
                program, seconds = program_digest(argv, main, output, scratch, self.timeout)
                result = replace(result, seconds=result.seconds + seconds)
            if variant.rewritten:  # point the messages at the user's files, not the copies
                result = _located(result, scratch, variant)
            if result.transient:  # the machine's failure, not the variant's: never cached
                shutil.rmtree(scratch, ignore_errors=True)
                return _transient(variant, result)
            dependencies = self._dependencies(job, batch, result.ok)
            _save(scratch, result, batch.digests.of(dependencies), program)
            _install(scratch, final, variant, batch.digests)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return _fresh(final, variant)

    def _compile(self, job: _Job, batch: _Batch) -> CompileResult:
        """Compile `job`, learning what each translation unit read: from the compile itself
        (`-MD -MF`) when it has one, else from one `-M` run per unit first, where a unit that
        reads the original of a file the variant rewrites is given a copy (`_copy_unit`)."""
        listing = job.scratch / _DEPENDENCY_FILE
        main = argument_path(job.source)
        analysed = self._argv(job, job.scratch / _PROGRAM, batch)
        job.units = list(dict.fromkeys([main, *source_inputs(analysed)]))
        several = len(job.units) > 1 and self.dependency_tracking
        if several:
            failed = self._read_units(job, batch)
            if failed is not None:
                return failed
        argv = self._argv(job, job.scratch / _PROGRAM, batch, as_written=True)
        if self.dependency_tracking and not several:
            argv += dependency_flags(listing)
        result = run_compiler(argv, self.timeout)
        if not several:
            job.reads[main] = read_dependency_file(listing)
            listing.unlink(missing_ok=True)
        return replace(result, seconds=result.seconds + job.seconds)

    def _read_units(self, job: _Job, batch: _Batch) -> CompileResult | None:
        """Fill `job.reads` unit by unit, copying the units that would read another value than
        the variant's; a transient failure of a `-M` run (then the compile is not tried)."""
        rewritten = rewritten_originals(job.variant, self._originals)
        for index, unit in enumerate(list(job.units)):
            done, reads = self._reads(job, unit, batch)
            if done.transient:
                return done
            read = {os.path.realpath(path) for path in reads or ()}
            if index and read & rewritten and (copy := self._copy_unit(job, unit, reads)):
                job.units[index] = unit = copy
                done, reads = self._reads(job, copy, batch)
                if done.transient:
                    return done
            job.reads[unit] = reads
        return None

    def _reads(self, job: _Job, unit: str, batch: _Batch) -> tuple[CompileResult, list[str] | None]:
        """The `-M` run of one unit of the command, and the files it lists (None: it failed)."""
        listing = job.scratch / _DEPENDENCY_FILE
        argv = self._argv(job, listing, batch)
        done = run_compiler(dependency_command(argv, unit), self.timeout)
        job.seconds += done.seconds
        reads = read_dependency_file(listing) if done.ok else None
        listing.unlink(missing_ok=True)
        return done, reads

    def _copy_unit(self, job: _Job, unit: str, reads: list[str] | None) -> str | None:
        """Copy `unit` and every file it reads under the variant's root (a rewritten one is
        already there) into the variant's copies, so that its quoted includes find the copies
        first as the tuned source's do; the copy's path, or None when `unit` lies outside the
        root (it keeps reading the original, and the read-back check names it)."""
        variant = job.variant
        relative = under_root(variant, unit)
        if relative is None:
            job.outside.append(unit)
            return None
        copies = job.scratch / "src"
        for path in [unit, *(reads or ())]:
            name = under_root(variant, path)
            if name is None or _within(path, copies) or (copies / name).exists():
                continue
            (copies / name).parent.mkdir(parents=True, exist_ok=True)
            (copies / name).write_bytes(read_input(Path(path), SOURCE))
            job.mirrored.append(os.path.dirname(name))
        job.copied[unit] = copy = argument_path(copies / relative)
        return copy

    def _build_nvrtc(self, variant: VariantSource, batch: _Batch) -> BuildResult:
        """`variant` compiled by NVRTC; by nvcc (`_build_one`) when NVRTC could not."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        try:
            instances = self._instances(variant.params)
        except LaunchError as error:
            return BuildResult(variant.params, None, f"no template instance: {error}")
        sliced = {
            name: nvrtc.device_code.slice(os.path.join(variant.root, name), data)
            for name, data in variant.files.items()
        }
        checks = value_checks(tuned_macros(self.problem.params, variant.params))
        sliced[variant.main] += checks.encode()
        includes = [*self._includes(variant), *nvrtc.toolkit]
        key = self._nvrtc_key(variant, sliced, includes, instances)
        final = self.cache_dir / key[:2] / key
        built = _load(final, variant.params, batch.digests)
        if built is None:
            built = self._compile_nvrtc(
                variant, sliced, includes, instances, (final, key), batch.digests
            )
        if built.ok or built.transient:
            return built
        by_nvcc = self._build_one(variant, batch)
        return replace(
            by_nvcc,
            seconds=built.seconds + by_nvcc.seconds,
            cached=built.cached and by_nvcc.cached,
            fallback=built.error,
        )

    def _compile_nvrtc(
        self,
        variant: VariantSource,
        sliced: dict[str, bytes],
        includes: list[str],
        instances: dict[str, str],
        entry: tuple[Path, str],
        digests: Digests,
    ) -> BuildResult:
        """NVRTC's build of `variant` from its sliced files, cached in the entry `(final, key)`;
        `instances`: the template kernels' (`_instances`)."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        final, key = entry
        scratch = _scratch(final, key)
        try:
            copies = scratch / "src"
            for name, data in sliced.items():
                (copies / name).parent.mkdir(parents=True, exist_ok=True)
                (copies / name).write_bytes(data)
            prelude = scratch / _PRELUDE
            prelude.write_text(nvrtc.prelude)
            flags = copies_first([f"-I{d}" for d in includes], variant, copies)
            options = nvrtc_options(nvrtc.arch, variant.defines, flags, str(prelude))
            main = copies / variant.main
            request = NvrtcRequest(
                str(main), sliced[variant.main], tuple(options), str(scratch / _PROGRAM),
                self.timeout, tuple(instances.values()),
            )  # fmt: skip
            result, program = nvrtc.pool.compile(request)
            result = _located(result, scratch, variant)
            result = replace(result, error=result.error.replace(str(prelude), "<NVRTC prelude>"))
            result = self._kernels_named(result, scratch / _PROGRAM, instances)
            if result.transient:
                shutil.rmtree(scratch, ignore_errors=True)
                return _transient(variant, result)
            dependencies = [*(str(variant.root / name) for name in variant.files)]
            dependencies += [str(ANNOTUNE_INCLUDE_DIR), *nvrtc.toolkit]
            if not result.ok:  # a header added to an include directory may mend it
                dependencies += includes
            _save(scratch, result, digests.of(dependencies), program)
            prelude.unlink()
            _install(scratch, final, variant, digests)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return _fresh(final, variant)

    def _kernels_named(
        self, result: CompileResult, cubin: Path, instances: dict[str, str]
    ) -> CompileResult:
        """`result` with each template kernel's symbol (NVRTC lowered its instance), or a
        failure when NVRTC's cubin lacks a kernel under the name kernel mode launches it by:
        NVRTC's int64_t is `long long` (libcu++'s), glibc's `long`, so a kernel taking one
        has another mangled name, which the runner would not find."""
        if not result.ok:
            return result
        symbols = {}
        for kernel in self.problem.kernels:
            instance = instances.get(kernel.name, "")
            symbol = result.symbols.get(instance, "") if instance else kernel.mangled_name
            if symbol not in result.resources:
                cubin.unlink(missing_ok=True)
                named = ", ".join(sorted(result.resources)) or "none"
                said = f"compile failed: NVRTC has no kernel {instance or symbol} (its: {named})"
                return CompileResult(False, result.seconds, said)
            if instance:
                symbols[kernel.name] = symbol
        return replace(result, symbols=symbols)

    def _nvrtc_key(
        self,
        variant: VariantSource,
        sliced: dict[str, bytes],
        includes: list[str],
        instances: dict[str, str],
    ) -> str:
        """NVRTC's library, the options but the scratch paths, the prelude, the template
        instances asked for and the sliced files' bytes (the main one with its value checks)."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        options = nvrtc_options(nvrtc.arch, variant.defines, includes, "")
        named = "\0".join(instances.values())
        h = hashlib.sha256(b"nvrtc")
        for part in (nvrtc.fingerprint, "\0".join(options), nvrtc.prelude, named, variant.main):
            h.update(b"\0" + part.encode(errors="surrogateescape"))
        for name in sorted(sliced):
            h.update(os.fsencode(name) + b"\0" + hashlib.sha256(sliced[name]).digest())
        return h.hexdigest()

    def _argv(self, job: _Job, output: Path, batch: _Batch, as_written: bool = False) -> list[str]:
        """The compile of `job` into `output`: rewritten copies come before their originals on
        every include path, the units copied replace theirs. Response files are expanded
        (every unit in sight, as each run on one unit needs), but `as_written` keeps them as
        the user wrote them unless a unit they name was copied."""
        variant = job.variant
        argv = self.compiler.render(job.source, output, list(variant.defines), job.includes)
        if variant.rewritten:
            argv = copies_first(argv, variant, job.scratch / "src", job.mirrored)
        if as_written and not job.copied:
            return argv
        return [job.copied.get(arg, arg) for arg in batch.command.expand(argv)]

    def _checked(self, compiled: CompileResult, job: _Job, batch: _Batch) -> CompileResult:
        """`compiled`, or why its program does not have the tuned values (`verify`), checked in
        each translation unit that reads them: the tuned source, every macro; another unit,
        the `-D` macros and those set in a file it read. One preprocessor run more per unit
        checked, counted in its time."""
        macros = tuned_macros(self.problem.params, job.variant.params)
        if not macros:
            return compiled
        dump = job.scratch / _MACROS
        argv = self._argv(job, dump, batch)
        seconds = compiled.seconds
        for index, unit in enumerate(job.units):
            read = self._macros_read(macros, job, unit) if index else macros
            if not read:
                continue
            named = unit if index else ""  # the tuned source's messages need no name
            checked = check_values(argv, unit, dump, read, self.timeout, named)
            dump.unlink(missing_ok=True)
            seconds += checked.seconds
            if not checked.ok:
                (job.scratch / _PROGRAM).unlink(missing_ok=True)  # built from other values
                if unit in job.outside:
                    said = checked.error + _OUTSIDE.format(unit=unit, root=job.variant.root)
                    checked = replace(checked, error=said)
                return replace(checked, seconds=seconds)
        return replace(compiled, seconds=seconds)

    def _macros_read(self, macros: list[Tuned], job: _Job, unit: str) -> list[Tuned]:
        """Those of `macros` that `unit` reads: a `-D` one, or one set in a file it read (all
        of them when what it read is unknown)."""
        reads = job.reads.get(unit)
        if reads is None:
            return macros
        read = {os.path.realpath(self._original(job, path)) for path in reads}
        return [m for m in macros if m.name not in self._set_in or self._set_in[m.name] in read]

    def _original(self, job: _Job, path: str) -> str:
        """The user's file of which `path` is the variant's copy; `path` itself otherwise."""
        copies = job.scratch / "src"
        if not _within(path, copies):
            return path
        return str(job.variant.root / os.path.relpath(os.path.abspath(path), copies))

    def _dependencies(self, job: _Job, batch: _Batch, ok: bool) -> list[str]:
        """The files a compile depended on: every unit's list, each copy of a user's file as
        that file, less the variant's own (its key holds their bytes); what annotune knows
        where a list is missing, and added to them for a failed compile, which a new header
        in an include directory may mend: the variant's files, the include directories and
        forced includes, each other unit's directory (its quoted includes look there first)."""
        variant = job.variant
        paths: list[str] = []
        for listed in job.reads.values():
            for path in listed or ():
                original = self._original(job, path)
                if original == path or under_root(variant, original) not in variant.files:
                    paths.append(original)
        if not ok or None in job.reads.values():
            paths += [str(variant.root / name) for name in variant.files]
            paths += job.includes + command_inputs(batch.command.expand(self.compiler.argv))
            others = [self._original(job, unit) for unit in job.units[1:]]
            paths += [os.path.dirname(os.path.join(os.getcwd(), unit)) for unit in others]
        return paths


def _within(path: str, directory: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(directory) + os.sep)


def _save(
    directory: Path, result: CompileResult, dependencies: dict[str, str], program: str
) -> None:
    data = {
        "program": program,
        "ok": result.ok,
        "error": result.error,
        "seconds": result.seconds,
        "resources": {k: asdict(v) for k, v in result.resources.items()},
        "symbols": result.symbols,
        "dependencies": dependencies,
    }
    (directory / _RESULT_FILE).write_text(json.dumps(data, indent=1))


def _load(
    directory: Path, params: dict[str, Number], digests: Digests | None
) -> BuildResult | None:
    """The entry's result; None when there is none, or (given `digests`) when a file it
    depended on changed since it was built."""
    try:
        data = json.loads((directory / _RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    dependencies = data.get("dependencies")
    if digests is not None and not (
        isinstance(dependencies, dict) and digests.unchanged(dependencies)
    ):
        return None
    program = directory / _PROGRAM
    ok = data.get("ok") and program.exists()
    return BuildResult(
        params=params,
        executable=program if ok else None,
        error="" if ok else data.get("error") or "compile failed",
        seconds=float(data.get("seconds", 0.0)),
        cached=True,
        resources={k: KernelResources(**v) for k, v in data.get("resources", {}).items()},
        program=str(data.get("program") or "") if ok else "",
        symbols=dict(data.get("symbols") or {}) if ok else {},
    )


def _discard(entry: Path) -> None:
    """Remove a cache entry, first renaming it so that no reader sees it half deleted."""
    aside = entry.with_name(f"{entry.name}.stale.{os.getpid()}.{threading.get_ident()}")
    try:
        os.replace(entry, aside)
    except OSError:  # none there, or another process moved it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def _scratch(final: Path, key: str) -> Path:
    """A fresh directory beside the entry `final`, where its build is made."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=final.parent))


def _located(result: CompileResult, scratch: Path, variant: VariantSource) -> CompileResult:
    """`result` with its messages pointing at the user's files, not at their copies."""
    copies = str(scratch / "src")
    return replace(result, error=result.error.replace(copies, str(variant.root)))


def _instantiating(variant: VariantSource, instances: dict[str, str]) -> VariantSource:
    """`variant` with its main file naming each template kernel's instance at its end, in host
    code, which makes nvcc instantiate it: kernel mode launches it, the program may not."""
    lines = [b"\n/* annotune: the template instances kernel mode launches */\n"]
    lines += [
        f"static void *const annotune_instance_{index} __attribute__((unused)) = "
        f"(void *)&{instance};\n".encode()
        for index, instance in enumerate(instances.values())
    ]
    files = {**variant.files, variant.main: variant.files[variant.main] + b"".join(lines)}
    return replace(variant, files=files, rewritten=True)


def _found_instances(result: CompileResult, instances: dict[str, str]) -> CompileResult:
    """`result` with each template kernel's symbol, found among the kernels of nvcc's cubin;
    a failure when one is not there (once)."""
    symbols = {}
    for name, instance in instances.items():
        symbol = instance_symbol(instance, result.resources)
        if symbol is None:
            named = ", ".join(sorted(result.resources)) or "none"
            said = f"compile failed: nvcc's cubin has no kernel {instance} (its: {named})"
            return CompileResult(False, result.seconds, said)
        symbols[name] = symbol
    return replace(result, symbols=symbols)


def _transient(variant: VariantSource, result: CompileResult) -> BuildResult:
    return BuildResult(variant.params, None, result.error, result.seconds, transient=True)


def _install(scratch: Path, final: Path, variant: VariantSource, digests: Digests) -> None:
    """Make the finished build in `scratch` the entry `final`, unless another process made
    one meanwhile (then theirs is kept)."""
    shutil.rmtree(scratch / "src", ignore_errors=True)
    if _load(final, variant.params, digests) is not None:
        shutil.rmtree(scratch, ignore_errors=True)
        return
    _discard(final)  # an entry whose dependencies changed
    try:
        os.replace(scratch, final)
    except OSError:  # another process finished the same variant first: use theirs
        shutil.rmtree(scratch, ignore_errors=True)


def _fresh(final: Path, variant: VariantSource) -> BuildResult:
    """The entry just installed, as this batch's compile (not served from the cache)."""
    loaded = _load(final, variant.params, None)
    assert loaded is not None
    return replace(loaded, cached=False)


def _nvrtc_missing(problem: Problem, arch: tuple[int, int]) -> str:
    """Why NVRTC cannot compile `problem`'s kernels for `arch`; "" when it can."""
    if problem.device_code is None:
        return (
            "NVRTC needs the kernels' device code, which annotune did not find: kernels "
            "compile with nvcc"
        )
    return nvrtc_unavailable(arch)


def _nvrtc_setup(problem: Problem, arch: tuple[int, int], jobs: int) -> _Nvrtc:
    assert problem.device_code is not None
    return _Nvrtc(
        arch=arch,
        device_code=problem.device_code,
        prelude=problem.device_code.prelude,
        version=nvrtc_version(),
        fingerprint=nvrtc_fingerprint(),
        toolkit=tuple(toolkit_include_dirs()),
        pool=NvrtcPool(jobs),
    )


def _version_line(compiler: CompilerCommand, output: str) -> str:
    """The line of `--version` that names the version: nvcc's last, other compilers' first."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if compiler.argv[0].endswith("nvcc") else lines[0]
