"""How a tune is shown: its live progress (a bar on a terminal, one line per new best in a log),
its report, its failures by kind, and a compile-only run's table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from annotune.cli.app import (
    EXIT_FAILED,
    print_json,
    stderr,
    stdout,
)
from annotune.core.records import OBJECTIVE_GAINS, OBJECTIVE_UNITS
from annotune.session.compile_only import CompileReport
from annotune.session.report import (
    FailureKind,
    TuneProgress,
    TuneReport,
    WallBreakdown,
)

if TYPE_CHECKING:
    from annotune.session.concurrent import DeviceRate

SHOWN_FAILURE_KINDS = 3


def say_baseline_failed(report: TuneReport) -> None:
    baseline = (report.baseline or report.default).params
    stderr.print(
        f"annotune: error: the baseline configuration {baseline} "
        f"failed ({_headline(report.baseline_failed)}): there is nothing to check outputs "
        "against or to compare times with",
        markup=False,
        highlight=False,
    )
    stderr.print(
        "note: fix the program, or name a working baseline with --reference "
        '"NAME=VALUE,...", or tune without output checks with --no-check',
        markup=False,
        highlight=False,
    )


def say_no_best(report: TuneReport) -> None:
    if report.gave_up:
        (kind,) = report.failures
        stderr.print(
            f"annotune: error: stopped after {kind.count} configurations all failed the same "
            f"way ({kind.status}: {_headline(kind.error)}); fix the program or its "
            "environment, then run again with --fresh to measure them again",
            markup=False,
            highlight=False,
        )
    else:
        stderr.print("annotune: error: no configuration ran successfully", highlight=False)


class ProgressDisplay:
    """A live progress bar on a terminal; one line per new best otherwise (CI logs)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}", markup=False),
            TimeElapsedColumn(),
            console=stderr,
            transient=False,
            disable=not enabled,
        )
        self.shown: dict[str, _Shown] = {}  # by device: several kinds may tune at once

    def __enter__(self) -> ProgressDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, p: TuneProgress) -> None:
        shown = self.shown.get(p.device)
        learned = f", learning from {', '.join(p.transfer_from)}" if p.transfer_from else ""
        on = f"{len(p.devices)} x {p.device}" if len(p.devices) > 1 else p.device
        description = f"tuning on {on} ({p.strategy}{learned})"
        if shown is None:
            shown = self.shown[p.device] = _Shown(
                self.progress.add_task(description, total=p.budget, status=""),
                learned_from=p.transfer_from,
            )
            if not self.enabled and (p.transfer_from or p.devices):  # CI logs: say where
                stderr.print(description, highlight=False)
        elif p.transfer_from != shown.learned_from:  # other kinds' results, mid-tune
            shown.learned_from = p.transfer_from
            self.progress.update(shown.task, description=description)
            if not self.enabled:
                stderr.print(
                    f"{p.device}: now learning from {', '.join(p.transfer_from)}",
                    highlight=False,
                )
        prefix = f"{p.device}: " if len(self.shown) > 1 else ""
        for warning in p.warnings[shown.warned :]:
            stderr.print(f"annotune: warning: {prefix}{warning}", highlight=False)
        shown.warned = len(p.warnings)
        for kind in p.failures[shown.failures :]:
            stderr.print(
                f"annotune: invalid: {prefix}{kind.status}, {_example(kind)}",
                markup=False,
                highlight=False,
            )
        shown.failures = len(p.failures)
        status = (
            f"iter {p.iteration}  best {_best(p)}  default {_ms(p.default_time)}  "
            f"reused {p.reused}  failed {p.compile_failures} compile / {p.run_failures} run"
        )
        if p.devices:
            status += f"  {_rates(p.devices)}"
        if p.phase == "recheck":
            what = "the best and the default re-measured, interleaved"
            if not self.enabled:
                if not shown.rechecking:
                    stderr.print(f"annotune: {prefix}final check: {what}", highlight=False)
                done = p.recheck_round
                if done > shown.recheck_round and (done % 10 == 0 or done == p.recheck_rounds):
                    stderr.print(
                        f"annotune: {prefix}final check: round {done} of {p.recheck_rounds}",
                        highlight=False,
                    )
            shown.rechecking = True
            shown.recheck_round = p.recheck_round
            status = f"final check, round {p.recheck_round} of {p.recheck_rounds}: {what}"
        self.progress.update(shown.task, completed=p.evaluations, status=status)
        if not self.enabled and p.best_value is not None and p.best_value != shown.best:
            shown.best = p.best_value
            rates = f" ({_rates(p.devices)})" if p.devices else ""
            stderr.print(
                f"{prefix}[{p.evaluations}/{p.budget}] best {_best(p)}: {p.best_params}{rates}",
                highlight=False,
            )


@dataclass
class _Shown:
    """What the display has shown of one device's tune."""

    task: TaskID
    learned_from: tuple[str, ...] = ()
    best: float | None = None
    warned: int = 0
    failures: int = 0
    rechecking: bool = False
    recheck_round: int = 0


def _rates(devices: tuple[DeviceRate, ...]) -> str:
    """Each device's measurements a minute, e.g. "#0 118/min, #1 121/min, #2 lost"."""
    return ", ".join(
        f"#{i} lost" if d.lost else f"#{i} {d.per_minute:.0f}/min" for i, d in enumerate(devices)
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _best(p: TuneProgress) -> str:
    """The best so far by the objective: its time, or its energy (or energy x delay) with
    its time beside it."""
    if p.objective == "time" or p.best_value is None:
        return _ms(p.best_time)
    return f"{p.best_value:.4g} {OBJECTIVE_UNITS[p.objective]} ({_ms(p.best_time)})"


def _headline(error: str) -> str:
    """The line of a (compiler's) message that says what went wrong."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return chosen


def _example(kind: FailureKind) -> str:
    return f"e.g. {kind.params}: {_headline(kind.error)}"


def print_report(report: TuneReport) -> None:
    stdout.print(f"device        {report.device}", markup=False, highlight=False)
    if report.run_dir is not None:
        stdout.print(f"run in        {report.run_dir}", markup=False, highlight=False)
    if report.prior is not None and report.prior.tasks:
        features = report.prior.selection.describe() if report.prior.selection else "none"
        stdout.print(
            f"learned from  {', '.join(report.prior.sources)} (device features: {features})",
            markup=False,
            highlight=False,
        )
    size = "a space too large to count" if report.space_size is None else f"{report.space_size:,}"
    same = f", {report.same_program} the same program as one measured" * bool(report.same_program)
    stdout.print(
        f"measurements  {report.evaluations} of {size} legal "
        f"({report.reused} reused{same}, {report.invalid} invalid)"
    )
    _print_failures(report.failures)
    if report.objective != "time":
        stdout.print(f"objective     {report.objective} (the least is best)", highlight=False)
    stdout.print(f"default       {_timed(report.default)}  {report.default.params}", markup=False)
    if report.baseline is not None:
        stdout.print(
            f"baseline      {_timed(report.baseline)}  {report.baseline.params}", markup=False
        )
    if report.best is not None:
        stdout.print(f"best          {_timed(report.best)}  {report.best.params}", markup=False)
    verdict = report.recheck
    if verdict is not None and verdict.interval is not None and not verdict.kept_baseline:
        low, high = verdict.interval
        what = "" if report.objective == "time" else f" {OBJECTIVE_GAINS[report.objective]}"
        stdout.print(
            f"speedup       {verdict.speedup:.2f}x{what} (95% interval "
            f"{low:.2f}-{high:.2f}; re-measured against the baseline, interleaved, "
            f"{verdict.rounds} rounds)"
        )
    if verdict is not None and verdict.contenders:
        early = ", stopped once decided" if verdict.stopped_early else ""
        stored = (
            f"; stored {verdict.stored}, read back: every measurement was reused"
            if verdict.stored
            else ""
        )
        stdout.print(
            f"final check   {len(verdict.contenders)} contender(s) and the baseline, "
            f"{verdict.rounds} rounds{early}{stored}{_check_medians(verdict, report.objective)}",
            markup=False,
        )
    if report.header is not None:
        stdout.print(f"header        {report.header}", markup=False, highlight=False)
    if report.wall_breakdown is not None:
        stdout.print(f"time          {_breakdown(report.wall_breakdown)}", highlight=False)
    for i, rate in enumerate(report.devices):
        lost = f"; lost: {rate.lost}" if rate.lost else ""
        stdout.print(
            f"device #{i:<5} {rate.measured} measured, {rate.per_minute:.0f}/min ({rate.actor}"
            f"{lost})",
            markup=False,
            highlight=False,
        )
    for note in report.notes:
        stdout.print(f"note: {note}", markup=False, highlight=False)
    if report.interrupted:
        stdout.print("interrupted: every measurement so far is kept; run again to resume")


def _breakdown(wall: WallBreakdown) -> str:
    """The tune's wall time and its parts, e.g. "62.1 s: compile 1.2 s (41.0 s in the pool),
    start-up 20.1 s, timed out 3.0 s, run 30.2 s, ..."; last, the share of it in timed
    regions: the GPU's busy share, or a host program's (a CPU tune has no GPU to speak of)."""
    parts = [
        f"compile {wall.compile:.1f} s ({wall.compiled:.1f} s in the pool)",
        f"start-up {wall.startup:.1f} s",
        *([f"timed out {wall.timeout:.1f} s"] if wall.timeout else []),
        f"run {wall.run:.1f} s",
        f"search {wall.search:.1f} s",
        f"final check {wall.recheck:.1f} s",
        f"other {wall.other:.1f} s",
    ]
    busy = ""
    if wall.gpu and wall.wall > 0:
        what = "GPU busy" if wall.busy_on == "GPU" else "in timed regions"
        busy = f"; {what} {wall.gpu / wall.wall:.0%}"
    return f"{wall.wall:.1f} s: " + ", ".join(parts) + busy


def _check_medians(verdict, objective: str) -> str:
    """The final check's own medians of the baseline and the winner: the speedup's figures,
    measured in the same rounds, where the default and best lines above are the search's
    (a program whose time jumps between modes can give each a different median)."""
    base, winner = verdict.baseline_time, verdict.winner_time
    if base is None or winner is None:
        return ""
    unit = OBJECTIVE_UNITS[objective]
    if verdict.kept_baseline:
        return f"; in it the baseline's median {base:.4g} {unit}"
    return f"; in it the medians: baseline {base:.4g} {unit}, winner {winner:.4g} {unit}"


def _timed(outcome) -> str:
    """A search time with its 95% interval and how many runs it rests on."""
    if outcome.time is None:
        return "-"
    spread = ""
    if outcome.interval is not None:
        low, high = outcome.interval
        spread = f" [{low:.4g}, {high:.4g}]"
    joules = ""
    if outcome.energy is not None:
        joules = f", {outcome.energy:.4g} J a run"
        if outcome.energy_interval is not None:
            low, high = outcome.energy_interval
            joules += f" [{low:.4g}, {high:.4g}]"
    return f"{outcome.time:.4g} ms{spread}{joules} ({outcome.samples} runs)"


def _print_failures(failures: tuple[FailureKind, ...]) -> None:
    """The most common kinds of failure, each with one configuration and its message."""
    for kind in failures[:SHOWN_FAILURE_KINDS]:
        stdout.print(
            f"invalid       {kind.count} {kind.status}, {_example(kind)}",
            markup=False,
            highlight=False,
        )
    if len(failures) > SHOWN_FAILURE_KINDS:
        others = sum(kind.count for kind in failures[SHOWN_FAILURE_KINDS:])
        stdout.print(f"invalid       {others} more, failing in other ways (see --json)")


def report_compiles(report: CompileReport, json: bool) -> None:
    """Print what --compile-only found, the configurations that cannot launch among the
    invalid ones; exit 1 when no configuration compiled (none able to launch is an error
    before, at the declaration: `compile_configurations`)."""
    if json:
        print_json(report.to_json())
    else:
        for warning in report.warnings:
            stderr.print(f"annotune: warning: {warning}", highlight=False)
        size = "too many to count" if report.space_size is None else f"{report.space_size:,}"
        unable = report.cannot_launch
        tried = report.compiled + report.failed + unable
        stdout.print(
            f"compiled      {report.compiled} of {tried} configurations ({size} legal) in "
            f"{report.seconds:.1f} s: {report.failed} failed, "
            + (f"{unable} cannot launch on {report.arch or 'any GPU'}, " if unable else "")
            + f"{report.cached} from the compile cache",
            markup=False,
            highlight=False,
        )
        stdout.print(f"command       {report.command}", markup=False, highlight=False)
        if report.fallbacks:
            stdout.print(
                f"fallbacks     {report.fallbacks} compiled by nvcc: NVRTC could not",
                markup=False,
                highlight=False,
            )
            for kind in report.fallback_reasons:
                stdout.print(
                    f"              {kind.count} x {kind.error[:300]} (e.g. {kind.params})",
                    markup=False,
                    highlight=False,
                )
        _print_failures(report.failures)
        for k in report.kernels:
            stdout.print(
                f"kernel        {k.kernel}: registers {_span(k.registers)}, shared "
                f"{_span(k.shared_bytes)} B, spill stores {_span(k.spill_stores)} B, loads "
                f"{_span(k.spill_loads)} B ({k.spilling} of {k.compiled} spill)",
                markup=False,
                highlight=False,
            )
        if report.transient:
            stdout.print(
                f"note: {report.transient} compiles failed twice for reasons of the machine "
                "(out of memory or disk, killed, timed out); they are compiled again next run",
                markup=False,
                highlight=False,
            )
    if not report.compiled:
        launch = " that can launch" if report.cannot_launch else ""
        stderr.print(f"annotune: error: no configuration compiled{launch}", highlight=False)
        raise typer.Exit(code=EXIT_FAILED)


def _span(low_high: tuple[int, int]) -> str:
    low, high = low_high
    return str(low) if low == high else f"{low}-{high}"
