"""`annotune check`'s work without measuring: is a committed tuned header still true of this
machine? It is while everything its provenance (`emit.provenance`) records holds as it was
tuned: every file the program was built from has the same bytes, the compiler is the same
program with the same `--version`, and the device is the one it was tuned on. Each thing that
differs is a `Change`, named; a header with any is stale.

The path on unchanged files reads the header, digests the recorded files and runs the
compiler's `--version`: no libclang, numpy or search (`check` runs in every CI build, as
`build` runs in every make). Only when a file changed is the source read again, to say which
knob, domain, default or constraint changed with it: a changed file alone may change none
(a comment), and the header is stale all the same, since the program it measured is not the
one that would be built now.

Bad input (no source, a header annotune cannot read, a provenance line it cannot parse) is an
AnnotuneError; a missing header or one without provenance is a stale verdict, not an error:
the CI job must fail and say why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.core.diagnostics import AnnotuneError, Location
from annotune.emit import tuned_header_path
from annotune.emit.provenance import Provenance, read_provenance
from annotune.emit.sizes import MARKER as SIZES_MARKER
from annotune.session.provenance import (
    compiler_mark,
    current_digests,
    project_root,
)

if TYPE_CHECKING:
    from annotune.annotate import Problem

KINDS = (
    "header",
    "provenance",
    "device",
    "compiler",
    "file",
    "knob",
    "domain",
    "default",
    "constraints",
    "source",
)
"""What a change can be of, in the order they are reported."""


@dataclass(frozen=True)
class Change:
    """One thing that is not as the header was tuned with: its `kind` (one of `KINDS`), what
    it is (`name`: a file's recorded name, a knob, the compiler's command, the device), how
    it was and how it is now, as a person reads them ("" where there is nothing to say)."""

    kind: str
    name: str
    was: str
    now: str
    why: str

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "was": self.was,
            "now": self.now,
            "why": self.why,
        }


@dataclass(frozen=True)
class HeaderCheck:
    """The verdict on one header: where it is, for which device, what it records (None: no
    header, or one without provenance), what changed since, and how many files were
    compared."""

    source: Path
    header: Path
    device: str
    provenance: Provenance | None
    changes: tuple[Change, ...]
    files: int = 0

    @property
    def stale(self) -> bool:
        return bool(self.changes)

    def to_json(self) -> dict:
        p = self.provenance
        return {
            "source": str(self.source),
            "header": str(self.header),
            "device": self.device,
            "stale": self.stale,
            "changes": [c.to_json() for c in self.changes],
            "files": self.files,
            "tuned": None
            if p is None
            else {
                "date": p.date,
                "device": p.device,
                "params": dict(p.params),
                "speedup": p.speedup,
                "speedup_interval": list(p.interval) if p.interval else None,
                "compiler": p.compiler.to_json(),
                "mode": p.mode,
                "objective": p.objective,
                "annotune": p.tool_version,
            },
        }


def check_header(
    source: Path,
    *,
    device: str,
    out_dir: Path | None = None,
    config: Path | None = None,
    header: Path | None = None,
) -> HeaderCheck:
    """Whether `header` (default: `source`'s committed header for `device`, under `out_dir`)
    still holds for this machine, named `device`. AnnotuneError for bad input (the module
    docstring says which)."""
    if not source.is_file():
        raise AnnotuneError("no such file", Location(str(source), 1, 1))
    path = header if header is not None else tuned_header_path(source, device, out_dir)
    if not path.is_file():
        if header is not None:
            raise AnnotuneError("no such header", Location(str(path), 1, 1))
        why = (
            f"no tuned header for device '{device}' at {path}: `annotune build` gives this "
            "machine the defaults or another GPU's header"
        )
        return HeaderCheck(source, path, device, None, (Change("header", str(path), "", "", why),))
    text = _read(path)
    provenance = read_provenance(text, str(path))
    if provenance is None:
        what = "per problem size " if SIZES_MARKER in text else ""
        why = (
            f"the header {what}records no provenance (tuned by an annotune before it "
            "did, or written by `predict`): nothing says what it was tuned from; tune again "
            "to record it"
        )
        return HeaderCheck(
            source, path, device, None, (Change("provenance", str(path), "", "", why),)
        )
    return _compare(source, path, device, provenance, config)


def _compare(
    source: Path, path: Path, device: str, provenance: Provenance, config: Path | None
) -> HeaderCheck:
    changes: list[Change] = []
    if provenance.device != device:
        changes.append(
            Change(
                "device",
                device,
                provenance.device,
                device,
                f"tuned on '{provenance.device}', checked for '{device}'",
            )
        )
    root = _root(source, provenance, changes)
    mark = provenance.compiler
    if mark.command:
        now = compiler_mark(mark.command)
        if now.path != mark.path or now.version != mark.version:
            changes.append(
                _compiler_change(mark.command, mark.path, now.path, now.version, mark.version)
            )
    digests = current_digests(provenance.files, root)
    changed = [name for name, digest in digests.items() if provenance.files[name] != digest]
    for name in changed:
        was, now = provenance.files[name], digests[name]
        what = "appeared" if was is None else "is gone" if now is None else "changed"
        changes.append(
            Change("file", name, was or "", now or "", f"{name} {what} since it was tuned")
        )
    if changed:
        changes += _declarations(source, provenance, config)
    order = {kind: i for i, kind in enumerate(KINDS)}
    ordered = sorted(changes, key=lambda c: order[c.kind])
    return HeaderCheck(source, path, device, provenance, tuple(ordered), len(digests))


def _root(source: Path, provenance: Provenance, changes: list[Change]) -> Path:
    """The project root the files are recorded under: the source's real path less its
    recorded name. A source recorded under another name (moved, renamed, or the header of
    another source) is a change; its root is then found as a tune finds it."""
    real = Path(os.path.realpath(source))
    parts = Path(provenance.source).parts
    if parts and real.parts[-len(parts) :] == parts:
        return Path(*real.parts[: -len(parts)])
    changes.append(
        Change(
            "source",
            provenance.source,
            provenance.source,
            str(source),
            f"the header was tuned for {provenance.source}, not {source}",
        )
    )
    return project_root(source, None)


def _compiler_change(command: str, was: str, now: str, version: str, recorded: str) -> Change:
    if not now:
        why = f"{command} is not found on PATH now (it was {was})"
    elif now != was:
        why = f"{command} is {now} now, not {was}"
    elif not version:
        why = f"{command} ({now}) cannot be run for its --version now"
    else:
        why = f"{command} ({now}) prints another --version than it did"
    return Change("compiler", command, f"{was} {recorded[:12]}", f"{now} {version[:12]}", why)


def _declarations(source: Path, provenance: Provenance, config: Path | None) -> list[Change]:
    """The knobs whose declarations differ from the recorded ones, read from the source as it
    is now (the front end: imported only here, off the unchanged path). A source that no
    longer reads is itself the change."""
    from annotune.annotate import read_problem
    from annotune.session.provenance import knob_marks

    try:
        problem: Problem = read_problem(source, config_path=config)
    except AnnotuneError as error:
        return [Change("source", str(source), "", "", f"the source no longer reads: {error}")]
    marks, whole = knob_marks(problem)
    was = {m.name: m for m in provenance.knobs}
    now = {m.name: m for m in marks}
    changes = []
    for name in sorted(was.keys() - now.keys()):
        changes.append(Change("knob", name, was[name].domain, "", f"knob {name} is gone"))
    for name in sorted(now.keys() - was.keys()):
        changes.append(
            Change("knob", name, "", now[name].domain, f"knob {name} is new ({now[name].domain})")
        )
    for name in sorted(was.keys() & now.keys()):
        before, after = was[name], now[name]
        if before.domain != after.domain:
            changes.append(
                Change(
                    "domain",
                    name,
                    before.domain,
                    after.domain,
                    f"{name}'s domain is {after.domain}, was {before.domain}",
                )
            )
        elif before.default != after.default:
            changes.append(
                Change(
                    "default",
                    name,
                    before.default,
                    after.default,
                    f"{name}'s default is {after.default}, was {before.default}",
                )
            )
        elif before.digest != after.digest:
            changes.append(
                Change(
                    "knob",
                    name,
                    before.digest[:12],
                    after.digest[:12],
                    f"{name} is declared otherwise (its origin or guard)",
                )
            )
    if not changes and whole != provenance.knobs_digest:
        changes.append(Change("constraints", "", "", "", "the constraints changed"))
    return changes


def _read(header: Path) -> str:
    try:
        return header.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AnnotuneError(f"cannot read the tuned header {header}: {error}") from None
