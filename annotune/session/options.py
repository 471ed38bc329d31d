"""What one `annotune tune` runs with: the command line over the config file over the defaults.

The command line says what this run should do; the config file (its `[[file]]` entry, or the
source's `#pragma annotune args`) says how the program is built and run, so that a plain
`annotune tune FILE` measures it the same way every time. `tune_options` merges the two, here
and nowhere else; the CLI only parses into `TuneArguments` and prints what `tune` reports.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from annotune.annotate import Problem
from annotune.annotate.problem import RunSettings
from annotune.builder import CompilerCommand
from annotune.core.diagnostics import AnnotuneError
from annotune.run.program import RunSpec
from annotune.search import STRATEGY_NAMES
from annotune.session.tuner import TuneOptions
from annotune.transfer.prior import TRANSFER_STRATEGIES

T = TypeVar("T")


@dataclass(frozen=True)
class TuneArguments:
    """`annotune tune`'s options as given. A build or run setting not given is None (or empty),
    so that the config file's, else the default, applies; the others default as `TuneOptions`.

    Combinations that can never work are refused on construction (AnnotuneError), before the
    source is read: a wrong option is reported as such, not as a problem of the file.
    """

    strategy: str = TuneOptions.strategy
    budget: int = 100  # measurements; unlike `TuneOptions.budget`, never None (no limit)
    seconds: float | None = None
    seed: int = TuneOptions.seed
    device: str | None = None
    jobs: int | None = None
    out_dir: Path | None = None
    db_path: Path | None = None
    fresh: bool = TuneOptions.fresh
    compiler: str | None = None  # a preset name or a command template (`CompilerCommand.parse`)
    compile_timeout: float = TuneOptions.compile_timeout
    args: tuple[str, ...] = ()  # the program's arguments
    repeats: int | None = None
    warmup: int | None = None
    timeout: float | None = None
    time_regex: str | None = None
    mode: str = TuneOptions.mode
    kernel: str | None = None
    backend: str | None = None
    transfer: bool = TuneOptions.transfer
    transfer_from: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGY_NAMES:
            raise AnnotuneError(
                f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGY_NAMES)}"
            )
        if self.transfer_from and not self.transfer:
            raise AnnotuneError("--transfer-from needs transfer; drop --no-transfer")
        if self.transfer_from and self.strategy not in TRANSFER_STRATEGIES:
            raise AnnotuneError(
                f"--transfer-from works with the strategies {', '.join(TRANSFER_STRATEGIES)}, "
                f"not {self.strategy!r}"
            )
        if self.budget < 1:
            raise AnnotuneError("--budget must be at least 1")


def tune_options(problem: Problem, given: TuneArguments) -> TuneOptions:
    """The options `tune` runs `problem` with: each build and run setting (compile command,
    program arguments, timeout, warmup, repeats, time regex) from the command line when given,
    else from the config file (`problem.settings`), else `RunSpec`'s and the builder's default.

    AnnotuneError when the merged compile command or run settings cannot be used.
    """
    return TuneOptions(
        strategy=given.strategy,
        budget=given.budget,
        seconds=given.seconds,
        seed=given.seed,
        device=given.device,
        jobs=given.jobs,
        out_dir=given.out_dir,
        db_path=given.db_path,
        fresh=given.fresh,
        compiler=_compiler(given.compiler, problem.settings),
        compile_timeout=given.compile_timeout,
        run=_run_spec(given, problem.settings),
        mode=given.mode,
        kernel=given.kernel,
        backend=given.backend,
        transfer=given.transfer,
        transfer_from=given.transfer_from,
    )


def _compiler(given: str | None, settings: RunSettings) -> CompilerCommand | None:
    """None leaves the choice to the builder (by language). A configured one-item list is a
    preset name or a whole template, like the command line's; a longer one is the argv."""
    if given is not None:
        return CompilerCommand.parse(given)
    argv = settings.compile
    if not argv:
        return None
    return CompilerCommand.parse(argv[0] if len(argv) == 1 else shlex.join(argv))


def _run_spec(given: TuneArguments, settings: RunSettings) -> RunSpec:
    chosen = {
        "timeout": _first(given.timeout, settings.timeout),
        "warmup": _first(given.warmup, settings.warmup),
        "repeats": _first(given.repeats, settings.repeats),
        "time_regex": _first(given.time_regex, settings.time_regex),
    }
    try:
        return RunSpec(
            args=given.args or settings.args,
            **{name: value for name, value in chosen.items() if value is not None},
        )
    except (ValueError, TypeError) as error:
        raise AnnotuneError(str(error)) from None


def _first(given: T | None, configured: T | None) -> T | None:
    return given if given is not None else configured
