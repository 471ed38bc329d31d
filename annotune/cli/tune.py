"""`annotune tune FILE`: build, measure and search; write tuned/<device>/<stem>.h.

When the results database (or `--transfer-from` files) holds results of the same source and
space on other GPUs, the search starts from what they teach (`--no-transfer`: it does not).
`--compile-only` compiles the configurations and runs none, for a machine without the GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from annotune.api import tune as api
from annotune.api.tune import arguments
from annotune.cli.app import (
    EXIT_FAILED,
    ConfigPath,
    DbPath,
    JsonFlag,
    app,
    interrupted_exit_code,
    print_json,
    require_matplotlib,
    stderr,
    stdout,
    user_errors,
)
from annotune.cli.params import (
    MAX_COUNT,
    MAX_SEED,
    GpusOption,
    device_count,
    device_name,
    one_of,
    output_dir,
    positive_seconds,
    replay_delay_value,
    share,
    time_pattern,
    tolerance,
)
from annotune.cli.tune_output import (
    ProgressDisplay,
    print_report,
    report_compiles,
    say_baseline_failed,
    say_no_best,
)
from annotune.cli.tune_sizes import exit_for_sizes, tune_sizes_command
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import OBJECTIVES
from annotune.core.render import render
from annotune.run.backends import BACKENDS
from annotune.run.program import TIME_UNITS
from annotune.search import STRATEGY_NAMES
from annotune.session.options import TuneArguments
from annotune.session.report import (
    NoCudaDevice,
    TuneReport,
    TuneStatus,
    worst_status,
)

if TYPE_CHECKING:
    pass


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
            callback=device_count,
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
            callback=replay_delay_value,
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
    plot: Annotated[
        bool,
        typer.Option(
            "--plot",
            help="At the end, draw the tune (`annotune report`) beside the header: "
            "tuned/<device>/<stem>.tune.png.",
        ),
    ] = False,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Tune FILE on this machine: compile variants, time them, search, write the header.

    With --ray, on the devices of a Ray cluster; with --replay, on replay devices."""
    with user_errors():
        if plot:
            require_matplotlib()
            if compile_only:
                raise AnnotuneError(
                    "--plot draws what was measured: --compile-only measures nothing"
                )
        options: dict[str, Any] = dict(
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
            devices=devices,  # type: ignore[arg-type]  # checked by device_count
            replay=tuple(replay or ()),
            replay_delay=None if replay_delay == "recorded" else float(replay_delay),
            sync=sync,
            arch=arch,
        )
        # Every combination that cannot work is refused here, before the source is read.
        given = arguments({**options, "compile_only": compile_only, "sized": sizes is not None})
        if sizes is not None:
            report = tune_sizes_command(file, options, sizes, config, json)
            if plot and report.outcomes:
                last = report.outcomes[-1]
                _plot(file, given, config, json, last.report, size=last.size)
            exit_for_sizes(report)
            return
        if compile_only:
            report_compiles(api.compile_only(file, config=config, **options), json)
            return
        try:
            with ProgressDisplay(enabled=not json and stderr.is_terminal) as display:
                if ray:
                    reports = api.tune_ray(
                        file, config=config, on_progress=display.update, **options
                    )
                else:
                    reports = [api.tune(file, config=config, on_progress=display.update, **options)]
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
            print_report(report)
    if plot:
        for report in reports:
            _plot(file, given, config, json, report)
    _exit_for(reports)


def _plot(
    file: Path,
    given: TuneArguments,
    config: Path | None,
    json: bool,
    report: TuneReport,
    *,
    size: int | None = None,
) -> None:
    """`--plot`: the picture of the tune just made, with its final check; a tune that
    measured nothing valid has none, which is said, not an error on top of the tune's."""
    from annotune.api.report import draw

    if report.evaluations == 0:
        stderr.print("annotune: no picture: nothing was measured", highlight=False)
        return
    with user_errors():
        path = draw(
            file,
            output=None,
            html=False,
            device=report.device,
            size=size,
            out_dir=given.out_dir,
            db=given.db_path,
            config=config,
            verdict=report.recheck,
        ).path
    if not json:
        stderr.print(f"picture       {path}", markup=False, highlight=False)


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
                say_baseline_failed(report)
            elif report.status is TuneStatus.NO_BEST:
                say_no_best(report)
    if status.failed:
        raise typer.Exit(code=EXIT_FAILED)
