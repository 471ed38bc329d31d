"""Replay devices: a recorded tuning run served as if it were a GPU.

A replay device "measures" a configuration by serving what a recording (a Kernel Tuner cache
or a T4 file, `annotune.results.replay.load_replay`) holds for it: status "ok" with the
recorded time, or the recorded failure as the status it stands for. It takes as long as it is
told to (a fixed delay, e.g. 100 ms, or the recorded time itself), so that the distributed
path (`annotune.session.distributed`) and the scale-out benchmark run on a machine without a
GPU, with real waiting and real concurrency. Nothing is compiled for it (`ReplayBuilder`).

It lives in the session because it joins two sibling stages: the recording (`results`) and
the measurer interface the tuning loop drives (`run`'s runners have the same shape).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from annotune.core.records import BuildResult, Measurement, Number
from annotune.results.replay import load_replay, values_in_order

MARKER_STATUS = {
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "runtime_error",
    "InvalidConfig": "runtime_error",
    "compile": "compile_error",
    "runtime": "runtime_error",
    "timeout": "timeout",
    "correctness": "wrong_output",
}
"""A recorded failure (Kernel Tuner's marker, T4's invalidity) -> the status it stands for;
anything else ("missing time", "non-finite time") is a runtime error."""

Key = tuple[float, ...]


@dataclass(frozen=True)
class ReplayTable:
    """What a replay device serves: each recorded configuration's time (ms) or failure
    marker, keyed by its values in the order of `names` (the tuned source's parameters).

    `device` is the GPU the recording names (its file name when it names none); `digest`
    identifies the recorded numbers, so that another recording is another study. With
    `fixed` set, every configuration takes that time (ms) and `entries` is empty: a device
    for measuring the distributed path itself."""

    name: str
    device: str
    digest: str
    names: tuple[str, ...]
    entries: Mapping[Key, tuple[float | None, str]]
    fixed: float | None = None

    def key(self, params: Mapping[str, Number]) -> Key:
        return tuple(float(params[name]) for name in self.names)

    def lookup(self, params: Mapping[str, Number]) -> tuple[float | None, str]:
        """The recorded (time, "") or (None, marker); (None, "") when not recorded."""
        if self.fixed is not None:
            return self.fixed, ""
        return self.entries.get(self.key(params), (None, ""))

    def missing(self, configs: Iterable[Mapping[str, Number]]) -> int:
        """How many of `configs` the recording does not hold."""
        if self.fixed is not None:
            return 0
        return sum(self.key(params) not in self.entries for params in configs)


def load_table(path: Path, names: tuple[str, ...]) -> ReplayTable:
    """The recording at `path` as a table over the parameters `names`; AnnotuneError when it
    cannot be read or records other parameters."""
    dataset = load_replay(path)
    hint = "--replay takes a recording of this source's space"
    values = values_in_order(dataset, names, path, hint=hint)
    entries: dict[Key, tuple[float | None, str]] = {}
    for row, recorded, marker in zip(values, dataset.times, dataset.errors, strict=True):
        time_ = None if math.isnan(recorded) else float(recorded)
        entries.setdefault(tuple(float(v) for v in row), (time_, marker))
    digest = hashlib.sha256(repr(sorted(entries.items())).encode()).hexdigest()
    return ReplayTable(dataset.name, dataset.device or dataset.name, digest, names, entries)


def fixed_table(names: tuple[str, ...], time_ms: float, device: str = "replay") -> ReplayTable:
    """A table in which every configuration takes `time_ms`."""
    return ReplayTable(f"fixed {time_ms} ms", device, f"fixed-{time_ms!r}", names, {}, time_ms)


class ReplayMeasurer:
    """A replay device behind the interface the tuning loop drives (`measure`, `sample`, the
    study key's `to_json`...). `delay` is the seconds each measurement takes; None: the
    recorded time itself (a failure then takes no time). A round of the final check
    (`sample`) takes the recorded time of one run, at most `delay`."""

    run_dir = None
    warnings: tuple[str, ...] = ()

    def __init__(
        self,
        table: ReplayTable,
        delay: float | None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.table = table
        self.delay = delay
        self._sleep = sleep

    def to_json(self) -> dict:
        """What keys the study: the recorded numbers, not how long serving them takes."""
        return {"replay": self.table.name, "recording": self.table.digest}

    def environment(self, params: Mapping[str, Number]) -> str:
        return ""

    def run_of(self, params: Mapping[str, Number]) -> str | None:
        return None  # nothing is compiled: no two configurations are known to be one program

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        recorded, _ = self.table.lookup(build.params)
        self._sleep(self.delay if self.delay is not None else (recorded or 0.0) / 1e3)
        return self._served(build.params)

    def sample(self, build: BuildResult) -> Measurement:
        recorded, _ = self.table.lookup(build.params)
        run = (recorded or 0.0) / 1e3
        self._sleep(run if self.delay is None else min(run, self.delay))
        return self._served(build.params)

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        """A recording has no outputs to check against."""

    def _served(self, params: Mapping[str, Number]) -> Measurement:
        recorded, marker = self.table.lookup(params)
        info = {"timing": "replay", "replay": self.table.name}
        if recorded is not None:
            return Measurement(dict(params), "ok", recorded, (recorded,), compile_info=info)
        if not marker:
            error = f"not in the recording {self.table.name}"
            return Measurement(dict(params), "runtime_error", error=error, compile_info=info)
        status = MARKER_STATUS.get(marker, "runtime_error")
        error = f"recorded as {marker} in {self.table.name}"
        return Measurement(dict(params), status, error=error, compile_info=info)


class ReplayBuilder:
    """The builder of a replay tune: nothing is compiled (a recording serves configurations,
    not programs), so every build succeeds at once and names the recording. `jobs` is how
    many devices serve it: the session asks that many configurations at first."""

    dependency_tracking = True
    verifies_values = True
    nvrtc_unavailable = ""

    def __init__(self, table: ReplayTable, jobs: int = 1):
        self.table = table
        self.jobs = jobs

    def __enter__(self) -> ReplayBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to stop."""

    def identity(self) -> str:
        return f"replay of {self.table.name} (nothing compiled)"

    def program_inputs(self) -> str:
        """No files but the recording's, which its name stands for."""
        return ""

    def build(self, configs: list[dict[str, Number]]) -> list[BuildResult]:
        return [build for _, build in self.build_iter(configs)]

    def build_iter(self, configs: list[dict[str, Number]]) -> Iterator[tuple[int, BuildResult]]:
        for index, params in enumerate(configs):
            yield index, BuildResult(dict(params), Path(self.table.name), cached=True)
