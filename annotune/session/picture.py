"""Gather the picture of a tune (`annotune.emit.picture.TunePicture`) from what was stored:
the source's study in the results database (its measurements in the order made), the
defaults the source declares, the final check stored with the study (or handed in by the
tune that just ran it), which knobs mattered by the partition tree over the measurements,
and the sizes of a size-aware header.

Nothing is re-measured: a report reads the database and the header, never the device.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.files import read_regular
from annotune.core.records import Number, normalized_performance
from annotune.emit import tuned_header_path
from annotune.emit.picture import FinalCheck, SizePoint, TunePicture
from annotune.emit.provenance import Provenance, read_provenance
from annotune.emit.sizes import SizeTable, read_size_table
from annotune.results.database import Database, existing, sources_hash
from annotune.results.studies import StudyRecord, find_study
from annotune.results.workspace import default_db_path
from annotune.search.partition import StopRule, build_tree
from annotune.session.recheck import Verdict

HEADER_LIMIT = 4 << 20
"""A tuned header larger than this is not one annotune wrote: it is not read for sizes."""


def final_check_of(verdict: Verdict | None) -> FinalCheck | None:
    """The picture's record of a final check's verdict (None: no final check ran)."""
    if verdict is None:
        return None
    return FinalCheck(verdict.speedup, verdict.interval, verdict.rounds, verdict.kept_baseline)


def tune_picture(
    source: Path,
    *,
    db_path: Path | None = None,
    device: str | None = None,
    config_path: Path | None = None,
    out_dir: Path | None = None,
    verdict: Verdict | None = None,
    size: int | None = None,
) -> TunePicture:
    """The picture of `source`'s newest study of its current version (on `device` when given).

    When the device's header is size-aware (`tune --sizes`), its panels show the study of
    one size: `size`, else the header's default size (else its largest measured), and a
    panel of every size. `verdict` is the final check a tune just ran; without it, the
    picture has no interval and its winner is the fastest measured (said in its notes).
    AnnotuneError, located at the source, when there is no database or no measurement of
    this version (of that size).
    """
    problem = read_problem(source, config_path=config_path)
    db_path = db_path or default_db_path(source)
    content = sources_hash(problem.files)
    hint = f"run 'annotune tune {source}' first"
    with existing(db_path) as database:
        if database is None:
            raise AnnotuneError(f"no results database at {db_path}", hint=hint)
        found = find_study(database, source, device=device, content_hash=content)
        on = f" on device '{device}'" if device else ""
        if found is None or found.study.key.content_hash != content:
            raise AnnotuneError(
                f"no measurements of this version of the source{on} in {db_path}",
                Location(str(source), 1, 1),
                hint=hint,
            )
        table = _size_table(source, found.study.key.device, out_dir)
        if table is not None or size is not None:
            name = table.name if table is not None else ""
            wanted = size if size is not None else _shown_size(table)
            found = _study_of_size(database, found, name, wanted)
            if found is None:
                raise AnnotuneError(
                    f"no measurements of this version of the source at size {wanted}{on}"
                    f" in {db_path}",
                    Location(str(source), 1, 1),
                    hint=hint,
                )
    defaults = {p.name: p.default for p in problem.params}
    default = _default_of(found, defaults)
    notes: list[str] = []
    times = tuple(m.time for m in found.measurements)
    check = final_check_of(verdict)
    recorded = None if verdict is not None else _recorded(source, found.study.key.device, out_dir)
    if verdict is not None:
        winner: dict[str, Number] | None = dict(verdict.winner)
    elif recorded is not None and recorded.params:
        winner = {k: v for k, v in recorded.params.items() if k in found.names}
        kept = recorded.speedup is None or winner == {k: default[k] for k in winner}
        check = FinalCheck(recorded.speedup, recorded.interval, None, kept)
        notes.append(
            f"the winner and the final check's claim are the tuned header's ({recorded.date})"
        )
    else:
        winner = _fastest(found)
        notes.append("no final check with this picture: the winner shown is the fastest measured")
    sizes = tuple(
        SizePoint(e.size, e.default_time, e.best_time, e.predicted)
        for e in (table.entries if table is not None else ())
    )
    size_name = table.name if table is not None else ""
    return TunePicture(
        title=f"{source.name} on {found.study.key.device}"
        + (f", {table.name} = {default[table.name]}" if table and table.name in default else ""),
        device=found.study.key.device,
        names=found.names,
        params=tuple(m.params for m in found.measurements),
        times=times,
        default=default,
        winner=winner,
        check=check,
        importance=_importance(found),
        sizes=sizes,
        size_name=size_name,
        notes=tuple(notes),
    )


def _recorded(source: Path, device: str, out_dir: Path | None) -> Provenance | None:
    """What the device's tuned header records of its tune (its provenance), when it was
    tuned on this study's device; None for an old header, a size-aware one, or none."""
    header = tuned_header_path(source, device, out_dir)
    data = read_regular(header, limit=HEADER_LIMIT)
    if data is None:
        return None
    try:
        recorded = read_provenance(data.decode("utf-8", "replace"), str(header))
    except AnnotuneError:
        return None  # a garbled record: `annotune check` says so; the picture does without
    return recorded if recorded is not None and recorded.device == device else None


def _default_of(found: StudyRecord, defaults: dict[str, Number]) -> dict[str, Number]:
    """The default configuration in the study's names: a size a tune fixed (`--sizes`) is
    the study's one value of it, not the source's default."""
    out: dict[str, Number] = {}
    for param in found.study.key.space["params"]:
        values = list(param["values"])
        name = str(param["name"])
        out[name] = values[0] if len(values) == 1 else defaults.get(name, values[0])
    return out


def _fastest(found: StudyRecord) -> dict[str, Number] | None:
    valid = [m for m in found.measurements if m.time is not None]
    return dict(min(valid, key=lambda m: m.time).params) if valid else None  # type: ignore[arg-type,return-value]


def _importance(found: StudyRecord) -> tuple[tuple[str, float], ...]:
    """Each knob's share of the error removed by the partition tree (as `explain`); () when
    fewer than two configurations are valid (nothing to tell apart)."""
    varied = tuple(str(p["name"]) for p in found.study.key.space["params"] if len(p["values"]) > 1)
    if found.valid < 2 or not varied:
        return ()
    tree = build_tree(
        found.values(varied),
        normalized_performance(found.times()),
        varied,
        StopRule(min_gain=0.01, max_depth=4),
    )
    return tuple((name, share) for name, share in tree.importance() if np.isfinite(share))


def _size_table(source: Path, device: str, out_dir: Path | None) -> SizeTable | None:
    """The size table of the device's tuned header, when it is size-aware."""
    header = tuned_header_path(source, device, out_dir)
    data = read_regular(header, limit=HEADER_LIMIT)
    if data is None:
        return None
    return read_size_table(data.decode("utf-8", "replace"), str(header))


def _shown_size(table: SizeTable | None) -> int:
    """The size whose study the panels show: the header's default size when it was
    measured, else its largest measured size."""
    assert table is not None
    measured = [e.size for e in table.entries if not e.predicted]
    if table.default_size in measured or not measured:
        return table.default_size
    return measured[-1]


def _study_of_size(
    database: Database, found: StudyRecord, name: str, size: int
) -> StudyRecord | None:
    """Of the studies like `found` (its device and content), the newest whose space fixes a
    parameter (`name`, when known) to `size` alone: `tune --sizes` makes one per size."""
    key = found.study.key
    best: StudyRecord | None = None
    for study in database.studies():
        other = study.key
        if other.device != key.device or other.content_hash != key.content_hash:
            continue
        fixed = [
            p
            for p in other.space["params"]
            if (not name or p["name"] == name) and list(p["values"]) == [size]
        ]
        if not fixed:
            continue
        measurements = tuple(database.measurements(study))
        if measurements and (best is None or study.id > best.study.id):
            best = StudyRecord(study, measurements)
    return best
