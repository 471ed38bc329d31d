"""A tuned header's provenance (`emit.provenance`) worked out at the end of a tune, and the
pieces of it that `annotune check` works out again to compare: the files by their recorded
names, the knobs' declarations, the compiler's identity.

Which files: those `annotune build`'s record depends on (`build_header.source_inputs`: the
source, every file the front end read, every place it looked for a header or a config) and
those the compile command names itself (other sources, objects, libraries, response files:
`builder.dependencies.command_files`), each where it lies under the project's root (the
nearest folder above the source holding `.git`, else the config's folder above it, else the
source's own). Files outside it (the C library's headers, the CUDA toolkit's) belong to the
compiler's installation, which the compiler's identity stands for; recording each by its bytes
would make every header stale on a machine whose libc had a patch release. annotune's own
files (its timing header) and `.git` (a worktree's is a file naming its path) are left out.

Importing this module is cheap (`check`'s path on unchanged files runs it): the builder is
imported only where a tune's compile command is read.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import annotune
from annotune import __version__
from annotune.core.digests import text_digest
from annotune.core.tools import version_output
from annotune.emit.provenance import CompilerMark, KnobMark, Provenance
from annotune.results.build_cache import file_digests
from annotune.session.build_header import source_inputs

if TYPE_CHECKING:
    from annotune.annotate import Problem
    from annotune.core.records import Number

_OWN = os.path.dirname(os.path.realpath(annotune.__file__))


def tuned_from(
    problem: Problem,
    params: Mapping[str, Number],
    *,
    device: str,
    compile_argv: Iterable[str] | None,
    mode: str,
    objective: str,
    speedup: float | None,
    interval: tuple[float, float] | None,
    today: datetime.date | None = None,
) -> Provenance:
    """The provenance of `problem`'s header tuned to `params` on `device` with the compile
    command `compile_argv` (None: nothing compiled, a replay device): what the module
    docstring lists, now."""
    argv = tuple(compile_argv) if compile_argv is not None else ()
    root = project_root(problem.source, problem.config_file)
    inputs = _config_places(problem, source_inputs(problem, problem.source, None))
    if argv:
        from annotune.builder.dependencies import command_files

        inputs.update(file_digests(command_files(argv).files))
    knobs, digest = knob_marks(problem)
    files = recorded_files(inputs, root)
    return Provenance(
        device=device,
        date=(today or datetime.date.today()).isoformat(),
        source=next(iter(recorded_files({os.path.abspath(problem.source): None}, root))),
        knobs=knobs,
        knobs_digest=digest,
        files=files,
        compiler=compiler_mark(argv[0]) if argv else CompilerMark("", "", ""),
        mode=mode,
        objective=objective,
        params=dict(params),
        speedup=speedup,
        interval=interval,
        tool_version=__version__,
    )


def _config_places(problem: Problem, inputs: Mapping[str, str | None]) -> dict[str, str | None]:
    """`inputs` less the places a config was looked for that cannot change which one is read:
    those above the config found (the search stops there), and every pyproject.toml but the
    config itself (one is a config only while it holds [tool.annotune]; recording its bytes
    would make a version bump of the project stale every header)."""
    from annotune.annotate.config import CONFIG_NAMES

    config = os.path.abspath(problem.config_file) if problem.config_file else None
    above = Path(config).parent.parents if config else ()
    kept = {}
    for path, digest in inputs.items():
        place = Path(path)
        ignored = place.name == "pyproject.toml" or place.parent in above
        if path != config and place.name in CONFIG_NAMES and ignored:
            continue
        kept[path] = digest
    return kept


def project_root(source: Path, config: str | None) -> Path:
    """The folder a header's files are recorded relative to: the nearest above `source`
    holding `.git`, else `config`'s when it lies above the source, else the source's own."""
    start = Path(os.path.realpath(source)).parent
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    if config is not None:
        folder = Path(os.path.realpath(config)).parent
        if folder == start or folder in start.parents:
            return folder
    return start


def recorded_files(inputs: Mapping[str, str | None], root: Path) -> dict[str, str | None]:
    """`inputs` (absolute path -> digest) by the names a header records: relative to `root`
    (POSIX separators) for those under it, leaving out what the module docstring says."""
    recorded = {}
    for path, digest in inputs.items():
        real = os.path.realpath(path)
        if real == _OWN or real.startswith(_OWN + os.sep) or ".git" in Path(path).parts:
            continue
        try:
            relative = Path(path).relative_to(root)
        except ValueError:
            try:  # the source named through a link to a folder under the root
                relative = Path(real).relative_to(root)
            except ValueError:
                continue
        recorded[relative.as_posix()] = digest
    return dict(sorted(recorded.items()))


def current_digests(files: Iterable[str], root: Path) -> dict[str, str | None]:
    """The digest of each recorded name's file now (None: none there), by recorded name."""
    return {name: next(iter(file_digests([root / name]).values())) for name in files}


def knob_marks(problem: Problem) -> tuple[tuple[KnobMark, ...], str]:
    """Each knob's mark, and one digest of every knob's declaration and the constraints:
    what the search space was. A knob's location is left out: a line added above it moves
    it, and changes nothing of what was tuned."""
    marks = []
    for param in problem.params:
        declared = {
            "name": param.name,
            "origin": param.origin,
            "domain": param.domain,
            "values": [repr(v) for v in param.values],
            "default": repr(param.default),
            "guarded": param.guarded,
            "declaration": param.declaration,
        }
        text = json.dumps(declared, sort_keys=True)
        marks.append(
            KnobMark(param.name, param.domain, param.literal(param.default), text_digest(text))
        )
    constraints = [c.text for c in problem.constraints]
    whole = json.dumps({"knobs": [m.digest for m in marks], "constraints": constraints})
    return tuple(marks), text_digest(whole)


def compiler_mark(command: str) -> CompilerMark:
    """The compiler `command` names as it is found now: the program (links followed; "" when
    none is on PATH) and the digest of its `--version` output ("" when it cannot be run)."""
    found = shutil.which(command)
    path = os.path.realpath(found) if found else ""
    output = version_output(command) if found else ""
    return CompilerMark(command, path, text_digest(output) if output else "")
