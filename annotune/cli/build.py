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
from typing import Annotated

import typer

from annotune.api.build import build as api_build
from annotune.api.build import build_per_arch
from annotune.cli.app import JsonFlag, app, print_json, user_errors
from annotune.cli.params import GpusOption, HeaderDevice, HeaderDir, output_dir, output_file
from annotune.core.diagnostics import AnnotuneError, printable


@app.command()
def build(
    file: Annotated[Path, typer.Argument(help="The annotated source the header belongs to.")],
    out: Annotated[
        Path,
        typer.Option("--output", "-o", callback=output_file, help="The header to write."),
    ],
    device: HeaderDevice = None,
    out_dir: HeaderDir = None,
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
        if per_arch and env_file is not None:
            raise AnnotuneError(
                "--env-file goes without --per-arch: a binary for several GPUs has one "
                "environment per GPU",
                hint="write each GPU's: `annotune build FILE --device NAME -o OUT --env-file ENV`",
            )
        if per_arch or host_device is not None:
            _per_arch_options(per_arch, device, shadow_dir)
            arch = build_per_arch(
                file,
                output=out,
                out_dir=out_dir,
                config=config,
                gpus=gpus,
                host_device=host_device,
                on_warning=_say,
            )
            if json:
                print_json(arch.to_json())
            return
        built = api_build(
            file,
            output=out,
            device=device,
            out_dir=out_dir,
            config=config,
            shadow_dir=shadow_dir,
            gpus=gpus,
            env_file=env_file,
            on_warning=_say,
        )
    if json:
        print_json(built.to_json())
    elif built.shadow is not None:
        print(shlex.join(built.shadow))


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


def _say(line: str) -> None:
    """A warning or a note on stderr, `printable`: it names the source, the device (from
    `--device` or `$ANNOTUNE_DEVICE`, which may hold anything) and the headers' paths."""
    print(printable(line), file=sys.stderr)
