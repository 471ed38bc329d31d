"""`annotune tune FILE`: build, measure and search; write tuned/<device>/<stem>.h.

When the results database (or `--transfer-from` files) holds results of the same source and
space on other GPUs, the search starts from what they teach (`--no-transfer`: it does not).
`--compile-only` compiles the configurations and runs none, for a machine without the GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

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
    ConfigPath,
    DbPath,
    JsonFlag,
    app,
    interrupted_exit_code,
    print_json,
    stderr,
    stdout,
    user_errors,
)
from annotune.cli.params import (
    MAX_COUNT,
    MAX_SECONDS,
    MAX_SEED,
    GpusOption,
    device_name,
    one_of,
    output_dir,
    positive_seconds,
    share,
    time_pattern,
    tolerance,
)
from annotune.core.records import OBJECTIVE_GAINS, OBJECTIVE_UNITS, OBJECTIVES
from annotune.core.render import render
from annotune.emit import check_headers_writable
from annotune.emit.sizes import parse_sizes
from annotune.run.backends import BACKENDS
from annotune.run.program import TIME_UNITS
from annotune.search import STRATEGY_NAMES
from annotune.session.compile_only import CompileReport, compile_file
from annotune.session.options import TuneArguments
from annotune.session.report import (
    FailureKind,
    NoCudaDevice,
    TuneProgress,
    TuneReport,
    TuneStatus,
    WallBreakdown,
    worst_status,
)

if TYPE_CHECKING:
    from annotune.session.concurrent import DeviceRate

SHOWN_FAILURE_KINDS = 3


def _device_count(value: str | None) -> int | Literal["all"] | None:
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


def _replay_delay(value: str) -> str:
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


@app.command("tune")
def tune_command(
    file: Annotated[Path, typer.Argument(help="The annotated source to tune.")],
    budget: Annotated[
        int, typer.Option(min=1, max=MAX_COUNT, help="Measurements to make (reused ones count).")
    ] = 100,
    seconds: Annotated[
        float | None,
        typer.Option(callback=positive_seconds, help="Stop after this much wall time, too."),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option(
            callback=one_of(STRATEGY_NAMES), help=f"Search strategy: {', '.join(STRATEGY_NAMES)}."
        ),
    ] = "iterml",
    seed: Annotated[
        int,
        typer.Option(min=0, max=MAX_SEED, help="Random seed: the same seed, the same search."),
    ] = 0,
    device: Annotated[
        str | None,
        typer.Option(
            callback=device_name, help="Device name (default: the GPU's name, else cpu-<model>)."
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(min=1, max=MAX_COUNT, help="Parallel compiles (default: the core count)."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(callback=output_dir, help="Where headers go (default: tuned/ beside FILE)."),
    ] = None,
    db: DbPath = None,
    fresh: Annotated[bool, typer.Option(help="Forget earlier measurements of this study.")] = False,
    compiler: Annotated[
        str | None,
        typer.Option(
            help="Compile command: a preset (nvcc, gcc, g++, nvc, nvc++, cc, c++) or a template "
            "with {source} {output} [{defines} {includes}]."
        ),
    ] = None,
    arg: Annotated[
        list[str] | None, typer.Option("--arg", help="A program argument (repeatable).")
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_COUNT,
            help="The least number of timed runs per configuration (default 5); more are made "
            "until its median is stable.",
        ),
    ] = None,
    max_repeats: Annotated[
        int | None,
        typer.Option(
            min=1, max=MAX_COUNT, help="The most timed runs per configuration (default 30)."
        ),
    ] = None,
    stable_within: Annotated[
        float | None,
        typer.Option(
            callback=share,
            help="Stable: the 95% interval of the median within this share of it (default 0.02).",
        ),
    ] = None,
    warmup: Annotated[
        int | None, typer.Option(min=0, max=MAX_COUNT, help="Untimed runs first (default 1).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds, help="Seconds before a run counts as hung (default 60)."
        ),
    ] = None,
    time_regex: Annotated[
        str | None,
        typer.Option(
            callback=time_pattern,
            help="Regex whose first group is the time (in --time-unit).",
        ),
    ] = None,
    time_unit: Annotated[
        str | None,
        typer.Option(
            callback=one_of(tuple(TIME_UNITS)),
            help="The unit of what --time-regex captures: s, ms, us or ns (default ms).",
        ),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            file_okay=False,
            help="Where the program runs, so that relative paths in its arguments are found "
            "(default: the config's run_dir, else the current directory).",
        ),
    ] = None,
    compile_timeout: Annotated[
        float,
        typer.Option(callback=positive_seconds, help="Seconds before a compile counts as failed."),
    ] = 300.0,
    mode: Annotated[
        str,
        typer.Option(
            callback=one_of(("program", "kernel", "auto")),
            help="program (run the executable), kernel (launch the '#pragma annotune kernel' "
            "with generated inputs; needs a GPU), or auto (kernel when one is declared).",
        ),
    ] = "auto",
    kernel: Annotated[
        str | None, typer.Option(help="Kernel mode: which declared kernel to tune.")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            callback=one_of(BACKENDS),
            help="Kernel mode: pycuda or cuda-python (default: pycuda if installed).",
        ),
    ] = None,
    transfer: Annotated[
        bool,
        typer.Option(
            help="Learn from results of the same source and space on other GPUs (the database's "
            "and --transfer-from files): measure what they predict best first (iterml only)."
        ),
    ] = True,
    transfer_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--transfer-from",
            help="A T4 (annotune export) or Kernel Tuner cache file of this space measured on "
            "another GPU (repeatable).",
        ),
    ] = None,
    recheck: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_COUNT,
            help="The best configurations re-measured against the default, interleaved, before "
            "a winner is claimed (0: no final check and no speedup claimed).",
        ),
    ] = 3,
    recheck_rounds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_COUNT,
            help="The most interleaved rounds of that final check (at least 6); it stops "
            "sooner once its verdict is decided.",
        ),
    ] = 30,
    retry_failed: Annotated[
        bool, typer.Option(help="Measure this study's failed configurations again.")
    ] = False,
    reference: Annotated[
        str | None,
        typer.Option(
            help='The baseline instead of the default, e.g. "BLOCK_X=64,BLOCK_Y=8": its output '
            "is the reference and its time what speedups are measured against."
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(help="Check each configuration's output against the baseline's."),
    ] = True,
    check_rtol: Annotated[
        float | None,
        typer.Option(
            callback=tolerance,
            help="Relative tolerance of that check (default 1e-6; kernels 1e-5).",
        ),
    ] = None,
    objective: Annotated[
        str,
        typer.Option(
            callback=one_of(OBJECTIVES),
            help="What to minimise: time, energy (J per run: NVML for a GPU, RAPL for the "
            "host) or edp (energy x time).",
        ),
    ] = "time",
    flush_l2: Annotated[
        bool | None,
        typer.Option(
            help="Kernel mode: clear the L2 cache before each timed launch (default: when the "
            "kernel's data fit in it)."
        ),
    ] = None,
    compile_only: Annotated[
        bool,
        typer.Option(
            "--compile-only",
            help="Run nothing: compile --budget configurations (the default, then a random "
            "sample) and report compile failures and each kernel's registers, shared memory "
            "and spills. For a machine without the GPU.",
        ),
    ] = False,
    arch: Annotated[
        str | None,
        typer.Option(
            help="With --compile-only: the GPU architecture nvcc compiles for, e.g. sm_90 "
            "(default: --device's, from annotune's GPU table, else nvcc's default)."
        ),
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option(
            help="Tune at several problem sizes, e.g. N=512,1024,4096: N is a macro (-DN=512) "
            "or {N} in the program's arguments; one header selects per size.",
        ),
    ] = None,
    ray: Annotated[
        bool,
        typer.Option(
            "--ray",
            help="Measure on the devices of a Ray cluster (pip install 'annotune[ray]'): one "
            "actor per GPU, or per replay device with --replay; a local cluster unless "
            "--ray-address names one.",
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(help="With --ray: the cluster to join, e.g. ray://head:10001 or auto."),
    ] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            callback=_device_count,
            help="With --ray: how many GPUs measure, or all (the default); with --replay, how "
            "many replay devices serve each recording (default 1).",
        ),
    ] = None,
    replay: Annotated[
        list[Path] | None,
        typer.Option(
            "--replay",
            help="Measure on replay devices serving this recorded run (a Kernel Tuner cache or "
            "T4 file of FILE's space) instead of a GPU; repeatable with --ray, one kind of "
            "device per recording.",
        ),
    ] = None,
    replay_delay: Annotated[
        str,
        typer.Option(
            callback=_replay_delay,
            help="Seconds each replay measurement takes, or 'recorded' (the recorded time).",
        ),
    ] = "0.1",
    sync: Annotated[
        bool,
        typer.Option(
            "--sync",
            help="With --ray: the devices share the search's own batches (IterML: 5, then 10 "
            "configurations), each finished before the next is chosen: the measurements a "
            "one-device tune makes, with devices idle at times. Default: every device kept "
            "busy, each choice made on the results in so far (more measurements to the same "
            "result, sooner).",
        ),
    ] = False,
    gpus: GpusOption = None,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Tune FILE on this machine: compile variants, time them, search, write the header.

    With --ray, on the devices of a Ray cluster; with --replay, on replay devices."""
    with user_errors():
        given = TuneArguments(
            strategy=strategy,
            budget=budget,
            seconds=seconds,
            seed=seed,
            device=device,
            jobs=jobs,
            out_dir=out_dir,
            db_path=db,
            fresh=fresh,
            compiler=compiler,
            compile_timeout=compile_timeout,
            args=tuple(arg or ()),
            repeats=repeats,
            max_repeats=max_repeats,
            stable_within=stable_within,
            warmup=warmup,
            timeout=timeout,
            time_regex=time_regex,
            time_unit=time_unit,
            run_dir=run_dir,
            mode=mode,
            kernel=kernel,
            backend=backend,
            transfer=transfer,
            transfer_from=tuple(transfer_from or ()),
            recheck=recheck,
            recheck_rounds=recheck_rounds,
            retry_failed=retry_failed,
            reference=reference,
            check=check,
            check_rtol=check_rtol,
            flush_l2=flush_l2,
            objective=objective,
            gpus=gpus,
            ray=ray,
            ray_address=ray_address,
            devices=devices,  # type: ignore[arg-type]  # checked by _device_count
            replay=tuple(replay or ()),
            replay_delay=None if replay_delay == "recorded" else float(replay_delay),
            sync=sync,
            compile_only=compile_only,
            arch=arch,
            sized=sizes is not None,
        )
        if sizes is not None:
            name, values = parse_sizes(sizes)
            check_headers_writable(file, out_dir)
            _tune_sizes(file, given, name, values, config, json)
            return
        if compile_only:
            _report_compiles(compile_file(file, given, config_path=config), json)
            return
        # The search and its models (scikit-learn: a second or two) are imported only to tune.
        from annotune.session.tuner import tune_file

        try:
            with _ProgressDisplay(enabled=not json and stderr.is_terminal) as display:
                reports = tune_file(file, given, config_path=config, on_progress=display.update)
        except NoCudaDevice as error:
            stderr.print(render(error), markup=False, highlight=False)
            raise typer.Exit(code=EXIT_FAILED) from None
    if json and ray:  # one report per kind of device, however many kinds
        print_json({"tunes": [report.to_json() for report in reports]})
    elif json:
        print_json(reports[0].to_json())
    else:
        for report in reports:
            if len(reports) > 1:
                stdout.print(f"\n{report.device}", markup=False, highlight=False, style="bold")
            _print_report(report)
    _exit_for(reports)


def _exit_for(reports: list[TuneReport]) -> None:
    """The exit code of one or more tunes: their worst status (`TuneStatus`), each failure
    said on stderr."""
    status = worst_status(report.status for report in reports)
    for report in reports:
        if report.status is TuneStatus.DEVICES_LOST:
            stderr.print(
                f"annotune: error: {report.device}: {report.devices_lost}",
                markup=False,
                highlight=False,
            )
    if status is TuneStatus.INTERRUPTED:
        raise typer.Exit(code=interrupted_exit_code())
    if status is not TuneStatus.DEVICES_LOST:
        for report in reports:
            if report.status is TuneStatus.BASELINE_FAILED:
                _say_baseline_failed(report)
            elif report.status is TuneStatus.NO_BEST:
                _say_no_best(report)
    if status.failed:
        raise typer.Exit(code=EXIT_FAILED)


def _say_baseline_failed(report: TuneReport) -> None:
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


def _say_no_best(report: TuneReport) -> None:
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


def _tune_sizes(
    file: Path,
    given: TuneArguments,
    name: str,
    values: tuple[int, ...],
    config: Path | None,
    json: bool,
) -> None:
    """`tune --sizes`: each size's tune with its own progress and report, then the header."""

    displays: list[_ProgressDisplay] = []

    def update(progress: TuneProgress) -> None:
        displays[-1].update(progress)

    def on_size(index: int, size: int, count: int) -> None:
        if displays:
            displays[-1].__exit__(None, None, None)
        if not json:
            stderr.print(
                f"annotune: tuning {name} = {size} ({index + 1} of {count})", highlight=False
            )
        displays.append(_ProgressDisplay(enabled=not json and stderr.is_terminal).__enter__())

    from annotune.session.sizes import tune_sizes

    try:
        report = tune_sizes(
            file, given, name, values, config_path=config, on_size=on_size, on_progress=update
        )
    except NoCudaDevice as error:
        stderr.print(render(error), markup=False, highlight=False)
        raise typer.Exit(code=EXIT_FAILED) from None
    finally:
        if displays:
            displays[-1].__exit__(None, None, None)
    if json:
        print_json(report.to_json())
    else:
        for outcome in report.outcomes:
            stdout.print(f"\n{name} = {outcome.size}", markup=False, highlight=False, style="bold")
            _print_report(outcome.report)
        if report.skipped:
            skipped = ", ".join(map(str, report.skipped))
            stdout.print(f"not tuned     {name} = {skipped}", markup=False, highlight=False)
        if report.header is not None:
            stdout.print(
                f"\nheader        {report.header} (selects per {name})",
                markup=False,
                highlight=False,
            )
    if report.status is TuneStatus.INTERRUPTED:
        raise typer.Exit(code=interrupted_exit_code())
    if report.baseline_failed is not None:
        _say_baseline_failed(report.baseline_failed.report)
    elif report.status is TuneStatus.NO_BEST:
        stderr.print("annotune: error: no configuration ran successfully", highlight=False)
    if report.status.failed:
        raise typer.Exit(code=EXIT_FAILED)


class _ProgressDisplay:
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

    def __enter__(self) -> _ProgressDisplay:
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


def _print_report(report: TuneReport) -> None:
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
        stdout.print(
            f"final check   {len(verdict.contenders)} contender(s) and the baseline, "
            f"{verdict.rounds} rounds{early}"
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


def _report_compiles(report: CompileReport, json: bool) -> None:
    """Print what --compile-only found; exit 1 when no configuration compiled."""
    if json:
        print_json(report.to_json())
    else:
        for warning in report.warnings:
            stderr.print(f"annotune: warning: {warning}", highlight=False)
        size = "too many to count" if report.space_size is None else f"{report.space_size:,}"
        stdout.print(
            f"compiled      {report.compiled} of {report.compiled + report.failed} "
            f"configurations ({size} legal) in {report.seconds:.1f} s: {report.failed} failed, "
            f"{report.cached} from the compile cache",
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
        stderr.print("annotune: error: no configuration compiled", highlight=False)
        raise typer.Exit(code=EXIT_FAILED)


def _span(low_high: tuple[int, int]) -> str:
    low, high = low_high
    return str(low) if low == high else f"{low}-{high}"
