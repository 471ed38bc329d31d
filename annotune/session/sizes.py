"""`annotune tune --sizes N=512,1024,4096`: tune a source at several problem sizes, one header.

Each size is its own tune (`tuner.tune`): its own study, resume, final check and claim, so a
size's numbers are as trustworthy as a plain tune's. The size reaches the program as the macro
N (a parameter of one value: `-DN=512`, or the rewritten copy when N's #define is unguarded)
or, when the program's arguments hold `{N}`, as that argument (and as the macro too, which a
source may use or ignore). The header then selects per size (`emit.sizes`); `annotune predict
--size` fits the model over parameters x size on these studies for a size not tuned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from annotune import __version__
from annotune.annotate import Problem, read_problem, read_problem_and_source
from annotune.annotate.knobs import defined_number
from annotune.annotate.summary import require_legal
from annotune.core.diagnostics import AnnotuneError
from annotune.core.literals import fill_placeholders, placeholders
from annotune.emit import tuned_header_path, write_if_changed
from annotune.emit.sizes import SizeEntry, SizeTable, render_size_header
from annotune.session.measurers import run_environment
from annotune.session.options import TuneArguments, TuneOptions, kernel_mode, tune_options
from annotune.session.report import ProgressCallback, TuneReport, TuneStatus, speedup_claim
from annotune.session.tuner import tune


@dataclass(frozen=True)
class SizeOutcome:
    size: int
    report: TuneReport

    def to_json(self) -> dict:
        return {"size": self.size, **self.report.to_json()}


@dataclass(frozen=True)
class SizesReport:
    """Every size's tune, in size order, and the one header written for them. `via` says how
    the size reached the program: "macro" or "argument". The tune stops at the first size
    that was interrupted or whose baseline failed; the sizes not reached are `skipped`."""

    name: str
    via: str
    outcomes: tuple[SizeOutcome, ...]
    skipped: tuple[int, ...]
    header: Path | None
    table: SizeTable | None

    @property
    def interrupted(self) -> bool:
        return any(o.report.interrupted for o in self.outcomes)

    @property
    def baseline_failed(self) -> SizeOutcome | None:
        return next((o for o in self.outcomes if o.report.baseline_failed), None)

    @property
    def status(self) -> TuneStatus:
        """How the tunes ended: interrupted, a baseline failed, no header (nothing ran)."""
        if self.interrupted:
            return TuneStatus.INTERRUPTED
        if self.baseline_failed is not None:
            return TuneStatus.BASELINE_FAILED
        return TuneStatus.NO_BEST if self.header is None else TuneStatus.OK

    def to_json(self) -> dict:
        return {
            "size_name": self.name,
            "via": self.via,
            "sizes": [o.to_json() for o in self.outcomes],
            "skipped": list(self.skipped),
            "header": str(self.header) if self.header else None,
            "interrupted": self.interrupted,
        }


SizeStart = Callable[[int, int, int], None]
"""Called as each size's tune starts: its index (from 0), the size, how many sizes."""


def tune_sizes(
    source: Path,
    given: TuneArguments,
    name: str,
    sizes: Sequence[int],
    *,
    config_path: Path | None = None,
    on_size: SizeStart | None = None,
    on_progress: ProgressCallback | None = None,
) -> SizesReport:
    """Tune `source` at each of `sizes` of the problem size `name`, smallest first, and write
    one size-aware header. AnnotuneError, before anything is measured, when the size cannot
    reach the program (no macro or argument of that name) or is itself a tuned parameter."""
    if given.transfer_from:
        raise AnnotuneError(
            "--transfer-from cannot be combined with --sizes: result files hold one size",
            hint="tune each size with --transfer-from, or drop it (the database's results "
            "of the same size on other GPUs are still used)",
        )
    sized, via, default = _read_sized(source, config_path, given, name, sizes[0])
    outcomes: list[SizeOutcome] = []
    for index, size in enumerate(sizes):
        if on_size is not None:
            on_size(index, size, len(sizes))
        problem = (
            sized
            if index == 0
            else read_problem(source, config_path=config_path, fixed={name: size})
        )
        report = tune(problem, _options(problem, given, name, size), on_progress)
        outcomes.append(SizeOutcome(size, report))
        if report.interrupted or report.baseline_failed:
            break
    skipped = tuple(sizes[len(outcomes) :])
    table = _table(outcomes, name, default)
    if table is not None:
        table = _with_environment(table, sized, given, outcomes)
    header = None
    if table is not None:
        first = outcomes[0].report
        header = tuned_header_path(source, first.device, given.out_dir)
        text = render_size_header(
            sized,
            table,
            device=first.device,
            space_size=first.space_size,
            tool_version=__version__,
        )
        write_if_changed(header, text)
    return SizesReport(name, via, tuple(outcomes), skipped, header, table)


def _read_sized(
    source: Path, config_path: Path | None, given: TuneArguments, name: str, size: int
) -> tuple[Problem, str, tuple[int | None, str]]:
    """The problem at `size`, how the size reaches the program, and the size a compile that
    does not define it gets (None: the largest tuned) with the reason the header gives."""
    problem, parsed = read_problem_and_source(source, config_path=config_path, fixed={name: size})
    require_legal(problem)
    param = problem.param(name)
    args = given.args or problem.settings.args
    if any(name in placeholders(arg) for arg in args):
        if not param.guarded:
            raise AnnotuneError(
                f"{name} is a program argument ({{{name}}} in the arguments) and an unguarded "
                f"#define here: annotune would rewrite it to each size",
                param.location,
                hint=f"guard it with #ifndef {name}, or rename the argument's placeholder",
            )
        largest = f"the largest tuned size: {name} is a program argument, known at run time"
        return problem, "argument", (None, largest)
    if not param.uses and param.value_span is None:
        raise AnnotuneError(
            f"the size {name} reaches nothing: {source} and its local headers never use the "
            f"macro {name}, and no program argument holds {{{name}}}",
            hint=f"name the macro the source reads, or put {{{name}}} in the arguments "
            f"(--arg or args = [...] in the config)",
        )
    value = defined_number(parsed, name)
    if value is None or not float(value).is_integer() or value < 1:
        return (
            problem,
            "macro",
            (None, f"the largest tuned size: {source.name} does not #define {name}"),
        )
    return problem, "macro", (int(value), f"the source's default {name}")


def _options(problem: Problem, given: TuneArguments, name: str, size: int) -> TuneOptions:
    options = tune_options(problem, given)
    args = tuple(
        fill_placeholders(arg, {name: size}, unescape=False) for arg in options.run.args
    )
    return dataclasses.replace(
        options, run=dataclasses.replace(options.run, args=args), write_header=False
    )


def _table(
    outcomes: Sequence[SizeOutcome], name: str, default: tuple[int | None, str]
) -> SizeTable | None:
    entries = []
    for outcome in outcomes:
        report = outcome.report
        if report.best is None or report.baseline_failed:
            continue
        params = {k: v for k, v in report.best.params.items() if k != name}
        entries.append(
            SizeEntry(
                size=outcome.size,
                params=params,
                measurements=report.evaluations,
                default_time=report.default.time,
                best_time=report.best.time,
                speedup=speedup_claim(report.recheck),
            )
        )
    if not entries:
        return None
    size, reason = default
    return SizeTable(name, size if size is not None else entries[-1].size, reason, tuple(entries))


def _with_environment(
    table: SizeTable, problem: Problem, given: TuneArguments, outcomes: Sequence[SizeOutcome]
) -> SizeTable:
    """The table with what each size's winner ran under (program mode): one line for the
    header when every size's is the same, else each entry's own (an environment variable
    tuned per size, e.g. OMP_NUM_THREADS from a THREADS parameter, reaches the program only
    through the environment the user sets)."""
    if kernel_mode(problem, given.mode):
        return table
    options = tune_options(problem, given)
    by_size = {
        o.size: run_environment(options.run, o.report.best.params)
        for o in outcomes
        if o.report.best is not None
    }
    found = {by_size.get(entry.size, "") for entry in table.entries if not entry.predicted}
    if len(found) <= 1:
        return dataclasses.replace(table, environment=found.pop() if found else "")
    entries = tuple(
        dataclasses.replace(entry, environment=by_size.get(entry.size, ""))
        for entry in table.entries
    )
    return dataclasses.replace(table, entries=entries, environment="")
