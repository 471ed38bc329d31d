"""Checks of single option values, run by click while it parses the command line.

A bad value is reported the way click reports a bad type, "Invalid value for '--timeout': ...",
with exit code 2, before a source is read or anything is compiled; so each check is written
once here and named in the option's declaration, not repeated in the code that uses it. Integer
ranges need none of this: `typer.Option(min=..., max=...)` is click's IntRange. Floats do,
because click's FloatRange lets NaN through (every comparison with NaN is false).

Imports nothing heavy: `annotune build` declares its options with these on every `make`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import typer

from annotune.core.files import why_not_writable
from annotune.run.device import DEVICE_ENV

MAX_SEED = 2**32 - 1
"""The largest seed: numpy and scikit-learn take seeds of 32 bits."""

MAX_COUNT = 2**31 - 1
"""The largest count (budget, repeats, jobs): beyond it the count only overflows a C int."""

MAX_SECONDS = 10**6
"""The longest time limit (11.6 days): past 2**31 milliseconds (24.8 days) the timers that
subprocesses are waited with overflow."""

T = TypeVar("T")

GpusOption = Annotated[
    Path | None,
    typer.Option(
        "--gpus",
        dir_okay=False,
        help="A TOML file of [[gpu]] entries in the format of annotune/transfer/gpus.toml, for "
        "GPUs annotune does not know (they win over its table; only name is required).",
    ),
]
"""`--gpus FILE`, shared by the commands that need device features (bench, predict, build);
the file is read and checked by `annotune.transfer.resolve.user_table`."""


def positive_seconds(value: float | None) -> float | None:
    """A time limit: a number of seconds above 0, and finite (`inf` is no limit, and would
    overflow the timers; a limit of nothing is `--seconds` left out)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise typer.BadParameter(
            f"must be a number of seconds above 0 and at most {MAX_SECONDS:g}, not {value}"
        )
    return value


def tolerance(value: float | None) -> float | None:
    """A relative tolerance: a finite number, 0 or more."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"must be a finite number, 0 or more, not {value}")
    return value


def share(value: float | None) -> float | None:
    """A share of a value: above 0 and below 1."""
    if value is not None and not 0 < value < 1:  # False for NaN, too
        raise typer.BadParameter(f"must be a share above 0 and below 1 (e.g. 0.02), not {value}")
    return value


def time_pattern(value: str | None) -> str | None:
    """A regular expression whose first group captures the time; re's own message, with the
    position of the mistake, when it is none."""
    if value is None:
        return value
    try:
        groups = re.compile(value).groups
    except re.error as error:
        raise typer.BadParameter(
            f"{value!r} is not a regular expression: {error.msg} at position {error.pos}"
        ) from None
    if groups < 1:
        raise typer.BadParameter(
            f"{value!r} has no group to capture the time, e.g. 'took ([0-9.]+) ms'"
        )
    return value


def one_of(names: Sequence[str]) -> Callable[[T], T]:
    """A choice among `names` (for a repeatable option, each value given)."""

    def check(value: T) -> T:
        given = value if isinstance(value, list) else [value]
        for name in given:
            if name is not None and name not in names:
                raise typer.BadParameter(f"{name!r} is not one of {', '.join(names)}")
        return value

    return check


def device_name(value: str | None) -> str | None:
    """A device's name: some printable text (it names a header's directory and a study)."""
    if value is not None and not (value.strip() and value.isprintable()):
        raise typer.BadParameter(f"{value!r} is no device name: it must be printable text")
    return value


def output_file(value: Path | None) -> Path | None:
    """A file to write: not a directory, in a directory that exists or can be made, writable.
    Checked before any work, so the work is not lost at the end."""
    if value is not None:
        _writable(value, directory=False)
    return value


def output_dir(value: Path | None) -> Path | None:
    """A directory to write files in: one that exists or can be made, writable."""
    if value is not None:
        _writable(value, directory=True)
    return value


def _writable(path: Path, *, directory: bool) -> None:
    reason = why_not_writable(path, directory=directory)
    if reason is not None:
        raise typer.BadParameter(f"cannot write {str(path)!r}: {reason}")


def device_count(value: str | None) -> int | Literal["all"] | None:
    """`--devices`: a count from 1, or `all`."""
    if value is None or value == "all":
        return value
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_COUNT:
        raise typer.BadParameter(f"must be a count from 1 or 'all', not {value!r}")
    return count


def replay_delay_value(value: str) -> str:
    """`--replay-delay`: seconds from 0, or `recorded`."""
    if value == "recorded":
        return value
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS):
        raise typer.BadParameter(
            f"must be seconds from 0 to {MAX_SECONDS:g}, or 'recorded', not {value!r}"
        )
    return value


# The options of the commands that find a device's tuned header (`build`, `check`), declared once.
HeaderDevice = Annotated[
    str | None,
    typer.Option(
        callback=device_name,
        help=f"Device name (default: ${DEVICE_ENV}, else this machine's GPU or CPU).",
    ),
]
HeaderDir = Annotated[
    Path | None,
    typer.Option(file_okay=False, help="Where tuned headers live (default: tuned/ beside FILE)."),
]
