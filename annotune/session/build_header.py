"""`annotune build`'s work: the header for a device, worked out, checked to reach the compiler
and kept in the build cache; the tuned copies of `--shadow-dir`; the per-architecture header.

The command's common path, on unchanged files, imports neither libclang, numpy, jinja2 nor rich
(a no-op `make` pays for Python, typer and this module): so the front end, the builder's checks,
the GPU tables and the per-architecture header are imported where they are used, off that path.
Warnings and notes go to `say`, one line each, as they arise (before an error that follows).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from annotune import __version__
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.digests import text_digest
from annotune.core.files import refuse_overwrite, same_content
from annotune.emit import header_env, render_defaults_header, write_if_changed
from annotune.emit.shadow import header_values, write_copies
from annotune.emit.sizes import MARKER as SIZES_MARKER
from annotune.results.build_cache import (
    BuildRecord,
    build_key,
    file_digests,
    load_record,
    save_record,
)

if TYPE_CHECKING:
    from annotune.annotate import Problem
    from annotune.emit.arch import ArchHeader
    from annotune.transfer.headers import HeaderStandIn

Say = Callable[[str], None]
"""Where a warning or note goes: one line, as it arises."""


def header_text(
    file: Path,
    name: str,
    header: Path,
    out_dir: Path | None,
    config: Path | None,
    gpus: Path | None,
    say: Say,
) -> tuple[str, bool, Path, Problem | None]:
    """The header for device `name`, worked out without the build cache (`--shadow-dir`): its
    text, whether it is a tuned one (the device's own, or a stand-in's), its path, and the
    problem when the source was read for it."""
    if header.is_file():
        return _read(header), True, header, None
    stand_in = _stand_in(file, name, out_dir, config, gpus)
    if stand_in is not None:
        say(f"annotune: warning: {stand_in.warning}")
        return _read(stand_in.header), True, stand_in.header, None
    problem = _problem(file, config)
    _say_defaults(name, header, file, say)
    return _defaults(problem, name), False, header, problem


def checked_header(
    file: Path,
    name: str,
    header: Path,
    out: Path,
    out_dir: Path | None,
    config: Path | None,
    gpus: Path | None,
    say: Say,
) -> tuple[str, bool, Path]:
    """The header for device `name`, its values checked to reach the compiler (AnnotuneError
    when one would not): its text, whether it is a tuned one, and its path.

    From the build cache (`results.build_cache`) while the files it was worked out from hold
    the same bytes: then the source is not parsed, nor the compiler run, nor the GPU tables
    read. Else worked out, checked and recorded. A check's note is said when the check runs
    or OUT changes."""
    devices = _tuned_devices(header)
    tuned = header.parent.name in devices
    key = build_key(
        __version__,
        *(p and os.path.abspath(p) for p in (file, out, out_dir, config, gpus)),
        name,
        devices,
        [os.environ.get(variable) for variable in _ENVIRONMENT],
        os.getcwd(),  # what a relative response file or CPATH entry names
        os.path.expanduser("~"),  # where the search for a config stops
    )
    record = load_record(file, key)
    problem = None
    keep = True
    if record is None:
        before = file_digests([file])
        stand_in = None
        if not tuned:
            found = _stand_in(file, name, out_dir, config, gpus)
            stand_in = (str(found.header), found.warning) if found is not None else None
        problem = _problem(file, config)
        defaults = None if tuned or stand_in else _defaults(problem, name)
        record = BuildRecord(source_inputs(problem, file, gpus), stand_in, defaults)
        keep = before.items() <= record.inputs.items()  # else the source changed as it was read
    for path, digest in record.inputs.items():  # every file the front end read, headers too,
        what = "a file the source reads" if digest else _LOOKED_IN  # and every place looked in
        refuse_overwrite(out, "-o", {what: Path(path)})
    if not tuned and record.stand_in is not None:
        header, tuned = Path(record.stand_in[0]), True
        say(f"annotune: warning: {record.stand_in[1]}")
    if tuned:
        text = _read(header)
    else:
        text = record.defaults or _defaults(problem or _problem(file, config), name)
        _say_defaults(name, header, file, say)
    digest = text_digest(text)
    note = record.checked.get(digest)
    checking = note is None
    if note is None:
        problem = problem or _problem(file, config)
        if tuned:
            _check_reaches(problem, file, text, header)
        note, lasting = _check_compiled(problem, text, out)
        record = dataclasses.replace(record, checked={**record.checked, digest: note})
        failed = save_record(file, key, record) if keep and lasting else ""
        if failed:
            say(f"annotune: note: {failed}: the next build reads {file} again")
    if note and (checking or not same_content(out, text.encode("utf-8"))):
        say(note)
    return text, tuned, header


_LOOKED_IN = "where a header or config of the source is looked for (written, it is read)"
"""An output in a place the front end looked in and found nothing: the next build reads it."""

_ENVIRONMENT = ("PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
"""What of the environment the parse and the check depend on: which compiler runs, and where
it and libclang look."""


def _tuned_devices(header: Path) -> list[str]:
    """The devices (folder names) beside `header`'s that hold a tuned header of the same
    source: what the choice of a stand-in depends on."""
    try:
        folders = sorted(header.parent.parent.iterdir())
    except OSError:
        return []
    return [folder.name for folder in folders if (folder / header.name).is_file()]


def source_inputs(problem: Problem, file: Path, gpus: Path | None) -> dict[str, str | None]:
    """The digest of every place what `build` works out depends on: the source and every file
    the front end read, every place it looked for a header (`Problem.looked_at`: one that
    appears where none was is a change) and each response file of the compile command, the
    config, every place a config could be found or its search stops (the folders above the
    source, each config name and `.git`), and the `--gpus` table."""
    from annotune.annotate.config import CONFIG_NAMES

    start = Path(os.path.realpath(file)).parent
    names = (*CONFIG_NAMES, ".git")
    places = [folder / name for folder in (start, *start.parents) for name in names]
    config = [problem.config_file] if problem.config_file else []
    read = [file, *problem.files, *problem.looked_at, *config]
    return file_digests([*read, *places, *([gpus] if gpus else [])])


def _defaults(problem: Problem, name: str) -> str:
    return render_defaults_header(problem, device=name, tool_version=__version__)


def _say_defaults(name: str, header: Path, file: Path, say: Say) -> None:
    say(
        f"annotune: warning: no tuned header for device '{name}' ({header}); "
        f"wrote the defaults from {file}"
    )


def header_environment(text: str, header: Path, env_file: Path | None) -> dict[str, str] | None:
    """The environment the header's values are for; None for a size-aware header, whose
    sizes may each have their own (in its comment): AnnotuneError then when `env_file` asks
    for one, before OUT is written."""
    if SIZES_MARKER not in text:
        return header_env(text, str(header))
    if env_file is not None:
        raise AnnotuneError(
            f"{header} selects its values per problem size, and each size's environment is "
            "its own: --env-file cannot choose one",
            hint="its comment says each size's environment",
        )
    return None


def per_arch_header(
    file: Path,
    out: Path,
    out_dir: Path | None,
    config: Path | None,
    gpus: Path | None,
    host_device: str | None,
    say: Say,
) -> tuple[ArchHeader, bool]:
    """Write the per-architecture header of FILE to OUT (`emit.arch`); the header and whether
    OUT changed. Warnings (capabilities guessed, ties, no tuned header) go to stderr."""
    from annotune.annotate.config import find_config
    from annotune.emit.arch import render_arch_header
    from annotune.transfer.headers import arch_gpus
    from annotune.transfer.resolve import user_table

    problem = _problem(file, config)
    if problem.language != "cuda":
        raise AnnotuneError(
            f"--per-arch is for CUDA sources, and {file.name} is {problem.language}: its code "
            "is compiled for one target, so one tuned header fits it",
            Location(str(file), 1, 1),
            hint=f"build the header of each target's device: `annotune build {file} --device "
            "NAME -o OUT`",
        )
    table = user_table(gpus, config or find_config(file))
    found = arch_gpus(file, out_dir, table)
    header = render_arch_header(
        problem, found.gpus, host_device=host_device, tool_version=__version__
    )
    warnings = [*found.warnings, *header.warnings]
    if not header.choices:
        warnings.append(
            f"no tuned header of {file.name} in {found.directory}: every architecture gets the "
            "defaults"
        )
    used = [c.gpu.tuned for c in header.choices] + ([header.host] if header.host else [])
    for tuned in dict.fromkeys(used):
        _check_reaches(problem, file, _read(tuned.path), tuned.path)
    for warning in warnings:
        say(f"annotune: warning: {warning}")
    return header, write_if_changed(out, header.text)


def _stand_in(
    file: Path, device: str, out_dir: Path | None, config: Path | None, gpus: Path | None
) -> HeaderStandIn | None:
    """Another GPU's tuned header for a device with none (`annotune.transfer.headers`):
    imported only here, off the common path."""
    from annotune.annotate.config import find_config
    from annotune.transfer.headers import stand_in_header
    from annotune.transfer.resolve import user_table

    table = user_table(gpus, config or find_config(file))
    return stand_in_header(file, device, out_dir, table)


def _read(header: Path) -> str:
    try:
        return header.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AnnotuneError(f"cannot read the tuned header {header}: {error}") from None


def _problem(file: Path, config: Path | None) -> Problem:
    """The source's tuning problem: the only path that imports the front end (libclang,
    slower), taken when OUT changes or has no tuned header to come from."""
    from annotune.annotate import read_problem

    return read_problem(file, config_path=config)


def _check_reaches(problem: Problem, file: Path, text: str, header: Path) -> None:
    """AnnotuneError, at the definition that wins, when a value of the tuned header would be
    ignored: the header is then not written."""
    from annotune.builder.variants import header_ignored
    from annotune.builder.verify import macro_number
    from annotune.emit.sizes import read_size_table

    table = read_size_table(text, str(header))
    if table is None:
        values = header_values(text)
        found = [({k: macro_number(v) for k, (v, _) in values.items()}, "")]
    else:  # every size's values: the one the compiler takes is known only when it compiles
        found = [(dict(e.params), f" for {table.name} = {e.size}") for e in table.entries]
    checked = ((tuned, where, header_ignored(problem, tuned)) for tuned, where in found)
    tuned, where, ignored = next((c for c in checked if c[2]), ({}, "", []))
    if not ignored:
        return
    first, *others = ignored
    kind = (
        "pragma literal"
        if first.origin == "literal"
        else first.declaration
        if first.declaration
        else "unguarded #define"
    )
    message = (
        f"{first.name} is tuned to {tuned[first.name]}{where} ({header}), but the compiler "
        f"uses this {kind}, {first.default}: a header included with -include cannot override it"
    )
    if others:
        message += (
            " (nor "
            + ", ".join(f"{p.name} at {p.location.file}:{p.location.line}" for p in others)
            + ")"
        )
    raise AnnotuneError(
        message,
        first.location,
        hint=f"for code you own, `annotune lift {file} --write` lets the header set it; for "
        "code you must not edit, add `--shadow-dir DIR` (SHADOW in CMake's "
        "annotune_tuned_header): tuned copies of the files to compile instead",
    )


def _check_compiled(problem: Problem, text: str, out: Path) -> tuple[str, bool]:
    """AnnotuneError when the compiler, given OUT's text with `-include`, would not see its
    values: read with the compiler's own preprocessor (the config's compile command, else the
    language's default compiler), the last word after the source's definitions are read.
    A compiler that cannot be run so, or a source it cannot preprocess alone, is the line
    returned, for stderr ("" when none): the header is then written on the static check
    alone. With it, whether the outcome lasts while the files do (a timeout does not)."""
    import tempfile

    from annotune.builder.compiler import CompilerCommand, default_compiler
    from annotune.builder.verify import check_header, macro_number
    from annotune.emit.sizes import read_size_table

    if read_size_table(text, str(out)) is not None:
        return "", True  # which size's values the compiler takes is its -D's: each was checked
    values = {name: macro_number(value) for name, (value, _) in header_values(text).items()}
    settings = problem.settings
    command = (
        CompilerCommand.from_config(settings.compile)
        if settings.compile
        else default_compiler(problem.language, problem.pragmas)
    )
    with tempfile.TemporaryDirectory(prefix="annotune-build-") as scratch:
        written = Path(scratch) / out.name
        written.write_text(text, encoding="utf-8")
        result = check_header(problem, written, values, command, Path(scratch))
    if result is None:
        return (
            f"annotune: note: {command.argv[0]} cannot be run preprocess-only here: the values "
            f"the compiler sees with {out} were checked from the source alone"
        ), True
    if not result.ok and (result.transient or "preprocessing failed" in result.error):
        return (
            f"annotune: warning: {result.error}; the values the compiler sees with {out} were "
            "checked from the source alone"
        ), not result.transient
    if not result.ok:
        raise AnnotuneError(
            result.error.replace(str(written), str(out)),
            hint="a definition annotune did not read wins over the header's: it cannot "
            "be written as it is",
        )
    return "", True


def _shadow(problem: Problem, file: Path, text: str, header: Path, directory: Path) -> list[str]:
    """Write the tuned copies of FILE and its headers into `directory`; what to compile
    instead of FILE: DIR's directories first on the include path (then FILE's own, for
    headers annotune did not read), and DIR's copy of FILE."""
    from annotune.builder.variants import copy_dirs, needs_copy, variant_source
    from annotune.builder.verify import macro_number
    from annotune.emit.sizes import read_size_table

    table = read_size_table(text, str(header))
    if table is not None:
        raise AnnotuneError(
            f"{header} selects its values per {table.name}, and which size the compiler sees is "
            "known only when it compiles: they cannot be written into copies",
            hint=f"guard the tuned #defines (`annotune lift {file} --write`) and drop --shadow-dir",
        )
    values = header_values(text)
    params = {}
    for param in problem.params:
        written, line = values.get(param.name, (None, 0))
        number = param.default if written is None else macro_number(written)
        if number is None and needs_copy(param):
            raise AnnotuneError(
                f"the tuned value of {param.name}, '{written}', is not a number: annotune "
                "cannot write it into a copy",
                Location(str(header), line, 1),
            )
        params[param.name] = param.default if number is None else number
    variant = variant_source(problem, params)
    compile_args = [
        *(f"-I{directory / d}" for d in copy_dirs(variant)),
        f"-I{file.parent}",
        str(directory / variant.main),
    ]
    inputs = [*problem.files, *([problem.config_file] if problem.config_file else [])]
    try:
        write_copies(directory, variant.files, inputs, text, compile_args)
    except OSError as error:
        raise AnnotuneError(f"cannot write the copies in {directory}: {error}") from None
    return compile_args


def shadow_copies(
    problem: Problem | None,
    file: Path,
    text: str,
    header: Path,
    directory: Path,
    config: Path | None,
) -> list[str]:
    """`--shadow-dir`: the tuned copies written into `directory` (the source read when
    `problem` is None), and the arguments that compile them."""
    return _shadow(problem or _problem(file, config), file, text, header, directory)
