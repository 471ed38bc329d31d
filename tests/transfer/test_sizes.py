"""`predict --size`: the model over parameters x size, learned from the sizes tuned."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.emit import tuned_header_path
from annotune.emit.sizes import SizeEntry, SizeTable, read_size_table, render_size_header
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.transfer.sizes import predict_size

PROGRAM = """\
#ifndef N
#define N 128
#endif
#define B 16 // @tune values(8, 16, 32, 64, 128)
#define D 1 // @tune values(1, 2, 3, 4)
int main(void) { return N * B * D == 0; }
"""
DEVICE = "NVIDIA H100 80GB HBM3"
TUNED = (64, 256, 2048)


def _time(n: int, b: int, d: int) -> float:
    """The best B is N / 8 (within 8..128); D barely matters."""
    return abs(b - n / 8) + 1.0 + 0.01 * d


@pytest.fixture
def tuned(tmp_path) -> Path:
    """The program's studies at N = 64, 256 and 2048 as `tune --sizes` leaves them, and its
    size-aware header."""
    source = tmp_path / "k.c"
    source.write_text(PROGRAM)
    with Database(default_db_path(source)) as db:
        for n in TUNED:
            problem = read_problem(source, fixed={"N": n})
            study = db.open_study(StudyKey.for_problem(problem, device=DEVICE, build={"x": n}))
            for b, d in itertools.product((8, 16, 32, 64, 128), (1, 2, 3, 4)):
                params = {"B": b, "D": d, "N": n}
                time = _time(n, b, d)
                db.record(study, Measurement(params, "ok", time, (time,) * 3))
    entries = tuple(SizeEntry(n, {"B": min(128, max(8, n // 8)), "D": 1}) for n in TUNED)
    header = tuned_header_path(source, DEVICE)
    header.parent.mkdir(parents=True)
    header.write_text(
        render_size_header(
            read_problem(source),
            SizeTable("N", 128, "the source's default N", entries),
            device=DEVICE,
            space_size=20,
            tool_version="t",
        )
    )
    return source


def test_an_untuned_size_is_predicted_from_the_others_and_joins_the_header(tuned):
    prediction = predict_size(tuned, "N", 1024, DEVICE, write=True)
    assert prediction.tuned_sizes == TUNED
    assert prediction.params["B"] == 128  # 1024 / 8, learned from 2048's side
    assert predict_size(tuned, "N", 80, DEVICE).params["B"] == 8
    table = read_size_table(prediction.header.read_text(), "h")
    entries = {e.size: (e.predicted, e.params["B"]) for e in table.entries}
    assert entries == {64: (False, 8), 256: (False, 32), 1024: (True, 128), 2048: (False, 128)}
    with pytest.raises(AnnotuneError, match="was tuned and measured"):
        predict_size(tuned, "N", 256, DEVICE, write=True)
    assert predict_size(tuned, "N", 256, DEVICE, write=True, force=True).tuned_sizes == (64, 2048)


def test_without_two_other_sizes_there_is_nothing_to_learn_how_the_best_moves(tuned):
    with pytest.raises(AnnotuneError, match="a model over size needs 2"):
        predict_size(tuned, "N", 512, "another GPU")
    with pytest.raises(AnnotuneError, match="is a tuned parameter"):
        predict_size(tuned, "B", 512, DEVICE)


def test_writing_needs_a_size_aware_header(tuned):
    tuned_header_path(tuned, DEVICE).write_text("/* a header for one size */\n")
    with pytest.raises(AnnotuneError, match="does not select per size N"):
        predict_size(tuned, "N", 1024, DEVICE, write=True)
