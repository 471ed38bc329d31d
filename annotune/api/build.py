"""`annotune.build`: this machine's tuned header of a source, written to `output`, as
`annotune build` writes it for a Makefile (the module docstring of `annotune.cli.build` says
what a build checks and keeps). Imports nothing heavy: a build runs on every `make`."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.api.paths import optional_path
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.files import refuse_overwrite
from annotune.emit import header_args, tuned_header_path, write_if_changed
from annotune.emit.shadow import recorded_compile
from annotune.run.device import current_device_name
from annotune.session.build_header import (
    checked_header,
    header_environment,
    header_text,
    per_arch_header,
    shadow_copies,
)

if TYPE_CHECKING:
    from annotune.emit.arch import ArchHeader

Warn = Callable[[str], None]
"""Told each warning or note as it is found (the stand-in chosen, the defaults written)."""


@dataclass(frozen=True)
class Build:
    """What a build wrote: `output` from the device's tuned `header` (None: the defaults or a
    stand-in's values), whether its content `changed`, the compile command of the tuned
    copies (`shadow`, with `shadow_dir`), the environment (`env`: None for a size-aware
    header) and the program arguments (`args`) the values are for."""

    device: str
    header: Path | None
    output: Path
    changed: bool
    shadow: list[str] | None = None
    env: dict[str, str] | None = None
    args: list[str] | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "header": str(self.header) if self.header else None,
            "output": str(self.output),
            "changed": self.changed,
            "shadow": self.shadow,
            "env": self.env,
            "args": self.args,
        }


@dataclass(frozen=True)
class ArchBuild:
    """What `build_per_arch` wrote: one header holding every tuned GPU's values."""

    header: ArchHeader
    output: Path
    changed: bool
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {
            "output": str(self.output),
            "changed": self.changed,
            "architectures": [
                {
                    "arch": choice.arch,
                    "device": choice.gpu.tuned.device,
                    "kind": choice.gpu.tuned.kind,
                    "measurements": choice.gpu.tuned.measurements,
                    "header": str(choice.gpu.tuned.path),
                    "passed_over": [o.tuned.device for o in choice.passed_over],
                }
                for choice in self.header.choices
            ],
            "host": self.header.host.device if self.header.host else None,
        }


def build(
    source: str | Path,
    *,
    output: str | Path,
    device: str | None = None,
    out_dir: str | Path | None = None,
    config: str | Path | None = None,
    shadow_dir: str | Path | None = None,
    gpus: str | Path | None = None,
    env_file: str | Path | None = None,
    on_warning: Warn | None = None,
) -> Build:
    """Write `source`'s tuned header for `device` (default: $ANNOTUNE_DEVICE, else this
    machine's GPU or CPU) to `output`, rewritten only when its content changes; the
    defaults, or the nearest tuned GPU's values, where the device has none (a warning).
    `shadow_dir`: also write tuned copies of the source there (code you must not edit).
    `env_file`: also write the values' environment as `export` lines. Raises AnnotuneError
    when a tuned value cannot reach the compiler, or an output would overwrite an input."""
    file, out = Path(source), Path(output)
    env_path, config_path, gpus_path = (
        optional_path(env_file),
        optional_path(config),
        optional_path(gpus),
    )
    headers = optional_path(out_dir)
    warnings, say = _collect(on_warning)
    _refuse_inputs(file, out, env_path, config_path, gpus_path)
    name = device or current_device_name()
    header = tuned_header_path(file, name, headers)
    if shadow_dir is not None:
        text, tuned, header, problem = header_text(
            file, name, header, headers, config_path, gpus_path, say
        )
        compile_args = recorded_compile(Path(shadow_dir), text) if tuned else None
        if compile_args is None:
            compile_args = shadow_copies(problem, file, text, header, Path(shadow_dir), config_path)
    else:
        compile_args = None
        text, tuned, header = checked_header(
            file, name, header, out, headers, config_path, gpus_path, say
        )
    env = header_environment(text, header if tuned else out, env_path)
    args = header_args(text, str(header if tuned else out))
    changed = write_if_changed(out, text)
    if env_path is not None and env is not None:
        write_if_changed(env_path, exports(env))
    return Build(
        name, header if tuned else None, out, changed, compile_args, env, args, tuple(warnings)
    )


def build_per_arch(
    source: str | Path,
    *,
    output: str | Path,
    out_dir: str | Path | None = None,
    config: str | Path | None = None,
    gpus: str | Path | None = None,
    host_device: str | None = None,
    on_warning: Warn | None = None,
) -> ArchBuild:
    """Write one header holding every tuned GPU's values of `source` (CUDA), chosen by
    `__CUDA_ARCH__` in device code and by compute capability at run time; the host pass's
    macros take `host_device`'s values (default: the defaults)."""
    file, out = Path(source), Path(output)
    warnings, say = _collect(on_warning)
    _refuse_inputs(file, out, None, optional_path(config), optional_path(gpus))
    header, changed = per_arch_header(
        file,
        out,
        optional_path(out_dir),
        optional_path(config),
        optional_path(gpus),
        host_device,
        say,
    )
    return ArchBuild(header, out, changed, tuple(warnings))


def exports(env: dict[str, str]) -> str:
    """`env` as lines a POSIX shell sources: names are C identifiers (the config and
    `header_env` allow no other), values quoted with shlex."""
    lines = [f"export {name}={shlex.quote(value)}\n" for name, value in env.items()]
    return "# the environment of the tuned values (annotune build --env-file)\n" + "".join(lines)


def _collect(on_warning: Warn | None) -> tuple[list[str], Warn]:
    warnings: list[str] = []

    def say(line: str) -> None:
        warnings.append(line)
        if on_warning is not None:
            on_warning(line)

    return warnings, say


def _refuse_inputs(
    file: Path, out: Path, env_file: Path | None, config: Path | None, gpus: Path | None
) -> None:
    """No such source; or an output over an input: the source, the config, the GPU table,
    the results database, or the other output (the files the source includes are checked
    once they are known)."""
    from annotune.results.workspace import default_db_path  # sqlite3: not on the fast path

    if not file.is_file():
        raise AnnotuneError("no such file", Location(str(file), 1, 1))
    inputs = {
        "the source": file,
        "the config": config,
        "the GPU table (--gpus)": gpus,
        "the results database": default_db_path(file),
    }
    refuse_overwrite(out, "-o", {**inputs, "the --env-file": env_file})
    if env_file is not None:
        refuse_overwrite(env_file, "--env-file", {**inputs, "the -o file": out})
