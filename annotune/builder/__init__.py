"""Build stage: configurations in, executables (or the reason there is none) out.

Compiles run in parallel (`jobs`), each with a timeout, behind a content-hash cache: the key is
the compile command, the compiler's version and the exact bytes and flags of the variant, so a
variant is never compiled twice, failures included, and a changed source or flag never reuses
a stale binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
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
from annotune.builder.variants import (
    VariantSource,
    materialize,
    original_include_dir,
    read_files,
    variant_source,
)
from annotune.core.records import BuildResult, KernelResources, Number

__all__ = ["Builder", "CompilerCommand", "cubin_compiler", "default_compiler"]

_RESULT_FILE = "result.json"
_PROGRAM = "program"


class Builder:
    """Compiles configurations of one problem into a cache directory."""

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
        self.compiler = compiler or default_compiler(problem.language)
        self.cache_dir = cache_dir
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout = timeout
        self._originals = read_files(problem)
        self._compiler_identity = _compiler_identity(self.compiler)

    def identity(self) -> str:
        """The compile command and compiler version: part of every result's key."""
        return f"{self.compiler.describe()} | {self._compiler_identity}"

    def build(self, configs: list[dict[str, Number]]) -> list[BuildResult]:
        """Build every configuration (in parallel); one result per config, in order."""
        variants = [variant_source(self.problem, c, self._originals) for c in configs]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(self._build_one, variants))

    def _key(self, variant: VariantSource) -> str:
        h = hashlib.sha256(self.identity().encode())
        h.update(variant.digest().encode())
        return h.hexdigest()

    def _build_one(self, variant: VariantSource) -> BuildResult:
        key = self._key(variant)
        final = self.cache_dir / key[:2] / key
        cached = _load(final, variant.params)
        if cached is not None:
            return cached
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=final.parent))
        try:
            source = materialize(variant, scratch)
            argv = self.compiler.render(
                source,
                scratch / _PROGRAM,
                list(variant.defines),
                [str(ANNOTUNE_INCLUDE_DIR), original_include_dir(variant)],
            )
            result = run_compiler(argv, self.timeout)
            if variant.rewritten:  # point the messages at the user's files, not the copies
                copies = str(scratch / "src")
                result = replace(result, error=result.error.replace(copies, str(variant.root)))
            if result.transient:  # the machine's failure, not the variant's: never cached
                shutil.rmtree(scratch, ignore_errors=True)
                return BuildResult(
                    variant.params, None, result.error, result.seconds, transient=True
                )
            _save(scratch, result)
            shutil.rmtree(scratch / "src", ignore_errors=True)
            try:
                os.replace(scratch, final)
            except OSError:  # another process finished the same variant first: use theirs
                shutil.rmtree(scratch, ignore_errors=True)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        loaded = _load(final, variant.params)
        assert loaded is not None
        return BuildResult(**{**loaded.__dict__, "cached": False})


def _save(directory: Path, result: CompileResult) -> None:
    data = {
        "ok": result.ok,
        "error": result.error,
        "seconds": result.seconds,
        "resources": {k: asdict(v) for k, v in result.resources.items()},
    }
    (directory / _RESULT_FILE).write_text(json.dumps(data, indent=1))


def _load(directory: Path, params: dict[str, Number]) -> BuildResult | None:
    try:
        data = json.loads((directory / _RESULT_FILE).read_text())
    except (OSError, ValueError):
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
    )


def _compiler_identity(compiler: CompilerCommand) -> str:
    """The first line of `<compiler> --version` (empty if it cannot be run)."""
    try:
        done = subprocess.run(
            [compiler.argv[0], "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return lines[-1] if compiler.argv[0].endswith("nvcc") and lines else (lines[0] if lines else "")
