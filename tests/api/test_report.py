"""`annotune.report`: the picture written and what it shows."""

from __future__ import annotations

import pytest

import annotune
from annotune.annotate import read_problem
from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path

pytest.importorskip("matplotlib")


def test_report_returns_where_and_what(tmp_path):
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 8 // @tune values(4, 8, 16)\n#endif\nint x = B;\n")
    key = StudyKey.for_problem(read_problem(source), device="gpu-a", build={})
    with Database(default_db_path(source)) as db:
        study = db.open_study(key)
        for b in (8, 4, 16):
            db.record(study, Measurement({"B": b}, "ok", time=32.0 / b))
    drawn = annotune.report(source, output=tmp_path / "t.png")
    assert isinstance(drawn, annotune.Report)
    assert drawn.path.read_bytes().startswith(b"\x89PNG")
    assert drawn.picture.winner == {"B": 16} and drawn.picture.time_of({"B": 8}) == 4.0
    with pytest.raises(annotune.AnnotuneError, match="is the source"):
        annotune.report(source, output=source)
