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
