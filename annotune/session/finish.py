"""The end of a tune: the best few and the baseline re-measured interleaved
(`annotune.session.recheck`), whose verdict alone names the winner and its speedup; the
winner's header; and the report, with the notes a user should read beside its numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from annotune import __version__
from annotune.annotate import Problem
from annotune.annotate.problem import kernel_only_params
from annotune.core.diagnostics import AnnotuneError
from annotune.core.output_check import OutputCheck
from annotune.core.records import Number, objective_value
from annotune.emit import render_header, tuned_header_path, write_if_changed
from annotune.emit.provenance import Provenance
from annotune.results.database import config_key
from annotune.results.final_checks import check_key
from annotune.run.device import CPU_PREFIX
from annotune.run.program import RunSpec
from annotune.session.measuring import Measuring, build_iter
from annotune.session.provenance import tuned_from
from annotune.session.recheck import Verdict, recheck
from annotune.session.report import (
    Drift,
    Outcome,
    TuneReport,
    objective_note,
    speedup_claim,
)
from annotune.session.study import energy_error, program_of
from annotune.transfer.prior import Prior


@dataclass(frozen=True)
class Closing:
    """What the end of a tune is told: how many contenders the final check re-measures and in
    how many rounds, the relative noise within which times are the same (`RunSpec`'s
    `stable_within`), whether and where to write the header, and whether the timed regions
    are GPU code (CUDA, OpenACC, a kernel)."""

    recheck: int
    rounds: int
    stable_within: float
    write_header: bool
    out_dir: Path | None
    gpu_code: bool


@dataclass(frozen=True)
class Ending:
    """How the search ended: interrupted (Ctrl-C, or every device lost, `devices_lost` saying
    why), or given up because every configuration failed the same way."""

    interrupted: bool
    gave_up: bool = False
    devices_lost: str = ""


def finish(
    m: Measuring, problem: Problem, closing: Closing, ending: Ending, db_path: Path, prior: Prior
) -> TuneReport:
    p = m.progress
    interrupted = ending.interrupted
    search_best = None
    if p.best_params is not None:
        search_best = Outcome.of(p.best_params, m.store.of(p.best_params))
    verdict, again = None, ""
    checkable = search_best is not None and m.baseline is not None and closing.recheck
    if checkable and not interrupted:
        try:
            with m.stopwatch.part("recheck"):
                verdict, again = _final_check(m, closing)
        except KeyboardInterrupt:
            interrupted = True
    winner = verdict.winner if verdict is not None else p.best_params
    best = Outcome.of(winner, m.store.of(winner)) if winner else None
    default_params = m.space.to_dicts(m.space.default_row()[None, :])[0]
    default = Outcome.of(default_params, m.store.of(default_params))
    header = None
    if best is not None and not m.baseline_failed and closing.write_header:
        header = _write_header(m, problem, closing, best, default, verdict)
    drift = m.drift.summary(m.baseline, closing.stable_within)
    baseline = None
    if m.baseline_params != default_params:
        baseline = Outcome.of(m.baseline_params, m.baseline)
    tally = m.tally
    gpu_code = closing.gpu_code and not p.device.startswith(CPU_PREFIX)
    return TuneReport(
        device=p.device,
        evaluations=p.evaluations,
        reused=p.reused,
        same_program=p.same_program,
        invalid=tally.invalid,
        best=best,
        default=default,
        header=header,
        interrupted=interrupted,
        space_size=p.space_size,
        db_path=db_path,
        prior=prior,
        warnings=p.warnings,
        failures=tuple(sorted(tally.failures.values(), key=lambda f: -f.count)),
        gave_up=ending.gave_up,
        baseline=baseline,
        baseline_failed=m.baseline_failed,
        recheck=verdict,
        search_best=search_best,
        drift=drift,
        transient=p.transient,
        timing="+".join(sorted(tally.timing)),
        notes=_notes(m, verdict, drift, interrupted, ending.devices_lost)
        + ((again,) if again else ())
        + _kernel_only(problem, best.params if best is not None else None),
        run_dir=m.measurer.run_dir,
        wall_breakdown=m.stopwatch.breakdown("GPU" if gpu_code else "host"),
        devices=p.devices,
        devices_lost=ending.devices_lost,
        objective=m.objective,
    )


def _final_check(m: Measuring, closing: Closing) -> tuple[Verdict, str]:
    """The final check of the best `recheck` configurations against the baseline, and why it
    ran again when this tune measured nothing new. With no contender (nothing measured beat
    the baseline) there is nothing to compare: the verdict keeps the baseline after 0 rounds,
    and nothing is built or sampled.

    A tune that measured nothing (every configuration served from the study) reads the final
    check stored for the same baseline, contenders and settings back instead of checking
    again; one that finds none says so. A verdict is stored only when nothing failed in it: a
    failed sample may be the machine's, and is never kept as the check's outcome."""
    contenders = _contenders(m, closing.recheck)
    if not contenders:
        return recheck(m.baseline_params, [], _no_sample, rounds=closing.rounds), ""
    min_speedup = 1.0 + closing.stable_within
    configs = {config_key(c): c for c in [m.baseline_params, *contenders]}
    baseline, *others = configs  # the keys, in order: contenders exclude the baseline
    key = check_key(
        baseline,
        others,
        rounds=closing.rounds,
        min_speedup=min_speedup,
        objective=m.objective,
    )
    again = ""
    if m.progress.measured == 0:
        kept = m.store.final_check(key)
        if kept is not None:
            try:
                return Verdict.from_json(kept[0], configs, kept[1]), ""
            except ValueError:
                pass
        these = f"{len(contenders)} contender{'s' * (len(contenders) != 1)}"
        again = (
            f"every measurement was reused, and the final check ran again: none of these "
            f"{these} with --recheck-rounds {closing.rounds} is stored (the tune that measured "
            "them did not finish its final check, checked others, or its check had a failed "
            "sample)"
        )
    verdict = _checked(m, closing, contenders, min_speedup)
    if not verdict.baseline_error and not any(c.error for c in verdict.contenders):
        m.store.keep_final_check(key, verdict.to_json())
    return verdict, again


def _checked(
    m: Measuring, closing: Closing, contenders: list[dict[str, Number]], min_speedup: float
) -> Verdict:
    """The final check run: the baseline and `contenders` sampled interleaved."""
    m.progress.phase = "recheck"
    m.progress.recheck_rounds = closing.rounds
    m.tally.report()
    objective = m.objective
    configs = [m.baseline_params, *contenders]
    built = build_iter(m.builder, m.through_env, configs)
    builds = {config_key(configs[i]): build for i, build in built}

    def sample(params: Mapping[str, Number]) -> float | str:
        taken = m.measurer.sample(builds[config_key(params)])
        if taken.status != "ok":
            return f"{taken.status}: {taken.error}"
        value = objective_value(taken, objective)
        return value if value is not None else f"no energy: {energy_error(taken)}"

    def round_done(done: int) -> None:
        m.progress.recheck_round = done
        m.tally.report()

    return recheck(
        m.baseline_params,
        contenders,
        sample,
        rounds=closing.rounds,
        min_speedup=min_speedup,
        on_round=round_done,
    )


def _contenders(m: Measuring, count: int) -> list[dict[str, Number]]:
    """The `count` best configurations the search measured faster than the baseline (by the
    objective), one per program: the same program twice would be no second contender."""
    objective = m.objective
    baseline_key = config_key(m.baseline_params)
    baseline = m.store.known.get(baseline_key)
    bar = objective_value(baseline, objective) if baseline is not None else None
    if bar is None:
        return []
    programs = {program_of(baseline)}
    faster = (
        (value, measurement)
        for key, measurement in m.store.known.items()
        if key != baseline_key
        and (value := objective_value(measurement, objective)) is not None
        and value < bar
    )
    contenders: list[dict[str, Number]] = []
    for _, measurement in sorted(faster, key=lambda pair: pair[0]):
        program = program_of(measurement)
        if len(contenders) < count and program not in programs:
            contenders.append(dict(measurement.params))
            programs.add(program)
    return contenders


def _no_sample(params: Mapping[str, Number]) -> float | str:
    raise AssertionError("a final check with no contender samples nothing")


def _write_header(
    m: Measuring,
    problem: Problem,
    closing: Closing,
    best: Outcome,
    default: Outcome,
    verdict: Verdict | None,
) -> Path | None:
    """The winner's header; None, with a warning, when it cannot be written."""
    p = m.progress
    header = tuned_header_path(problem.source, p.device, closing.out_dir)
    text = render_header(
        problem,
        best.params,
        device=p.device,
        space_size=p.space_size,
        measurements=p.evaluations,
        default_time=p.default_time,
        best_time=best.time,
        tool_version=__version__,
        speedup=speedup_claim(verdict, m.objective),
        note=objective_note(m.objective, best, default),
        environment=m.measurer.environment(best.params),
        provenance=_provenance(m, problem, best, verdict),
    )
    try:
        write_if_changed(header, text)
    except AnnotuneError as error:  # checked writable before the tune: say, keep the report
        p.warnings += (f"the tuned header was not written: {error.message}",)
        return None
    return header


def _provenance(
    m: Measuring, problem: Problem, best: Outcome, verdict: Verdict | None
) -> Provenance:
    """What the header was tuned from (`session.provenance`), for `annotune check`."""
    compiler = getattr(m.builder, "compiler", None)  # a replay builder compiles nothing
    claimed = verdict is not None and not verdict.kept_baseline
    return tuned_from(
        problem,
        best.params,
        device=m.progress.device,
        compile_argv=compiler.argv if compiler is not None else None,
        mode=str(m.measurer.to_json().get("mode", "program")),
        objective=m.objective,
        speedup=verdict.speedup if claimed and verdict is not None else None,
        interval=verdict.interval if claimed and verdict is not None else None,
    )


def _kernel_only(problem: Problem, winner: Mapping[str, Number] | None) -> tuple[str, ...]:
    """What the header cannot do for a knob only the kernel's declaration names: no code of the
    program reads its `#define`; the host code that launches the kernel must use the value."""
    only = sorted(kernel_only_params(problem))
    if not only:
        return ()
    kernels = [k for k in problem.kernels if set(only) & k.names()]
    instances = ""
    if winner is not None:
        named = [k.instance(winner) for k in kernels if k.template]
        instances = f" (the winner's instance: {', '.join(named)})" if named else ""
    return (
        f"{', '.join(only)} {'reaches' if len(only) == 1 else 'reach'} the code only through "
        "the declared kernel: the header's "
        f"#define is read by no code of the program, whose host code must launch the kernel "
        f"with the tuned values{instances}",
    )


def _output_rules(m: Measuring) -> OutputCheck | None:
    """The config's `[file.check]` the runs were checked by (program mode, checking on)."""
    spec = getattr(m.measurer, "run_spec", None)
    return spec.output_check if isinstance(spec, RunSpec) else None


def _notes(
    m: Measuring, verdict: Verdict | None, drift: Drift | None, interrupted: bool, lost_all: str
) -> tuple:
    notes = []
    progress, tally, builder = m.progress, m.tally, m.builder
    if m.baseline_failed:
        notes.append(
            f"the baseline {m.baseline_params} failed ({m.baseline_failed}): there is "
            "nothing to check outputs against or to compare times with"
        )
    elif m.baseline is None:
        notes.append("the baseline failed; outputs are not checked and no speedup is claimed")
    rules = _output_rules(m)
    if rules is not None and not m.baseline_failed:
        notes.append(
            f"outputs are checked by the config's [file.check] ({rules.described()}): a "
            "configuration printing anything else is wrong output, never a winner"
        )
    if verdict is not None and verdict.baseline_error:
        notes.append(
            f"the baseline failed in the final check ({verdict.baseline_error}); "
            "no speedup is claimed"
        )
    elif verdict is not None and not verdict.contenders:
        notes.append(
            "nothing the search measured was faster than the baseline: the final check had "
            "nothing to compare, and the baseline is kept"
        )
    elif verdict is not None and verdict.kept_baseline:
        notes.append(
            "no configuration was significantly faster than the baseline in the final "
            "check; the baseline is kept"
        )
    elif verdict is None and progress.best_params is not None and m.baseline:
        why = "interrupted" if interrupted else "--recheck 0"
        why = "every device was lost" if lost_all else why
        notes.append(f"no speedup is claimed: the final check did not run ({why})")
    if drift is not None and drift.noisy:
        notes.append(
            f"noisy: the default's time moved by {drift.largest:+.1%} during the tune, "
            "outside its first measurement's 95% interval"
        )
    if "wall" in tally.timing:
        notes.append(
            "times are the process's wall time, start-up included (no timing header and "
            "no --time-regex)"
        )
    if tally.throttled:
        reasons = ", ".join(sorted(tally.throttled))
        count = max(tally.throttled.values())
        notes.append(f"the GPU was throttled ({reasons}) during {count} measurements")
    if not builder.dependency_tracking:
        notes.append(
            f"{builder.compiler.argv[0]} does not list the files it reads (-MD -MF): "
            "the compile cache sees the variant and its -I directories only, so rerun with "
            "--fresh after editing a header found some other way"
        )
    if not builder.verifies_values:
        notes.append(
            f"{builder.compiler.argv[0]} cannot be run to preprocess only (-E -dM): "
            "the tuned values were not checked to reach the compiler"
        )
    if m.fallbacks:
        notes.append(
            f"{len(m.fallbacks)} variants were compiled by nvcc because NVRTC could not "
            f"compile them (first: {m.fallbacks[0]})"
        )
    if m.store.by_others:
        notes.append(
            f"{m.store.by_others} configurations were measured by another annotune tuning the "
            "same study at the same time"
        )
    if progress.transient:
        notes.append(
            f"{progress.transient} transient failures were not stored; the next run "
            "measures them again"
        )
    lost = [d for d in progress.devices if d.lost]
    if lost and len(lost) < len(progress.devices):
        notes.append(
            f"{len(lost)} of {len(progress.devices)} devices were lost during the tune "
            f"({lost[0].name}: {lost[0].lost}); the others measured what they held"
        )
    return tuple(notes)
