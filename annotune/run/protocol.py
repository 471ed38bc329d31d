"""What measures: one `measure` signature for every runner and measurer.

A `Runner` turns one `BuildResult` into one `Measurement`: `measure(build, stop_above=None)`.
Its failures are data (a status and a reason), never exceptions; an exception means the
device itself is unusable. What a measurement is checked against (a program's
`annotune-check:` value, a kernel's output arrays) is the runner's state, set once the
baseline is known, not an argument: so the program and kernel runners, the replay device and
a pool of devices all take the same arguments and give the same record. `to_json` says what
changes a time: the runner's part of the study key.

A `Measurer` is a runner a tune drives (`annotune.session`): it also runs a round of the
final check (`sample`), adopts the baseline's measurement as the reference (`adopt_baseline`),
and tells the header and the results database what the runs depend on (`environment`,
`run_of`, `run_dir`, `warnings`). The session's are the program and kernel measurers
(`session.measurers.open_measurer`), the replay device and the proxy of a Ray pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from annotune.core.records import BuildResult, Measurement, Number

__all__ = ["Measurer", "Runner"]


@runtime_checkable
class Runner(Protocol):
    """Measures one built configuration at a time (module docstring)."""

    def to_json(self) -> dict:
        """What changes a time (or an energy, or a verdict): part of the study key."""
        ...

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        """`build` measured; its failures are statuses. A configuration whose fastest run is
        slower than `stop_above` ms gets only the minimum number of runs."""
        ...


@runtime_checkable
class Measurer(Runner, Protocol):
    """A runner as a tune drives it (module docstring)."""

    warnings: tuple[str, ...]  # said once in the tune's report
    run_dir: Path | None  # where a program runs; None: nothing is started

    def environment(self, params: Mapping[str, Number]) -> str:
        """The header's line on the environment `params` ran in ("" when none is set)."""
        ...

    def run_of(self, params: Mapping[str, Number]) -> str | None:
        """What of a run `params` change besides its program (None: unknown)."""
        ...

    def sample(self, build: BuildResult) -> Measurement:
        """One round of the final check: a short measurement of `build`."""
        ...

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        """Take the baseline's `measurement` as every later one's reference; `rebuild` gives
        its build again, should the reference need another run."""
        ...
