"""What a tune returns and shows: its progress as it goes, the outcome of each configuration
that matters, the default's drift, where the wall time went, and the report itself; and the
header's lines on the speedup and the objective, made from them."""

from __future__ import annotations

import enum
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import OBJECTIVE_GAINS, OBJECTIVE_UNITS, Measurement, Number
from annotune.session.concurrent import DeviceRate
from annotune.session.recheck import Verdict

if TYPE_CHECKING:  # the prior's module imports the models (scikit-learn): seconds
    from annotune.transfer.prior import Prior


class NoCudaDevice(AnnotuneError):
    """A CUDA tune on a machine without a CUDA GPU: not a mistake in the input but in where it
    runs, so the command line exits with 1, not 2."""


@dataclass(frozen=True)
class FailureKind:
    """Invalid configurations that failed the same way, numbers aside: how many, and the first
    one's own error and parameters, so a user sees why without opening the database."""

    status: str
    count: int
    error: str
    params: dict[str, Number]

    def to_json(self) -> dict:
        return asdict(self)


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def failure_kind(status: str, error: str) -> tuple[str, str]:
    """Failures that differ only in their numbers (sizes, indices, line numbers) are one kind."""
    return status, _NUMBER.sub("#", error)


@dataclass
class TuneProgress:
    """What a progress display shows; updated after every measurement."""

    device: str
    space_size: int | None  # legal configurations; None when too many to count
    budget: int | None
    strategy: str
    iteration: int = 0
    evaluations: int = 0
    reused: int = 0
    same_program: int = 0  # served by another configuration's measurement of the same program
    measured: int = 0
    compile_failures: int = 0
    run_failures: int = 0
    best_time: float | None = None
    best_params: dict[str, Number] | None = None
    default_time: float | None = None
    failures: list[FailureKind] = field(default_factory=list)  # each kind when first seen
    transfer_from: tuple[str, ...] = ()  # the GPUs the search learned from
    warnings: tuple[str, ...] = ()
    transient: int = 0  # failures retried and not stored (measured again next run)
    phase: str = "search"  # "search", then "recheck" while the final check runs
    recheck_round: int = 0  # the final check's rounds done, of `recheck_rounds`
    recheck_rounds: int = 0
    devices: tuple[DeviceRate, ...] = ()  # each device's rate, when several measure
    objective: str = "time"  # what best_value is (`OBJECTIVES`), in `OBJECTIVE_UNITS`
    best_value: float | None = None  # the best configuration's objective (its time: best_time)


@dataclass(frozen=True)
class Outcome:
    """A configuration's median time in the search, its 95% interval and sample count, and
    its median energy per run (J) with its interval when energy was measured."""

    params: dict[str, Number]
    time: float | None
    interval: tuple[float, float] | None = None
    samples: int = 0
    energy: float | None = None
    energy_interval: tuple[float, float] | None = None

    @classmethod
    def of(cls, params: dict[str, Number], measurement: Measurement | None) -> Outcome:
        if measurement is None or measurement.status != "ok":
            return cls(params, None)
        return cls(
            params,
            measurement.time,
            measurement.interval,
            len(measurement.times),
            measurement.energy,
            measurement.energy_interval,
        )

    def to_json(self) -> dict:
        data = {
            "params": self.params,
            "time": self.time,
            "interval": list(self.interval) if self.interval else None,
            "samples": self.samples,
        }
        if self.energy is not None:
            data["energy"] = self.energy
            data["energy_interval"] = list(self.energy_interval) if self.energy_interval else None
        return data


@dataclass(frozen=True)
class Drift:
    """The default re-measured during the tune: each median, and whether one left the first
    measurement's interval (then the machine's speed changed under the tune: noisy)."""

    medians: tuple[float, ...]
    largest: float  # the largest relative change from the first median, e.g. 0.07 for 7%
    noisy: bool

    def to_json(self) -> dict:
        return {"medians": list(self.medians), "largest": self.largest, "noisy": self.noisy}


@dataclass(frozen=True)
class WallBreakdown:
    """Where a tune's wall time went, in seconds. `compile` is only the time spent waiting for
    a compile with nothing to measure (compiles overlap runs); `compiled` is the compile time
    summed over the pool's workers, which may exceed it. `startup` is the measurements' set-up
    (program mode: process start-up and whatever runs outside the timed region; kernel mode:
    loading the module, the checked launch, warm-up), `timeout` the same of measurements that
    timed out, which is mostly runs killed at the limit and no start-up, `run` the rest of the
    measurements, `gpu` the device's busy time in timed runs (program mode: the timed
    regions). `busy_on` says what that time kept busy: "GPU" for GPU code on a GPU, "host" for
    a host program or a CPU device, whose timed regions are no GPU's. With several devices,
    `startup`, `timeout` and `gpu` are averaged over them, and the measurements' time is the
    time the search waited on them."""

    wall: float
    compile: float
    startup: float
    timeout: float
    run: float
    search: float
    recheck: float
    other: float
    compiled: float
    gpu: float
    busy_on: str

    def to_json(self) -> dict:
        return {k: v if isinstance(v, str) else round(v, 3) for k, v in asdict(self).items()}


class Stopwatch:
    """Seconds spent in each part of a tune, summed over the tune."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.parts: Counter[str] = Counter()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - started

    def add(self, name: str, seconds: float) -> None:
        self.parts[name] += seconds

    def book(self, measurement: Measurement, share: float = 1.0) -> None:
        """A measurement's device time (`share` of it: one device's of several): its set-up as
        start-up, or as time lost to a timeout when it timed out, and its timed regions."""
        spent = measurement.compile_info.get("run_seconds", {})
        setup = "timeout" if measurement.status == "timeout" else "startup"
        self.add(setup, spent.get("setup", 0.0) * share)
        self.add("gpu", spent.get("gpu", 0.0) * share)

    def breakdown(self, busy_on: str) -> WallBreakdown:
        parts = self.parts
        wall = time.perf_counter() - self.started
        measure = parts["measure"]
        accounted = parts["compile"] + measure + parts["search"] + parts["recheck"]
        startup = min(parts["startup"], measure)
        timeout = min(parts["timeout"], measure - startup)
        return WallBreakdown(
            wall=wall,
            compile=parts["compile"],
            startup=startup,
            timeout=timeout,
            run=max(0.0, measure - startup - timeout),
            search=parts["search"],
            recheck=parts["recheck"],
            other=max(0.0, wall - accounted),
            compiled=parts["compiled"],
            gpu=parts["gpu"],
            busy_on=busy_on,
        )


class TuneStatus(enum.Enum):
    """How a tune ended, worst last: what its exit status says (`worst_status` of several)."""

    OK = 0  # a best configuration, checked against the baseline
    NO_BEST = 1  # nothing ran successfully
    BASELINE_FAILED = 2  # the baseline failed: nothing to check or compare against
    INTERRUPTED = 3  # stopped by a signal: what was measured is kept
    DEVICES_LOST = 4  # every device was lost

    @property
    def failed(self) -> bool:
        """Whether a command ending so fails (an interruption has an exit code of its own)."""
        return self is not TuneStatus.OK


def worst_status(statuses: Iterable[TuneStatus]) -> TuneStatus:
    """The status of several tunes run as one (devices of several kinds, sizes)."""
    return max(statuses, key=lambda status: status.value, default=TuneStatus.OK)


@dataclass(frozen=True)
class TuneReport:
    device: str
    evaluations: int
    reused: int
    invalid: int
    best: Outcome | None
    default: Outcome
    header: Path | None
    interrupted: bool
    space_size: int | None
    db_path: Path
    prior: Prior | None = None
    warnings: tuple[str, ...] = ()
    failures: tuple[FailureKind, ...] = ()  # the most common first
    gave_up: bool = False  # stopped early: every configuration failed the same way
    baseline: Outcome | None = None  # the user's reference, when one was given
    baseline_failed: str = ""  # why the baseline failed (the tune then stops)
    recheck: Verdict | None = None  # the final check; None when it did not run
    search_best: Outcome | None = None  # the fastest in the search, before the final check
    drift: Drift | None = None
    transient: int = 0
    timing: str = ""  # where times came from: "header", "regex", "wall" (start-up included)
    notes: tuple[str, ...] = ()  # what the user should know about these numbers
    run_dir: Path | None = None  # where the program ran (program mode)
    same_program: int = 0  # configurations served by a measurement of the same program
    wall_breakdown: WallBreakdown | None = None
    devices: tuple[DeviceRate, ...] = ()  # what each device measured (several devices)
    devices_lost: str = ""  # why the tune stopped early: every device was lost
    objective: str = "time"  # what was minimised; the speedup is the baseline's over the winner's

    @property
    def status(self) -> TuneStatus:
        """How this tune ended, for its exit status."""
        if self.devices_lost:
            return TuneStatus.DEVICES_LOST
        if self.interrupted:
            return TuneStatus.INTERRUPTED
        if self.baseline_failed:
            return TuneStatus.BASELINE_FAILED
        return TuneStatus.NO_BEST if self.best is None else TuneStatus.OK

    def to_json(self) -> dict:
        verdict = self.recheck
        return {
            "device": self.device,
            "objective": self.objective,
            "evaluations": self.evaluations,
            "reused": self.reused,
            "same_program": self.same_program,
            "invalid": self.invalid,
            "best": self.best.to_json() if self.best else None,
            "search_best": self.search_best.to_json() if self.search_best else None,
            "default": self.default.to_json(),
            "baseline": self.baseline.to_json() if self.baseline else None,
            "baseline_failed": self.baseline_failed,
            "speedup": verdict.speedup if verdict else None,
            "speedup_interval": list(verdict.interval) if verdict and verdict.interval else None,
            "kept_default": verdict.kept_baseline if verdict else None,
            "recheck": _verdict_json(verdict),
            "drift": self.drift.to_json() if self.drift else None,
            "transient": self.transient,
            "timing": self.timing,
            "notes": list(self.notes),
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "header": str(self.header) if self.header else None,
            "interrupted": self.interrupted,
            "space_size": self.space_size,
            "db": str(self.db_path),
            "transfer": self.prior.to_json() if self.prior and self.prior.tasks else None,
            "warnings": list(self.warnings),
            "failures": [f.to_json() for f in self.failures],
            "gave_up": self.gave_up,
            "wall_breakdown": self.wall_breakdown.to_json() if self.wall_breakdown else None,
            "devices": [d.to_json() for d in self.devices],
            "devices_lost": self.devices_lost,
        }


def _verdict_json(verdict: Verdict | None) -> dict | None:
    if verdict is None:
        return None
    return {
        "rounds": verdict.rounds,
        "stopped_early": verdict.stopped_early,
        "contenders": [c.to_json() for c in verdict.contenders],
        "baseline_error": verdict.baseline_error,
        "baseline_time": verdict.baseline_time,  # its median in the check, as each contender's
        "stored": verdict.stored or None,  # when read back rather than checked: when stored
    }


ProgressCallback = Callable[[TuneProgress], None]


def speedup_claim(verdict: Verdict | None, objective: str = "time") -> str:
    """The header's speedup line: only what the final check measured (for energy or EDP,
    how many times less of it the winner takes than the baseline)."""
    if verdict is None or verdict.speedup is None:
        return ""
    if verdict.kept_baseline:
        return "none significant in an interleaved re-check; the baseline is kept"
    low, high = verdict.interval  # type: ignore[misc]
    what = "the baseline" if objective == "time" else OBJECTIVE_GAINS[objective]
    return (
        f"{verdict.speedup:.2f}x {what} (95% interval {low:.2f}-{high:.2f}, "
        f"interleaved re-check, {verdict.rounds} rounds)"
    )


def objective_note(objective: str, best: Outcome, default: Outcome) -> str:
    """The header's line on what was minimised, when not time: the energies per run."""
    if objective == "time":
        return ""

    def joules(outcome: Outcome) -> str:
        return f"{outcome.energy:.4g} J" if outcome.energy is not None else "not measured"

    unit = OBJECTIVE_UNITS[objective]
    return (
        f"tuned for {objective} ({unit}); energy per run: {joules(best)}, default {joules(default)}"
    )
