"""A tune's bookkeeping: the study's measurements as this tune knows them, with the claims that
let concurrent tunes of one study share the work (`Store`), and what it counted of them for
the progress display and the report (`Tally`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from annotune.core.records import Measurement, Number, Result, objective_value
from annotune.results.database import Owner, Study, config_key
from annotune.results.storage import Storage
from annotune.run.program import RunSpec
from annotune.session.report import FailureKind, ProgressCallback, TuneProgress, failure_kind

GIVE_UP_AFTER = 8
"""Configurations that all failed the same way, with none valid, before the search stops."""


class Tally:
    """What was counted of the configurations measured or served: the progress shown after
    each, the invalid ones by kind of failure, where times came from, and throttling."""

    def __init__(self, progress: TuneProgress, on_progress: ProgressCallback | None):
        self.progress = progress
        self.on_progress = on_progress
        self.seen: set[str] = set()
        self.invalid = 0
        self.failures: dict[tuple[str, str], FailureKind] = {}
        self.unmetered = 0  # configurations that ran with no energy, tuning for energy
        self.timing: set[str] = set()
        self.throttled: Counter[str] = Counter()

    def report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)

    def noted(self, measurement: Measurement) -> None:
        """Note where a new measurement's time came from and whether the GPU throttled."""
        if measurement.status == "ok":
            self.timing.add(measurement.compile_info.get("timing", "events"))
            self.throttled.update(measurement.compile_info.get("gpu", {}).get("throttled", ()))

    def count(
        self, params: dict[str, Number], m: Measurement, *, reused: bool, shared: bool = False
    ) -> None:
        key = config_key(params)
        if key in self.seen:
            return
        self.seen.add(key)
        p = self.progress
        p.evaluations += 1
        p.reused += reused
        p.same_program += shared
        p.measured += not (reused or shared)
        if m.transient:
            p.transient += 1
            if p.transient == 1:
                p.warnings += (
                    f"a transient failure, not stored (measured again next run): {m.error}",
                )
        elif m.status == "ok":
            value = objective_value(m, p.objective)
            if value is not None and (p.best_value is None or value < p.best_value):
                p.best_value, p.best_time, p.best_params = value, m.time, dict(params)
            elif value is None and not self.unmetered:
                p.warnings += (
                    f"{params} ran but has no energy ({energy_error(m)}): the search takes "
                    "it as failed; so will any other such configuration",
                )
            self.unmetered += value is None
        else:
            self.invalid += 1
            p.compile_failures += m.status == "compile_error"
            p.run_failures += m.status != "compile_error"
            kind = failure_kind(m.status, m.error)
            known = self.failures.get(kind)
            if known is None:
                self.failures[kind] = FailureKind(m.status, 1, m.error, dict(params))
                p.failures.append(self.failures[kind])
            else:
                self.failures[kind] = replace(known, count=known.count + 1)
        self.report()

    def all_failed_alike(self) -> bool:
        """True once `GIVE_UP_AFTER` configurations and nothing else all failed the same way:
        then the program or its environment is broken (no GPU, a missing input), not the
        configurations, and more measurements would only repeat the failure."""
        kinds = list(self.failures.values())
        return (
            self.progress.best_time is None and len(kinds) == 1 and kinds[0].count >= GIVE_UP_AFTER
        )


class Store:
    """The study's measurements as this tune knows them, each served again rather than
    measured twice, and the measurement of each program for configurations of the same
    program. A configuration is claimed in the database before it is built, so that another
    tune of the same study running now neither runs nor builds it at the same time."""

    def __init__(self, db: Storage, study: Study, tally: Tally, lifetime: float):
        self.db = db
        self.study = study
        self.tally = tally
        self.known: dict[str, Measurement] = {}
        self.programs: dict[str, Measurement] = {}
        for measurement in db.measurements(study):
            self.learn(measurement)
        self.owner = Owner.here()
        self.lifetime = lifetime
        self.by_others = 0  # configurations another tune of this study measured meanwhile

    def claim(self, params: Mapping[str, Number]) -> bool:
        return self.db.claim(self.study, params, self.owner, lifetime=self.lifetime)

    def release(self, params: Mapping[str, Number]) -> None:
        self.db.release(self.study, params, self.owner)

    def of(self, params: Mapping[str, Number]) -> Measurement | None:
        """What this tune knows of `params`, without asking the database."""
        return self.known.get(config_key(params))

    def stored(self, params: Mapping[str, Number]) -> Measurement | None:
        """The measurement of `params` this tune knows, or one another tune stored since."""
        known = self.known.get(config_key(params))
        if known is None:
            known = self.db.lookup(self.study, params)
            if known is not None:
                self.learn(known)
                self.by_others += 1
        return known

    def learn(self, measurement: Measurement) -> None:
        """Know a stored measurement: served again, and its program's for configurations of
        the same program."""
        self.known[config_key(measurement.params)] = measurement
        program = measurement.compile_info.get("program")
        if program and "same_program_as" not in measurement.compile_info:
            self.programs.setdefault(program, measurement)

    def keep(self, measurement: Measurement, *, shared: bool) -> Measurement:
        """Record a measurement, which ends its claim, and count it; a transient failure is
        not recorded and its claim released, so another tune may measure it at once. When
        another tune recorded the configuration first, its measurement is the study's."""
        if measurement.transient:
            self.release(measurement.params)
        else:
            if not self.db.record(self.study, measurement):
                measurement = self.db.lookup(self.study, measurement.params) or measurement
            self.known[config_key(measurement.params)] = measurement
        self.tally.count(measurement.params, measurement, reused=False, shared=shared)
        return measurement

    def final_check(self, key: str) -> tuple[dict, str] | None:
        """The final check stored under `key` for this study, and when it was stored."""
        return self.db.final_check(self.study, key)

    def keep_final_check(self, key: str, verdict: Mapping[str, object]) -> None:
        self.db.record_final_check(self.study, key, verdict)

    def served(self, params: dict[str, Number]) -> Measurement | None:
        """`stored`, counted as reused when there is one."""
        known = self.stored(params)
        if known is not None:
            self.tally.count(params, known, reused=True)
        return known


def claim_lifetime(compile_timeout: float, run: RunSpec) -> float:
    """The longest a measurement may take, twice (a transient failure is rebuilt and run
    again): after that a claim on it lapses even if its tune's process seems alive."""
    return 2.0 * (compile_timeout + run.timeout * (run.warmup + run.max_repeats + 1))


def result_of(row: int, measurement: Measurement, objective: str) -> Result:
    """What the strategy is told of a measurement: its objective's value, or why it has none
    (a failure; or, for energy, a run whose energy the meter could not vouch for)."""
    value = objective_value(measurement, objective) if measurement.status == "ok" else None
    if measurement.status == "ok" and value is None:
        return Result(row, None, f"no energy: {energy_error(measurement)}")
    return Result(row, value, measurement.error)


def results_of(
    rows: Sequence[int], measurements: Sequence[Measurement], objective: str
) -> list[Result]:
    return [result_of(row, m, objective) for row, m in zip(rows, measurements, strict=True)]


def energy_error(measurement: Measurement) -> str:
    said = measurement.compile_info.get("energy")
    error = said.get("error") if isinstance(said, dict) else None
    return error or "the runner measured none"


def shared(measured: Measurement, params: Mapping[str, Number]) -> Measurement:
    """`measured`'s measurement for `params`, a configuration of the same program."""
    info = {**measured.compile_info, "same_program_as": dict(measured.params)}
    return replace(measured, params=dict(params), compile_info=info, created="")


def program_of(measurement: Measurement) -> object:
    """The program a measurement ran: its hash, or its own params when there is none."""
    return measurement.compile_info.get("program") or config_key(measurement.params)
