"""Gathering a tune's picture from the results database and the tuned header."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.session.picture import tune_picture
from annotune.session.recheck import Contender, Verdict

SOURCE = """\
#ifndef B
#define B 8 // @tune values(4, 8, 16, 32)
#endif
#ifndef U
#define U 1 // @tune values(1, 2)
#endif
int main(void) { return B * U > 0 ? 0 : 1; }
"""


def cost(b: int, u: int) -> float:
    """B matters (32 is four times faster than 4), U barely."""
    return 16.0 / b + 0.01 * u


def record(source: Path, device: str = "gpu-a", skip: int = 0) -> list[dict]:
    problem = read_problem(source)
    key = StudyKey.for_problem(problem, device=device, build={})
    configs = [{"B": b, "U": u} for b in (8, 4, 16, 32) for u in (1, 2)][skip:]
    with Database(default_db_path(source)) as db:
        study = db.open_study(key)
        for config in configs:
            db.record(
                study,
                Measurement(config, "ok", time=cost(**{k.lower(): v for k, v in config.items()})),
            )
    return configs


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "k.c"
    path.write_text(SOURCE)
    return path


def test_the_picture_of_a_study(source):
    configs = record(source)
    shown = tune_picture(source)
    assert shown.device == "gpu-a" and shown.names == ("B", "U")
    assert list(shown.params) == configs  # in the order measured
    assert shown.default == {"B": 8, "U": 1}
    assert shown.time_of(shown.default) == cost(8, 1)
    assert shown.winner == {"B": 32, "U": 1}  # no final check: the fastest measured
    assert shown.check is None and any("fastest measured" in n for n in shown.notes)
    assert shown.importance[0][0] == "B" and shown.importance[0][1] > 0.9


def test_a_verdict_gives_the_winner_and_the_interval(source):
    record(source)
    winner = {"B": 16, "U": 1}
    contender = Contender(winner, 1.9, (1.8, 2.0), significant=True, rounds=12)
    verdict = Verdict(winner, 1.9, (1.8, 2.0), 12, (contender,))
    shown = tune_picture(source, verdict=verdict)
    assert shown.winner == {"B": 16, "U": 1}
    assert shown.check is not None and shown.check.interval == (1.8, 2.0)
    assert not shown.check.kept_default and not shown.notes


def test_the_device_is_chosen(source):
    record(source, "gpu-a")
    record(source, "gpu-b", skip=3)
    assert len(tune_picture(source, device="gpu-a").times) == 8
    assert len(tune_picture(source, device="gpu-b").times) == 5


def test_an_edited_source_has_no_picture_yet(source):
    record(source)
    source.write_text(SOURCE.replace("return B", "return 2 * B"))
    with pytest.raises(AnnotuneError, match="no measurements of this version"):
        tune_picture(source)


def test_no_database(source):
    with pytest.raises(AnnotuneError, match="no results database"):
        tune_picture(source)


def write_tuned_header(source: Path, device: str, params: dict, speedup: float | None) -> Path:
    """A tuned header as `tune` leaves it, with the provenance line `check` reads."""
    from annotune.emit import tuned_header_path
    from annotune.emit.provenance import CompilerMark, Provenance, provenance_line

    provenance = Provenance(
        device=device,
        date="2026-12-01",
        source=source.name,
        knobs=(),
        knobs_digest="",
        files={},
        compiler=CompilerMark("cc", "/usr/bin/cc", ""),
        params=params,
        speedup=speedup,
        interval=None if speedup is None else (speedup - 0.1, speedup + 0.1),
    )
    header = tuned_header_path(source, device)
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(f"/*\n * {provenance_line(provenance)}\n */\n#define B 16\n")
    return header


def test_without_a_verdict_the_tuned_headers_claim_is_shown(source):
    record(source)
    write_tuned_header(source, "gpu-a", {"B": 16, "U": 1}, 1.9)
    shown = tune_picture(source)
    assert shown.winner == {"B": 16, "U": 1}  # the header's, not the fastest measured (32)
    assert shown.check is not None and shown.check.interval == pytest.approx((1.8, 2.0))
    assert shown.check.rounds is None and not shown.check.kept_default
    assert any("tuned header's (2026-12-01)" in n for n in shown.notes)


def test_a_header_tuned_on_another_device_is_not_this_studys_claim(source):
    record(source)
    header = write_tuned_header(source, "gpu-b", {"B": 4, "U": 1}, 1.5)
    header.rename(header.with_name(header.name.replace("gpu-b", "gpu-a")))
    shown = tune_picture(source)
    assert shown.winner == {"B": 32, "U": 1} and shown.check is None
