"""`annotune.tune` and its kin: `annotune tune` as functions, one per kind of result.

- `tune`: this machine (or a replay device): a `TuneReport`;
- `tune_sizes`: one tune per problem size and one size-aware header: a `SizesReport`;
- `tune_ray`: the devices of a Ray cluster, one report per kind of device;
- `compile_only`: every configuration compiled, none run: a `CompileReport`.

The options are `annotune tune`'s, by their Python names (`--recheck-rounds` is
`recheck_rounds`; the `TuneArguments` fields), checked here as the command line checks them;
an option no tune has is a TypeError naming the ones there are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from annotune.api.paths import optional_path
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import OBJECTIVES
from annotune.emit import check_headers_writable
from annotune.emit.sizes import parse_sizes
from annotune.run.backends import BACKENDS
from annotune.run.program import TIME_UNITS
from annotune.session.compile_only import CompileReport, compile_file
from annotune.session.options import TuneArguments
from annotune.session.report import ProgressCallback, TuneReport
from annotune.session.sizes import SizesReport

_SET_BY_THE_FUNCTION = ("sized", "compile_only", "ray")
"""What the function called says (`tune_sizes`, `compile_only`, `tune_ray`), not an option."""
OPTIONS = tuple(
    f.name for f in dataclasses.fields(TuneArguments) if f.name not in _SET_BY_THE_FUNCTION
)
"""The options a tune takes by keyword: `annotune tune`'s, by their Python names."""

_PATHS = {"out_dir", "db_path", "run_dir", "gpus"}
_PATH_LISTS = {"transfer_from", "replay"}
_AT_LEAST_ONE = {"budget", "jobs", "max_repeats", "recheck_rounds", "repeats"}
_NOT_NEGATIVE = {"seed", "warmup", "recheck"}
_POSITIVE = {"seconds", "compile_timeout", "timeout"}
_CHOICES: dict[str, tuple[str, ...]] = {
    "mode": ("program", "kernel", "auto"),
    "objective": tuple(OBJECTIVES),
    "backend": tuple(BACKENDS),
    "time_unit": tuple(TIME_UNITS),
}


def tune(
    source: str | Path,
    *,
    config: str | Path | None = None,
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> TuneReport:
    """Tune `source` on this machine (or a replay device, `replay=[...]`): compile variants,
    time them, search, write the header. Returns the report `annotune tune` prints; its
    `status` says how the tune ended (a tune with no valid configuration returns, with status
    NO_BEST, rather than raising). `on_progress` is told each measurement's progress.
    Raises AnnotuneError for bad input (options, source, config), before anything is built.
    """
    given = arguments(options)
    if given.ray or given.compile_only:
        raise AnnotuneError("use annotune.tune_ray or annotune.compile_only for those")
    from annotune.session.tuner import tune_file  # the search and scikit-learn: only to tune

    return tune_file(
        Path(source), given, config_path=optional_path(config), on_progress=on_progress
    )[0]


def tune_ray(
    source: str | Path,
    *,
    config: str | Path | None = None,
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> list[TuneReport]:
    """Tune `source` on the devices of a Ray cluster (`ray_address`, `devices`, or replay
    devices with `replay=[...]`): one report per kind of device."""
    given = arguments({**options, "ray": True})
    from annotune.session.tuner import tune_file

    return tune_file(
        Path(source), given, config_path=optional_path(config), on_progress=on_progress
    )


def tune_sizes(
    source: str | Path,
    *,
    sizes: str | Mapping[str, Sequence[int]],
    config: str | Path | None = None,
    on_size: Callable[[int, int, int], None] | None = None,
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> SizesReport:
    """Tune `source` at each problem size (`sizes="N=512,1024"` or `{"N": [512, 1024]}`),
    smallest first, and write one header that selects per size. `on_size(index, size,
    count)` is told as each size's tune starts."""
    name, values = _sizes(sizes)
    given = arguments({**options, "sized": True})
    check_headers_writable(Path(source), given.out_dir)
    from annotune.session.sizes import tune_sizes as run

    return run(
        Path(source),
        given,
        name,
        values,
        config_path=optional_path(config),
        on_size=on_size,
        on_progress=on_progress,
    )


def compile_only(
    source: str | Path, *, config: str | Path | None = None, **options: Any
) -> CompileReport:
    """Compile the configurations a tune would measure (`budget` of them) and run none: a
    CUDA program checked on a machine without its GPU (`arch="sm_90"`)."""
    given = arguments({**options, "compile_only": True})
    return compile_file(Path(source), given, config_path=optional_path(config))


def arguments(options: Mapping[str, Any]) -> TuneArguments:
    """`options` as `TuneArguments`, each checked as the command line checks it: a name no
    tune takes is a TypeError; a value out of its range is an AnnotuneError naming it."""
    unknown = sorted(set(options) - set(OPTIONS) - set(_SET_BY_THE_FUNCTION))
    if unknown:
        raise TypeError(
            f"annotune: no tune option {', '.join(map(repr, unknown))}; "
            f"the options are {', '.join(OPTIONS)}"
        )
    values = {name: _checked(name, value) for name, value in options.items()}
    return TuneArguments(**values)


def _checked(name: str, value: Any) -> Any:
    """One option's value as the command line would accept it, or AnnotuneError."""
    if value is None:
        return value
    if name in _PATHS:
        return Path(value)
    if name in _PATH_LISTS:
        return tuple(Path(v) for v in ([value] if isinstance(value, str | Path) else value))
    if name == "args":
        if isinstance(value, str):
            raise AnnotuneError("args is a list of arguments, not one string")
        return tuple(str(v) for v in value)
    if name in _AT_LEAST_ONE | _NOT_NEGATIVE:
        low = 1 if name in _AT_LEAST_ONE else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise AnnotuneError(f"{name} must be an integer of at least {low}, not {value!r}")
    if name in _POSITIVE and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise AnnotuneError(f"{name} must be a positive number of seconds, not {value!r}")
    if name in _CHOICES and value not in _CHOICES[name]:
        raise AnnotuneError(f"{name} must be one of {', '.join(_CHOICES[name])}, not {value!r}")
    if name == "strategy":
        from annotune.search import STRATEGY_NAMES

        if value not in STRATEGY_NAMES:
            raise AnnotuneError(
                f"unknown strategy {value!r}; choose one of {', '.join(STRATEGY_NAMES)}"
            )
    return value


def _sizes(sizes: str | Mapping[str, Sequence[int]]) -> tuple[str, tuple[int, ...]]:
    if isinstance(sizes, str):
        return parse_sizes(sizes, "sizes")
    if len(sizes) != 1:
        raise AnnotuneError(f"sizes names one problem size, not {len(sizes)}")
    ((name, values),) = sizes.items()
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise AnnotuneError(f"sizes: {name}'s sizes are a list of integers, not {values!r}")
    return parse_sizes(f"{name}={','.join(str(v) for v in values)}", "sizes")
