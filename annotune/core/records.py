"""The records that flow between pipeline stages, in one place every stage may import.

A stage hands the next one plain, immutable values: the legal configurations as a matrix
(`Candidates`), a strategy's view of one measurement (`Result`), other tasks' data for
transfer (`TaskData`), one compiled variant (`BuildResult`) and one stored measurement
(`Measurement`). Nothing here knows how a record is produced or consumed.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from annotune.core.stats import median_interval

Number = int | float


@dataclass(frozen=True)
class Candidates:
    """Every legal configuration of a search space, one row each.

    `values` holds the actual parameter values (float64, shape (n, d)); `names` the d
    parameter names in column order. Strategies refer to configurations by row index.
    """

    values: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.values.ndim != 2 or self.values.shape[1] != len(self.names):
            raise ValueError(
                f"values must be (n, {len(self.names)}), got shape {self.values.shape}"
            )

    def __len__(self) -> int:
        return self.values.shape[0]


@dataclass(frozen=True)
class TaskData:
    """Measurements of the same parameters on another task: another GPU or problem size.

    Strategies that learn across tasks (predictive tuning's problem-size features, the
    architecture-adaptive device features) append `features` to every row's parameters.
    `values` has the target's column order (`Candidates.names`); `times[i]` is NaN when row i
    was invalid. `name` says where the data came from (e.g. the GPU), for reports.
    """

    name: str
    values: np.ndarray
    times: np.ndarray
    features: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.values.ndim != 2 or self.times.shape != (self.values.shape[0],):
            raise ValueError("values must be (m, d) and times (m,)")


def check_task_features(prior: Sequence[TaskData], task_features: Sequence[float]) -> None:
    """ValueError unless every prior task has as many features as the target: a model row
    is parameters plus features, and rows of different widths cannot be stacked."""
    for task in prior:
        if len(task.features) != len(task_features):
            raise ValueError(
                f"prior task {task.name!r} has {len(task.features)} features, "
                f"the target {len(task_features)}"
            )


@dataclass(frozen=True)
class Result:
    """One measurement: `time` (lower is better) or None when the configuration is invalid."""

    index: int
    time: float | None
    error: str = ""

    @property
    def valid(self) -> bool:
        return self.time is not None


def normalized_performance(times: np.ndarray) -> np.ndarray:
    """Normalized performance: best time / time, 0 where the time is NaN (invalid)."""
    times = np.asarray(times, dtype=np.float64)
    valid = ~np.isnan(times)
    out = np.zeros(times.size)
    if valid.any():
        np.divide(times[valid].min(), times, out=out, where=valid)
    return out


STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "wrong_output")
"""`ok` is the only valid status; the others say why a configuration has no time."""


TRANSIENT_ERRNOS = frozenset({errno.ENOMEM, errno.EAGAIN, errno.ENOSPC, errno.EMFILE, errno.ENFILE})
"""Errors starting a process that say the machine is short of something, not that it is wrong."""


@dataclass(frozen=True)
class Measurement:
    """One configuration measured once (or found invalid).

    `time` is the median in milliseconds, present exactly when `status` is "ok"; `times` are
    the individual repeats; `error` keeps the reason for any other status; `compile_info`
    holds what the compiler reported (registers, shared memory, spills, compile seconds).
    `created` is set by the database when the measurement is recorded. A `transient` failure
    (killed from outside, out of disk or memory, a compiler killed) says nothing about the
    configuration: it is retried, and never stored as the configuration's result.
    `energy` is the median energy of one run in joules (a kernel launch, or a program's whole
    process run), `energies` its samples; both only for an "ok" measurement whose runner had
    an energy meter (`annotune.run.energy`), and None / () where energy was not measured.
    """

    params: Mapping[str, Number]
    status: str
    time: float | None = None
    times: tuple[float, ...] = ()
    error: str = ""
    compile_info: Mapping[str, Any] = field(default_factory=dict)
    created: str = ""
    transient: bool = False
    energy: float | None = None
    energies: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if (self.status == "ok") != (self.time is not None):
            raise ValueError("a time is given exactly when the status is 'ok'")
        if self.time is not None and not math.isfinite(self.time):
            raise ValueError(f"time must be finite, not {self.time}")
        if self.transient and self.status == "ok":
            raise ValueError("only a failure can be transient")
        if (self.energy is None) != (not self.energies):
            raise ValueError("an energy is given exactly when its samples are")
        if self.energy is not None and self.status != "ok":
            raise ValueError("only an 'ok' measurement has an energy")
        for joules in (self.energy, *self.energies):
            if joules is not None and not (math.isfinite(joules) and joules > 0):
                raise ValueError(f"an energy must be finite and positive, not {joules}")

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval of the median time (None with too few samples or no time)."""
        return median_interval(self.times) if self.status == "ok" else None

    @property
    def energy_interval(self) -> tuple[float, float] | None:
        """The 95% interval of the median energy (None with too few samples or no energy)."""
        return median_interval(self.energies) if self.energy is not None else None


OBJECTIVES = ("time", "energy", "edp")
"""What a tune can minimise: the median time, the median energy of one run, or their product."""

OBJECTIVE_UNITS = {"time": "ms", "energy": "J", "edp": "J*s"}
"""The unit of each objective's value (`objective_value`)."""

OBJECTIVE_GAINS = {"time": "faster", "energy": "less energy", "edp": "lower energy x delay"}
"""What a ratio of the baseline's value over the winner's means, for each objective."""


def objective_value(measurement: Measurement, objective: str) -> float | None:
    """The value `objective` minimises for this measurement, in `OBJECTIVE_UNITS`: the time
    (ms), the energy (J per run) or the energy-delay product (J * s: the energy times the
    time in seconds). None when the measurement has no such value: it failed, or its energy
    was not measured. ValueError for an objective not in OBJECTIVES."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    time, energy = measurement.time, measurement.energy
    if time is None or objective == "time":
        return time
    if energy is None or objective == "energy":
        return energy
    return energy * time / 1e3


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (`nvcc -Xptxas -v`)."""

    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0


@dataclass(frozen=True)
class BuildResult:
    """One configuration's build: an executable, or `error` saying why not (`transient` when
    the failure was the machine's, not the configuration's: never cached). `program` is the
    hash of its preprocessed source, or of its cubin when NVRTC compiled it ("" when unknown):
    equal hashes, the same program. `fallback` says why NVRTC did not compile a variant that
    nvcc then built (NVRTC's first error line; "" when NVRTC was not asked to). `symbols`: each
    template kernel's symbol in the cubin, by kernel name (its instance depends on the
    configuration; other kernels are found by `KernelSpec.mangled_name`)."""

    params: dict[str, Number]
    executable: Path | None
    error: str = ""
    seconds: float = 0.0
    cached: bool = False
    resources: dict[str, KernelResources] = field(default_factory=dict)
    transient: bool = False
    program: str = ""
    fallback: str = ""
    symbols: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.executable is not None
