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
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from annotune.annotate import Problem
from annotune.annotate.frontend import ANNOTUNE_INCLUDE_DIR
from annotune.builder.compiler import (
    CompilerCommand,
    CompileResult,
    cubin_compiler,
    default_compiler,
    run_compiler,
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
    """

    def __init__(
        self,
        problem: Problem,
        *,
        compiler: CompilerCommand | None = None,
        cache_dir: Path,
        jobs: int | None = None,
        timeout: float = 300.0,
    ):
        self.problem = problem
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

    def identity(self) -> str:
        """The compile command and compiler version as a person reads them (studies are keyed
        by it); the cache key holds more: the whole version output, paths, environment."""
        return f"{self.compiler.describe()} | {self._version_line}"

    def build(self, configs: list[dict[str, Number]]) -> list[BuildResult]:
        """Build every configuration (in parallel); one result per config, in order."""
        variants = [variant_source(self.problem, c, self._originals) for c in configs]
        environment = compile_environment()
        digests = Digests()  # each dependency is read once per batch

        def build_one(variant: VariantSource) -> BuildResult:
            return self._build_one(variant, environment, digests)

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(build_one, variants))

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
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=final.parent))
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
                copies = str(scratch / "src")
                result = replace(result, error=result.error.replace(copies, str(variant.root)))
            if result.transient:  # the machine's failure, not the variant's: never cached
                shutil.rmtree(scratch, ignore_errors=True)
                return BuildResult(
                    variant.params, None, result.error, result.seconds, transient=True
                )
            dependencies = self._dependencies(variant, includes, scratch, result.ok)
            _save(scratch, result, digests.of(dependencies), program)
            (scratch / _DEPENDENCY_FILE).unlink(missing_ok=True)
            shutil.rmtree(scratch / "src", ignore_errors=True)
            if _load(final, variant.params, digests) is not None:
                shutil.rmtree(scratch, ignore_errors=True)  # another process built it meanwhile
            else:
                _discard(final)  # an entry whose dependencies changed
                try:
                    os.replace(scratch, final)
                except OSError:  # another process finished the same variant first: use theirs
                    shutil.rmtree(scratch, ignore_errors=True)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        loaded = _load(final, variant.params, None)
        assert loaded is not None
        return BuildResult(**{**loaded.__dict__, "cached": False})

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


def _version_line(compiler: CompilerCommand, output: str) -> str:
    """The line of `--version` that names the version: nvcc's last, other compilers' first."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if compiler.argv[0].endswith("nvcc") else lines[0]
