"""`annotune check FILE`: is this machine's committed tuned header of FILE still true?

Without measuring (`session.check`): stale when anything its provenance records has changed
since the tune (a file the program is built from, a knob's declaration or domain, the
compiler, the device), each named. `--measure` also re-measures the header's configuration
against the default, interleaved, with the final check's statistics (`session.remeasure`),
and fails when it is no longer faster with that confidence. Exit codes: 0 the header holds,
1 stale or no longer faster, 2 bad input. On unchanged files this imports neither libclang,
numpy nor rich, like `build`: it is meant for every CI build.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from annotune.api.check import check as api_check
from annotune.cli.app import EXIT_FAILED, ConfigPath, JsonFlag, app, print_json, user_errors
from annotune.cli.params import HeaderDevice, HeaderDir
from annotune.core.diagnostics import printable
from annotune.session.check import HeaderCheck

if TYPE_CHECKING:
    from annotune.session.remeasure import Remeasure


@app.command()
def check(
    file: Annotated[Path, typer.Argument(help="The annotated source the header belongs to.")],
    device: HeaderDevice = None,
    out_dir: HeaderDir = None,
    header: Annotated[
        Path | None,
        typer.Option(dir_okay=False, help="Check this header instead of the device's own."),
    ] = None,
    config: ConfigPath = None,
    measure: Annotated[
        bool,
        typer.Option(
            "--measure",
            help="Also re-measure the header's configuration against the default, "
            "interleaved; fail when it is no longer faster with 95% confidence.",
        ),
    ] = False,
    rounds: Annotated[
        int, typer.Option(min=5, max=1000, help="With --measure: the most interleaved rounds.")
    ] = 30,
    compiler: Annotated[
        str | None,
        typer.Option(help="With --measure: the compile command, as `tune --compiler`."),
    ] = None,
    arg: Annotated[
        list[str] | None,
        typer.Option(help="With --measure: a program argument (repeatable), as `tune --arg`."),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            file_okay=False, help="With --measure: where the program runs, as `tune --run-dir`."
        ),
    ] = None,
    json: JsonFlag = False,
) -> None:
    """Say whether the tuned header of FILE for this device still holds: exit 0 when it does,
    1 when it is stale (or, with --measure, no longer faster), 2 for bad input."""
    with user_errors():
        result = api_check(
            file,
            device=device,
            out_dir=out_dir,
            header=header,
            config=config,
            measure=measure,
            rounds=rounds,
            compiler=compiler,
            args=tuple(arg or ()),
            run_dir=run_dir,
            on_measure=None if json else _say_measuring,
        )
    if json:
        print_json(result.to_json())
    else:
        _print_check(result.found)
        if result.measured is not None:
            _print_measure(result.measured)
    if not result.holds:
        raise typer.Exit(code=EXIT_FAILED)


def _say_measuring() -> None:
    print(
        "annotune: re-measuring the tuned configuration against the default, interleaved",
        file=sys.stderr,
    )


def _print_check(found: HeaderCheck) -> None:
    p = found.provenance
    state = "stale" if found.stale else "true"
    print(printable(f"{state}: {found.header} ({found.source} on {found.device})"))
    if p is not None:
        claim = _claim(p.speedup, p.interval) if p.speedup else "no speedup claimed"
        tool = f"{p.compiler.command} at {p.compiler.path}" if p.compiler.command else "none"
        print(printable(f"tuned     {p.date} on {p.device}: {claim}"))
        print(printable(f"compared  {found.files} files, the compiler ({tool}), the device"))
    for change in found.changes:
        print(printable(f"{change.kind:<9} {change.why}"))


def _print_measure(m: Remeasure) -> None:
    unit = "ms" if m.objective == "time" else "J" if m.objective == "energy" else "J*s"
    if m.same:
        print("measured  nothing: the header holds the defaults")
        return
    if m.error:
        print(printable(f"measured  {m.error}"))
        return
    default = f"{m.default_value:.4g} {unit}" if m.default_value is not None else "none"
    tuned = f"{m.tuned_value:.4g} {unit}" if m.tuned_value is not None else "none"
    verdict = (
        "faster than the default"
        if m.faster
        else "slower than the default"
        if m.slower
        else f"no longer faster than the default by more than {m.min_speedup - 1:.0%}"
    )
    speedup = _claim(m.speedup, m.interval) if m.speedup is not None else "no ratio"
    print(f"measured  default {default}, tuned {tuned} ({m.rounds} rounds, interleaved)")
    print(printable(f"speedup   {speedup}: {verdict}"))


def _claim(speedup: float | None, interval: tuple[float, float] | None) -> str:
    if speedup is None:
        return "no speedup"
    if interval is None:
        return f"{speedup:.3g}x (too few rounds for an interval)"
    return f"{speedup:.3g}x (95% interval {interval[0]:.3g}-{interval[1]:.3g})"
