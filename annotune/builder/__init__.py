"""Build stage: configurations in, executables (or the reason there is none) out.

Compiles run in parallel (`jobs`), each with a timeout, behind a content-hash cache, so a
variant is never compiled twice, failures included, and no input change reuses a stale
binary. An entry's key covers the compile command, the compiler (its whole `--version`
output, the program's resolved path), the environment that changes compiles
(`dependencies.COMPILE_ENVIRONMENT`) and the exact bytes and flags of the variant; the entry
itself records every other file the compile read with its digest, and is rebuilt when any of
them changed (`dependencies`). A compiled variant is then read back with the compiler's own
preprocessor: a tuned macro without its value there (another definition won) makes it a
failed build, so that no measurement is recorded for values the program did not have
(`verify`), and hashed as the preprocessor reads it: configurations that are the same
program share one measurement (`preprocessed`).

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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType

from annotune.annotate import Problem
from annotune.annotate.device_code import NVRTC_PRELUDE, DeviceCode
from annotune.annotate.frontend import ANNOTUNE_INCLUDE_DIR
from annotune.builder.compiler import (
    CompilerCommand,
    CompileResult,
    cubin_compiler,
    default_compiler,
    run_compiler,
    sm,
)
from annotune.builder.dependencies import (
    Digests,
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
from annotune.builder.variants import (
    VariantSource,
    copies_first,
    materialize,
    original_include_dir,
    read_files,
    variant_source,
)
from annotune.builder.verify import check_values, checks_values, tuned_macros
from annotune.core.inputs import argument_path
from annotune.core.records import BuildResult, KernelResources, Number

__all__ = ["Builder", "CompilerCommand", "cubin_compiler", "default_compiler"]

_RESULT_FILE = "result.json"
_PROGRAM = "program"
_DEPENDENCY_FILE = "dependencies.d"
_MACROS = "macros.txt"
_PREPROCESSED = "preprocessed.i"
_PRELUDE = "annotune_nvrtc_prelude.h"


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


class Builder:
    """Compiles configurations of one problem into a cache directory.

    `dependency_tracking` says whether the compiler reports the files each compile read
    (`-MD -MF`; gcc, clang, nvcc, nvc). When it is False (a compiler annotune does not know),
    a cache entry is checked against the variant's files and the include directories on the
    command line only: a header found some other way can be edited without a rebuild, which
    the session should tell the user.

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
        self._command_inputs = command_inputs(self.compiler.argv)
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
        environment = compile_environment()
        digests = Digests()  # each dependency is read once per batch
        build_one = self._build_one if self._nvrtc is None else self._build_nvrtc
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            futures = {
                pool.submit(build_one, variant, environment, digests): index
                for index, variant in enumerate(variants)
            }
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _key(self, variant: VariantSource, environment: str) -> str:
        h = hashlib.sha256(self.compiler.describe().encode())
        checks = f"{self.dependency_tracking} {self.verifies_values}"
        for part in (self._fingerprint, checks, environment):
            h.update(b"\0" + part.encode(errors="surrogateescape"))
        h.update(variant.digest().encode())
        return h.hexdigest()

    def _build_one(self, variant: VariantSource, environment: str, digests: Digests) -> BuildResult:
        key = self._key(variant, environment)
        final = self.cache_dir / key[:2] / key
        cached = _load(final, variant.params, digests)
        if cached is not None:
            return cached
        scratch = _scratch(final, key)
        try:
            source = materialize(variant, scratch)
            includes = [
                str(ANNOTUNE_INCLUDE_DIR),
                original_include_dir(variant),
                *self.problem.include_dirs,  # the config's `include`: what libclang read too
            ]
            argv = self._command(variant, source, scratch / _PROGRAM, includes, scratch)
            if self.dependency_tracking:
                argv += dependency_flags(scratch / _DEPENDENCY_FILE)
            result = run_compiler(argv, self.timeout)
            program = ""
            if result.ok and self.verifies_values:
                result = self._checked(result, variant, source, includes, scratch)
            if result.ok and self.verifies_values:
                program, seconds = self._program(variant, source, includes, scratch)
                result = replace(result, seconds=result.seconds + seconds)
            if variant.rewritten:  # point the messages at the user's files, not the copies
                result = _located(result, scratch, variant)
            if result.transient:  # the machine's failure, not the variant's: never cached
                shutil.rmtree(scratch, ignore_errors=True)
                return _transient(variant, result)
            dependencies = self._dependencies(variant, includes, scratch, result.ok)
            _save(scratch, result, digests.of(dependencies), program)
            (scratch / _DEPENDENCY_FILE).unlink(missing_ok=True)
            _install(scratch, final, variant, digests)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return _fresh(final, variant)

    def _build_nvrtc(
        self, variant: VariantSource, environment: str, digests: Digests
    ) -> BuildResult:
        """`variant` compiled by NVRTC; by nvcc (`_build_one`) when NVRTC could not."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        sliced = {
            name: nvrtc.device_code.slice(os.path.join(variant.root, name), data)
            for name, data in variant.files.items()
        }
        checks = value_checks(tuned_macros(self.problem.params, variant.params))
        sliced[variant.main] += checks.encode()
        includes = [
            str(ANNOTUNE_INCLUDE_DIR),
            original_include_dir(variant),
            *self.problem.include_dirs,
            *nvrtc.toolkit,
        ]
        key = self._nvrtc_key(variant, sliced, includes)
        final = self.cache_dir / key[:2] / key
        built = _load(final, variant.params, digests)
        if built is None:
            built = self._compile_nvrtc(variant, sliced, includes, final, key, digests)
        if built.ok or built.transient:
            return built
        by_nvcc = self._build_one(variant, environment, digests)
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
        final: Path,
        key: str,
        digests: Digests,
    ) -> BuildResult:
        """NVRTC's build of `variant` from its sliced files, cached under `final`."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
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
                self.timeout,
            )  # fmt: skip
            result, program = nvrtc.pool.compile(request)
            result = _located(result, scratch, variant)
            result = replace(result, error=result.error.replace(str(prelude), "<NVRTC prelude>"))
            result = self._kernels_named(result, scratch / _PROGRAM)
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

    def _kernels_named(self, result: CompileResult, cubin: Path) -> CompileResult:
        """`result`, or a failure when NVRTC's cubin lacks a kernel under the name kernel mode
        launches it by: NVRTC's int64_t is `long long` (libcu++'s), glibc's `long`, so a
        kernel taking one has another mangled name, which the runner would not find."""
        if not result.ok:
            return result
        for kernel in self.problem.kernels:
            if kernel.mangled_name not in result.resources:
                cubin.unlink(missing_ok=True)
                named = ", ".join(sorted(result.resources)) or "none"
                said = f"compile failed: NVRTC has no kernel {kernel.mangled_name} (its: {named})"
                return CompileResult(False, result.seconds, said)
        return result

    def _nvrtc_key(
        self, variant: VariantSource, sliced: dict[str, bytes], includes: list[str]
    ) -> str:
        """NVRTC's library, the options but the scratch paths, the prelude and the sliced
        files' bytes (the main one with its value checks)."""
        nvrtc = self._nvrtc
        assert nvrtc is not None
        options = nvrtc_options(nvrtc.arch, variant.defines, includes, "")
        h = hashlib.sha256(b"nvrtc")
        for part in (nvrtc.fingerprint, "\0".join(options), nvrtc.prelude, variant.main):
            h.update(b"\0" + part.encode(errors="surrogateescape"))
        for name in sorted(sliced):
            h.update(name.encode() + b"\0" + hashlib.sha256(sliced[name]).digest())
        return h.hexdigest()

    def _command(
        self, variant: VariantSource, source: Path, output: Path, includes: list[str], scratch: Path
    ) -> list[str]:
        """The compile of `source` into `output`; rewritten copies come before their originals
        on every include path."""
        argv = self.compiler.render(source, output, list(variant.defines), includes)
        return copies_first(argv, variant, scratch / "src") if variant.rewritten else argv

    def _checked(
        self,
        compiled: CompileResult,
        variant: VariantSource,
        source: Path,
        includes: list[str],
        scratch: Path,
    ) -> CompileResult:
        """`compiled`, or why its program does not have the tuned values (`verify`); one
        preprocessor run more, counted in its time."""
        macros = tuned_macros(self.problem.params, variant.params)
        if not macros:
            return compiled
        dump = scratch / _MACROS
        argv = self._command(variant, source, dump, includes, scratch)
        checked = check_values(argv, argument_path(source), dump, macros, self.timeout)
        dump.unlink(missing_ok=True)
        seconds = compiled.seconds + checked.seconds
        if checked.ok:
            return replace(compiled, seconds=seconds)
        (scratch / _PROGRAM).unlink(missing_ok=True)  # built from other values than the tuned
        return replace(checked, seconds=seconds)

    def _program(
        self, variant: VariantSource, source: Path, includes: list[str], scratch: Path
    ) -> tuple[str, float]:
        """The variant's preprocessed program's hash (`preprocessed`) and its seconds."""
        output = scratch / _PREPROCESSED
        argv = self._command(variant, source, output, includes, scratch)
        return program_digest(argv, argument_path(source), output, scratch, self.timeout)

    def _dependencies(
        self, variant: VariantSource, includes: list[str], scratch: Path, ok: bool
    ) -> list[str]:
        """The files a compile depended on: the compiler's list, less the variant's rewritten
        copies (its key holds their bytes); what annotune knows where there is no list, and
        added to it for a failed compile, which a new header in an include directory may mend.
        """
        listed = read_dependency_file(scratch / _DEPENDENCY_FILE)
        copies = os.path.abspath(scratch) + os.sep
        paths = [p for p in listed or [] if not os.path.abspath(p).startswith(copies)]
        if listed is None or not ok:
            paths += [str(variant.root / name) for name in variant.files]
            paths += includes + self._command_inputs
        return paths


def _save(
    directory: Path, result: CompileResult, dependencies: dict[str, str], program: str
) -> None:
    data = {
        "program": program,
        "ok": result.ok,
        "error": result.error,
        "seconds": result.seconds,
        "resources": {k: asdict(v) for k, v in result.resources.items()},
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
        prelude=NVRTC_PRELUDE,
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
