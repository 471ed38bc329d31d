"""Tuned copies for `annotune build --shadow-dir DIR`, and the tuned values a header holds.

A header included with `-include` cannot change an unguarded `#define` or a pragma literal: the
source's own text comes later and wins. For code the user must not edit, `build` writes copies
of the source and its local headers into DIR with the tuned values written in (the rewriting
the builder does for variants), laid out as the originals so that every quoted include finds a
copy; the Makefile compiles DIR's copy of the source with DIR's directories first on the
include path.

A manifest in DIR records what the copies were made from (the tuned header's text, the digest
of every original, the directory `build` ran in) and what to compile. While all of that holds, a
no-op `make` reads the manifest instead of parsing the source, as the header alone is copied
without parsing. This module only reads and writes files: the fast path may import it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError
from annotune.core.digests import bytes_digest, file_digest, text_digest
from annotune.core.files import read_regular, replace_atomically

MANIFEST = ".annotune-shadow.json"

_DEFINE = re.compile(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.*?)[ \t]*(?:/[*/].*)?")


def header_values(text: str) -> dict[str, tuple[str, int]]:
    """The object-like macros a header defines: name -> (value as written, 1-based line), the
    last definition of each."""
    found = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DEFINE.fullmatch(line)
        if match is not None and match.group(2):
            found[match.group(1)] = (match.group(2), number)
    return found


def recorded_compile(directory: Path, header_text: str) -> list[str] | None:
    """What to compile instead of the source, as recorded in DIR's manifest, when the copies
    there were made from this header, in this working directory, from the originals as they
    are now, and are themselves untouched; None otherwise (the copies must be made again)."""
    data = _manifest(directory)
    if not isinstance(data, dict) or not _strings(data.get("compile")):
        return None
    inputs, copies = data.get("inputs"), data.get("copies")
    if not (isinstance(inputs, dict) and isinstance(copies, dict)):
        return None
    current = (
        data.get("header") == text_digest(header_text)
        and data.get("made_in") == os.getcwd()
        and all(file_digest(path) == digest for path, digest in inputs.items())
        and all(file_digest(str(directory / name)) == digest for name, digest in copies.items())
    )
    return data["compile"] if current else None


def write_copies(
    directory: Path,
    copies: dict[str, bytes],
    inputs: list[str],
    header_text: str,
    compile_args: list[str],
) -> None:
    """Write each copy (`copies`: path relative to DIR -> bytes) where its bytes change,
    atomically; remove the copies an earlier run wrote that are no longer made; record the
    manifest. AnnotuneError when a copy would land on one of the originals (`inputs`)."""
    originals = {os.path.realpath(path) for path in inputs}
    for name in copies:
        if os.path.realpath(directory / name) in originals:
            raise AnnotuneError(
                f"the copy of {name} would overwrite the original in {directory}",
                hint="give --shadow-dir a directory of its own, e.g. build/shadow",
            )
    previous = _recorded_copies(directory)
    for name, data in copies.items():
        target = directory / name
        if file_digest(str(target)) != bytes_digest(data):
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_atomically(target, data)
    inside = os.path.realpath(directory)
    for name in previous - copies.keys():
        stale = os.path.realpath(directory / name)
        if os.path.commonpath([inside, stale]) == inside and stale not in originals:
            Path(stale).unlink(missing_ok=True)
    manifest = {
        "header": text_digest(header_text),
        "made_in": os.getcwd(),
        "inputs": {os.path.abspath(path): file_digest(path) for path in inputs},
        "copies": {name: bytes_digest(data) for name, data in copies.items()},
        "compile": compile_args,
    }
    directory.mkdir(parents=True, exist_ok=True)
    replace_atomically(directory / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))


def _manifest(directory: Path) -> object:
    """DIR's manifest as parsed JSON; None when there is none or it is no JSON (a regular
    file only: what is there is only compared, and a FIFO or device must not hang `make`)."""
    data = read_regular(directory / MANIFEST)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def _recorded_copies(directory: Path) -> set[str]:
    data = _manifest(directory)
    copies = data.get("copies") if isinstance(data, dict) else None
    return set(copies) if isinstance(copies, dict) else set()


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
