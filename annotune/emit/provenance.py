"""What a tuned header was tuned from, written into the header itself: one comment line,
`annotune-provenance: {JSON}`, that `annotune check` reads back to tell whether the header is
still true of the code, the compiler and the device.

Why a line in the header and not a sidecar file: the header is what teams commit, what `build`
copies and what code review sees; a sidecar can be left behind, copied without it or go out of
step with it, and then `check` would vouch for values it never saw. One line of JSON in the
comment the header already has changes nothing the compiler reads, and the same convention
holds a size-aware header's entries (`emit.sizes`). JSON is written ASCII-only with `*/`
spelled `*\\/` (the same string to a JSON reader), so that no value can end the comment.

The record holds: the knobs' declarations (each knob's digest, domain and default, and one
digest of them all with the constraints), every file the measured program was built from (by
path relative to the project's root where it lies under it, so that a checkout elsewhere, a CI
runner's, reads the same names; absolute otherwise) with its digest (None: no file there, its
appearing is a change), the compiler (the command as named, the program it resolved to, a
digest of its whole `--version` output), the device, the mode and objective, the date, and the
final check's speedup with its interval. A header without the line (written by an annotune
before it) stays valid for `build`: `read_provenance` says None.

The date makes a re-tune's header differ from the last one even where the values do not; its
measured times already do, so a re-tune was never a no-op in git.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from annotune.core.diagnostics import AnnotuneError, Location

MARKER = "annotune-provenance:"
VERSION = 1
"""The record's own format; a newer one than this annotune reads is bad input, not stale."""
_LINE = re.compile(r"^ \* " + re.escape(MARKER) + r" ?(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class KnobMark:
    """One knob as it was declared: its domain and default as written, and a digest of all
    of its declaration (origin, values, guard, kind), whose change `check` names."""

    name: str
    domain: str
    default: str
    digest: str

    def to_json(self) -> dict:
        return {"name": self.name, "domain": self.domain, "default": self.default,
                "digest": self.digest}  # fmt: skip


@dataclass(frozen=True)
class CompilerMark:
    """The compiler as the tune ran it: `command` as the compile command names it (`gcc`,
    `/opt/nvidia/bin/nvcc`), `path` the program that resolved to (links followed; "" when none
    was found), `version` the digest of all its `--version` output."""

    command: str
    path: str
    version: str

    def to_json(self) -> dict:
        return {"command": self.command, "path": self.path, "version": self.version}


@dataclass(frozen=True)
class Provenance:
    """What a tuned header was tuned from (the module docstring says why each is there).
    `source`: the source's name relative to the project root (which `check` finds from it);
    `files`: path (relative to the project root, or absolute) -> digest or None; `knobs_digest`
    covers every knob and the constraints; `speedup` and `interval` are the final check's (None:
    none claimed); `params` the tuned values; `date` ISO 8601, a day."""

    device: str
    date: str
    source: str
    knobs: tuple[KnobMark, ...]
    knobs_digest: str
    files: Mapping[str, str | None]
    compiler: CompilerMark
    mode: str = "program"
    objective: str = "time"
    params: Mapping[str, int | float] = field(default_factory=dict)
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    tool_version: str = ""

    def to_json(self) -> dict:
        return {
            "format": VERSION,
            "device": self.device,
            "date": self.date,
            "source": self.source,
            "knobs": [k.to_json() for k in self.knobs],
            "knobs_digest": self.knobs_digest,
            "files": dict(self.files),
            "compiler": self.compiler.to_json(),
            "mode": self.mode,
            "objective": self.objective,
            "params": dict(self.params),
            "speedup": self.speedup,
            "speedup_interval": list(self.interval) if self.interval else None,
            "annotune": self.tool_version,
        }


def provenance_line(provenance: Provenance) -> str:
    """The comment line's text after ` * `: the marker and the record as one line of JSON that
    cannot end a C comment."""
    text = json.dumps(provenance.to_json(), sort_keys=True, ensure_ascii=True)
    return f"{MARKER} " + text.replace("*/", "*\\/")


def read_provenance(text: str, path: str) -> Provenance | None:
    """The provenance a header records; None for one without (an older annotune's, a defaults
    header). AnnotuneError at its line when the line is there but not a record annotune reads
    (edited by hand, cut short, a newer format)."""
    found = _LINE.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    try:
        data = json.loads(found.group(1))
        if not isinstance(data, dict):
            raise TypeError("not an object")
        if data.get("format") != VERSION:
            raise ValueError(f"format {data.get('format')!r}, and this annotune reads {VERSION}")
        return _record(data)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise AnnotuneError(
            f"this header's provenance ({MARKER}) is not one annotune reads: {error}",
            Location(path, line, 4),
            hint="regenerate the header with `annotune tune`",
        ) from None


def _record(data: Mapping) -> Provenance:
    compiler = data["compiler"]
    interval = data["speedup_interval"]
    files = data["files"]
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in files.items()
    ):
        raise TypeError("files must map paths to digests")
    params = data["params"]
    if not isinstance(params, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in params.values()
    ):
        raise TypeError("params must map names to numbers")
    return Provenance(
        device=_text(data["device"]),
        date=_text(data["date"]),
        source=_text(data["source"]),
        knobs=tuple(
            KnobMark(_text(k["name"]), _text(k["domain"]), _text(k["default"]), _text(k["digest"]))
            for k in data["knobs"]
        ),
        knobs_digest=_text(data["knobs_digest"]),
        files=dict(files),
        compiler=CompilerMark(
            _text(compiler["command"]), _text(compiler["path"]), _text(compiler["version"])
        ),
        mode=_text(data["mode"]),
        objective=_text(data["objective"]),
        params=dict(params),
        speedup=None if data["speedup"] is None else float(data["speedup"]),
        interval=None if interval is None else (float(interval[0]), float(interval[1])),
        tool_version=_text(data.get("annotune", "")),
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
