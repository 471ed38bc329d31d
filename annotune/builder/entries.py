"""A build's cache entry on disk: its directory's files, written, read back and installed.

An entry is a directory named by its key: the program, and `result.json` with the compile's
result and every file it depended on with that file's digest. It is made in a scratch directory
beside it and renamed into place, so that no reader sees one half written, and read back only
while every dependency's digest still matches (`Digests.unchanged`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from annotune.builder.compiler import CompilerCommand, CompileResult
from annotune.builder.dependencies import CommandInputs, Digests
from annotune.builder.variants import VariantSource
from annotune.core.records import BuildResult, KernelResources, Number

RESULT_FILE = "result.json"
PROGRAM = "program"
DEPENDENCY_FILE = "dependencies.d"


@dataclass(frozen=True)
class Batch:
    """What the builds of one batch share: the environment that changes compiles, each file's
    digest (read once per batch), and the files the compile command names."""

    environment: str
    digests: Digests
    command: CommandInputs



def entry_key(
    compiler: CompilerCommand, fingerprint: str, checks: str, batch: Batch, variant: VariantSource
) -> str:
    """The command, the compiler (`fingerprint`), the `checks` made, the environment, the bytes
    of every file the command names (other sources, objects, libraries, response files) and
    the variant's; the headers the compile reads are in its entry (`dependencies`)."""
    h = hashlib.sha256(compiler.describe().encode())
    for part in (fingerprint, checks, batch.environment):
        h.update(b"\0" + part.encode(errors="surrogateescape"))
    for path in batch.command.files:
        named = f"{path}\0{batch.digests(path)}"
        h.update(b"\0" + named.encode(errors="surrogateescape"))
    h.update(os.fsencode(variant.digest()))
    return h.hexdigest()


def within(path: str, directory: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(directory) + os.sep)


def save(
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
    (directory / RESULT_FILE).write_text(json.dumps(data, indent=1))


def load(
    directory: Path, params: dict[str, Number], digests: Digests | None
) -> BuildResult | None:
    """The entry's result; None when there is none, or (given `digests`) when a file it
    depended on changed since it was built."""
    try:
        data = json.loads((directory / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    dependencies = data.get("dependencies")
    if digests is not None and not (
        isinstance(dependencies, dict) and digests.unchanged(dependencies)
    ):
        return None
    program = directory / PROGRAM
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


def discard(entry: Path) -> None:
    """Remove a cache entry, first renaming it so that no reader sees it half deleted."""
    aside = entry.with_name(f"{entry.name}.stale.{os.getpid()}.{threading.get_ident()}")
    try:
        os.replace(entry, aside)
    except OSError:  # none there, or another process moved it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def scratch_beside(final: Path, key: str) -> Path:
    """A fresh directory beside the entry `final`, where its build is made."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=final.parent))


def located(result: CompileResult, scratch: Path, variant: VariantSource) -> CompileResult:
    """`result` with its messages pointing at the user's files, not at their copies."""
    copies = str(scratch / "src")
    return replace(result, error=result.error.replace(copies, str(variant.root)))


def transient(variant: VariantSource, result: CompileResult) -> BuildResult:
    return BuildResult(variant.params, None, result.error, result.seconds, transient=True)


def install(scratch: Path, final: Path, variant: VariantSource, digests: Digests) -> None:
    """Make the finished build in `scratch` the entry `final`, unless another process made
    one meanwhile (then theirs is kept)."""
    shutil.rmtree(scratch / "src", ignore_errors=True)
    if load(final, variant.params, digests) is not None:
        shutil.rmtree(scratch, ignore_errors=True)
        return
    discard(final)  # an entry whose dependencies changed
    try:
        os.replace(scratch, final)
    except OSError:  # another process finished the same variant first: use theirs
        shutil.rmtree(scratch, ignore_errors=True)


def fresh(final: Path, variant: VariantSource) -> BuildResult:
    """The entry just installed, as this batch's compile (not served from the cache)."""
    loaded = load(final, variant.params, None)
    assert loaded is not None
    return replace(loaded, cached=False)
