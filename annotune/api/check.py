"""`annotune.check`: is this machine's committed tuned header of a source still true? The
header's provenance compared with what is there now, and with `measure` its configuration
re-measured against the default (`annotune check`). Imports nothing heavy unless asked to
measure: it is meant for every CI build."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.api.paths import optional_path
from annotune.run.device import current_device_name
from annotune.session.check import HeaderCheck, check_header

if TYPE_CHECKING:
    from annotune.session.remeasure import Remeasure


@dataclass(frozen=True)
class Check:
    """What `check` found: the static comparison (`found`: `stale`, each change with its
    kind and why), the re-measurement when one ran (`measured`), and whether the header
    holds (`holds`: not stale, and still faster when measured)."""

    found: HeaderCheck
    measured: Remeasure | None = None

    @property
    def holds(self) -> bool:
        return not self.found.stale and (self.measured is None or self.measured.holds)

    def to_json(self) -> dict:
        measured = self.measured.to_json() if self.measured is not None else None
        return {**self.found.to_json(), "measure": measured, "ok": self.holds}


def check(
    source: str | Path,
    *,
    device: str | None = None,
    out_dir: str | Path | None = None,
    header: str | Path | None = None,
    config: str | Path | None = None,
    measure: bool = False,
    rounds: int = 30,
    compiler: str | None = None,
    args: Sequence[str] = (),
    run_dir: str | Path | None = None,
    on_measure: Callable[[], None] | None = None,
) -> Check:
    """Compare `source`'s tuned header for `device` (default: this machine's; `header`: that
    file instead) with the files, knobs, compiler and device it was tuned from. `measure`:
    also re-measure its configuration against the default, interleaved, for at most
    `rounds` rounds (`compiler`, `args`, `run_dir` as the tune had them when the config does
    not say); `on_measure` is told as that starts. A header with nothing to compare
    (none, or no provenance) is stale, not an error; bad input raises AnnotuneError."""
    file = Path(source)
    config_path = optional_path(config)
    found = check_header(
        file,
        device=device or current_device_name(),
        out_dir=optional_path(out_dir),
        config=config_path,
        header=optional_path(header),
    )
    if not measure or any(c.kind == "header" for c in found.changes):
        return Check(found)
    from annotune.session.remeasure import remeasure  # the builder and runners: only here

    if on_measure is not None:
        on_measure()
    p = found.provenance
    measured = remeasure(
        file,
        found.header,
        mode=p.mode if p is not None else "auto",
        objective=p.objective if p is not None else "time",
        config=config_path,
        compiler=compiler,
        args=tuple(str(a) for a in args),
        run_dir=optional_path(run_dir),
        rounds=rounds,
    )
    return Check(found, measured)
