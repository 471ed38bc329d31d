"""`annotune build FILE -o OUT`: the tuned header for this machine's device, for a Makefile.

Copies `OUT_DIR/<device-slug>/<stem>.h` to OUT. When that device has no tuned header, the one
of the nearest GPU of the same vendor and architecture that has one stands in (GPUs known from
annotune's table, `--gpus FILE` or the config's `[[gpu]]`; `annotune.transfer.headers`), else
the defaults read from FILE's annotations are written; either with one warning on stderr. OUT is
rewritten only when its content changes (make then rebuilds only what really changed) and always
atomically, so any number of `make -j` jobs may build the same OUT at once. OUT may also be a
device or FIFO (`-o /dev/stdout`): written in place, never read to compare; a full one
(`/dev/full`) is an error, exit 2. OUT is checked before any work (`cli.params.output_file`).

A header included with `-include` cannot override an unguarded `#define` or a pragma literal.
So before OUT takes a new tuned header, the source is read and every tuned value checked: one
the compiler would not see is an error at the definition that wins, and OUT is left alone.
`--shadow-dir DIR` is the way out for code the user must not edit: tuned copies of the source
and its headers in DIR (`emit.shadow`), and the arguments that compile them printed.

What a build works out from the source (the defaults header, the stand-in chosen, that a
header's values reach the compiler) is kept in the build cache (`results.build_cache`), keyed
by the bytes of every file it read: the common path, on unchanged files, whether the header is
a tuned one or the defaults, parses nothing, runs no compiler and imports neither libclang,
numpy, jinja2 nor rich (a no-op `make` pays for Python, typer and this). A file changed since
(a vendored header too) is read and checked again, even when OUT is up to date. With
`--shadow-dir`, DIR's manifest stands in for the parse.

`--env-file FILE` writes the environment the header's values are for (its `ANNOTUNE_ENV_`
macros: the config's `[file.env]` at the tuned values, `OMP_NUM_THREADS=4` of a tuned thread
count) as `export NAME=VALUE` lines, each value quoted for the shell, for a job script to source
(`. FILE`) before it runs the program; `--json` gives it as `env`. Like OUT, FILE is rewritten
only when it changes. A size-aware header (`tune --sizes`) has no one environment: each size
has its own, so `env` is null and `--env-file` an error.

`--per-arch` (CUDA sources) writes instead one header that holds every GPU's committed tuned
header, for a binary built for several architectures (`emit.arch`): device code chooses by
`__CUDA_ARCH__`, the host by a generated function of the compute capability. Each GPU's
capability comes from the GPU tables (`transfer.headers.arch_gpus`). It always parses the
source (a quarter of a second), since the defaults and the parameters come from there.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from annotune.cli.app import JsonFlag, app, print_json, user_errors
from annotune.cli.params import GpusOption, device_name, output_dir, output_file
from annotune.core.diagnostics import AnnotuneError, Location, printable
from annotune.core.files import refuse_overwrite
from annotune.emit import header_args, tuned_header_path, write_if_changed
from annotune.emit.shadow import recorded_compile
from annotune.run.device import DEVICE_ENV, current_device_name
from annotune.session.build_header import (
    checked_header,
    header_environment,
    header_text,
    per_arch_header,
    shadow_copies,
)

if TYPE_CHECKING:
    from annotune.emit.arch import ArchHeader


@app.command()
def build(
    file: Annotated[Path, typer.Argument(help="The annotated source the header belongs to.")],
    out: Annotated[
        Path,
        typer.Option("--output", "-o", callback=output_file, help="The header to write."),
    ],
    device: Annotated[
        str | None,
        typer.Option(
            callback=device_name,
            help=f"Device name (default: ${DEVICE_ENV}, else this machine's GPU or CPU).",
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            file_okay=False, help="Where tuned headers live (default: tuned/ beside FILE)."
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Config file, read when the source is read."),
    ] = None,
    shadow_dir: Annotated[
        Path | None,
        typer.Option(
            callback=output_dir,
            help="Also write tuned copies of FILE and its headers here, for code you must not "
            "edit, and print what to compile instead of FILE.",
        ),
    ] = None,
    per_arch: Annotated[
        bool,
        typer.Option(
            "--per-arch",
            help="CUDA: one header with every GPU's tuned values, chosen by __CUDA_ARCH__ in "
            "device code and by compute capability at run time, for a binary built for "
            "several architectures (-gencode).",
        ),
    ] = False,
    host_device: Annotated[
        str | None,
        typer.Option(
            help="With --per-arch: the tuned GPU whose values the host pass's macros take "
            "(default: the defaults).",
        ),
    ] = None,
    gpus: GpusOption = None,
    env_file: Annotated[
        Path | None,
        typer.Option(
            callback=output_file,
            help="Also write the environment the header's values are for (the config's "
            "[file.env] at them) here, as `export NAME=VALUE` lines to source before a run.",
        ),
    ] = None,
    json: JsonFlag = False,
) -> None:
    """Write the tuned header of FILE for this device to OUT (the defaults if it has none)."""
    with user_errors():
        if not file.is_file():
            raise AnnotuneError("no such file", Location(str(file), 1, 1))
        _refuse_inputs(file, out, env_file, config, gpus)
        if per_arch and env_file is not None:
            raise AnnotuneError(
                "--env-file goes without --per-arch: a binary for several GPUs has one "
                "environment per GPU",
                hint="write each GPU's: `annotune build FILE --device NAME -o OUT --env-file ENV`",
            )
        if per_arch or host_device is not None:
            _per_arch_options(per_arch, device, shadow_dir)
            header, changed = per_arch_header(file, out, out_dir, config, gpus, host_device, _say)
            if json:
                _print_per_arch(header, out, changed)
            return
        name = device or current_device_name()
        header = tuned_header_path(file, name, out_dir)
        if shadow_dir is not None:
            text, tuned, header, problem = header_text(
                file, name, header, out_dir, config, gpus, _say
            )
            compile_args = recorded_compile(shadow_dir, text) if tuned else None
            if compile_args is None:
                compile_args = shadow_copies(problem, file, text, header, shadow_dir, config)
        else:
            compile_args = None
            text, tuned, header = checked_header(
                file, name, header, out, out_dir, config, gpus, _say
            )
        env = header_environment(text, header if tuned else out, env_file)
        args = header_args(text, str(header if tuned else out))
        changed = write_if_changed(out, text)
        if env_file is not None and env is not None:
            write_if_changed(env_file, _exports(env))
    if json:
        print_json(
            {
                "device": name,
                "header": str(header) if tuned else None,
                "output": str(out),
                "changed": changed,
                "shadow": compile_args,
                "env": env,
                "args": args,
            }
        )
    elif compile_args is not None:
        print(shlex.join(compile_args))


def _exports(env: dict[str, str]) -> str:
    """`env` as lines a POSIX shell sources: names are C identifiers (the config and
    `header_env` allow no other), values quoted with shlex."""
    lines = [f"export {name}={shlex.quote(value)}\n" for name, value in env.items()]
    return "# the environment of the tuned values (annotune build --env-file)\n" + "".join(lines)


def _per_arch_options(per_arch: bool, device: str | None, shadow_dir: Path | None) -> None:
    """AnnotuneError for options that do not go with --per-arch, or need it."""
    if not per_arch:
        raise AnnotuneError("--host-device goes with --per-arch")
    if device is not None:
        raise AnnotuneError(
            "--per-arch takes every tuned GPU's header; --device picks one: give one of them"
        )
    if shadow_dir is not None:
        raise AnnotuneError(
            "--per-arch cannot go with --shadow-dir: a copy of the source holds one value per "
            "parameter, not one per architecture",
            hint="guard the parameters with `annotune lift FILE --write`, then use --per-arch",
        )


def _print_per_arch(header: ArchHeader, out: Path, changed: bool) -> None:
    print_json(
        {
            "output": str(out),
            "changed": changed,
            "architectures": [
                {
                    "arch": choice.arch,
                    "device": choice.gpu.tuned.device,
                    "kind": choice.gpu.tuned.kind,
                    "measurements": choice.gpu.tuned.measurements,
                    "header": str(choice.gpu.tuned.path),
                    "passed_over": [o.tuned.device for o in choice.passed_over],
                }
                for choice in header.choices
            ],
            "host": header.host.device if header.host else None,
        }
    )


def _say(line: str) -> None:
    """A warning or a note on stderr, `printable`: it names the source, the device (from
    `--device` or `$ANNOTUNE_DEVICE`, which may hold anything) and the headers' paths."""
    print(printable(line), file=sys.stderr)


def _refuse_inputs(
    file: Path, out: Path, env_file: Path | None, config: Path | None, gpus: Path | None
) -> None:
    """No output over an input: the source, the config, the GPU table, the results database,
    or the other output (the files the source includes are checked once they are known)."""
    from annotune.results.workspace import default_db_path

    inputs = {
        "the source": file,
        "the config": config,
        "the GPU table (--gpus)": gpus,
        "the results database": default_db_path(file),
    }
    refuse_overwrite(out, "-o", {**inputs, "the --env-file": env_file})
    if env_file is not None:
        refuse_overwrite(env_file, "--env-file", {**inputs, "the -o file": out})
