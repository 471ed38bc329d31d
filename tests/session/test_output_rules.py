"""A tune of code the user must not edit, from its config alone, with `[file.check]`: the block
size whose loop bound (`(N + 63) / 64`, a literal coupled to BS) no longer covers the problem
computes less, reports a shorter time, prints FAIL and returns 0; it is measured, marked wrong
output, and never the winner."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from annotune.results.database import Database

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# Its reported time is the work it did: BS = 32 covers half of N and is the fastest; BS = 128
# is correct and faster than the default 64. The guide's example (docs/guide/vendored.md).
PROGRAM = (Path(__file__).parents[1] / "realcode" / "checked" / "sum.c").read_text()


def project(tmp_path, check: str) -> None:
    (tmp_path / "sum.c").write_text(PROGRAM)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "sum.c"\ntime_regex = "took ([0-9]+) ms"\nrepeats = 1\nwarmup = 0\n'
        f'[file.params]\nBS = {{ domain = "values(32, 64, 128)", default = 64 }}\n'
        f"[file.check]\n{check}\n"
    )


def tune(cli, *extra: str):
    return cli(
        "tune", "sum.c", "--strategy", "exhaustive", "--budget", "3", "--json", "--fresh", *extra
    )


@pytest.mark.parametrize(
    ("check", "why"),
    [
        (
            "expect = '^PASS$'",
            "expect '^PASS$': nothing in the output matches (its last line: 'FAIL')",
        ),
        (r"result = 'checksum = (\S+)'", "capture 1 is '6138.0', the baseline's '12285.0'"),
    ],
)
def test_the_variant_that_computes_less_is_wrong_output_and_never_wins(
    cli, tmp_path, monkeypatch, check, why
):
    project(tmp_path, check)
    monkeypatch.chdir(tmp_path)
    done = tune(cli, "--recheck", "2", "--recheck-rounds", "6")
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["best"]["params"] == {"BS": 128}  # not the faster BS = 32
    assert report["invalid"] == 1
    assert any("outputs are checked by the config's [file.check]" in n for n in report["notes"])
    with Database(Path(report["db"])) as db:
        (study,) = db.studies()
        rows = {m.params["BS"]: m for m in db.measurements(study)}
    assert rows[32].status == "wrong_output" and rows[32].time is None and why in rows[32].error
    assert rows[64].status == rows[128].status == "ok"
    assert re.search(r"#define BS\b.*\b128\b", Path(report["header"]).read_text())


def test_without_check_the_wrong_variant_would_have_won(cli, tmp_path, monkeypatch):
    """The same tune with the rule off (--no-check): what the check prevents."""
    project(tmp_path, "expect = '^PASS$'")
    monkeypatch.chdir(tmp_path)
    done = tune(cli, "--recheck", "0", "--no-check")
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["best"]["params"] == {"BS": 32} and report["invalid"] == 0
    assert not any("[file.check]" in n for n in report["notes"])


def test_a_baseline_that_fails_the_check_stops_the_tune(cli, tmp_path, monkeypatch):
    project(tmp_path, "expect = '^PASS$'")
    monkeypatch.chdir(tmp_path)
    done = tune(cli, "--reference", "BS=32")
    assert done.exit_code == 1 and "Traceback" not in done.stderr
    said = done.stdout + done.stderr
    assert "wrong_output" in said and "expect '^PASS$'" in said and "'FAIL'" in said


def test_a_bad_check_is_a_located_error_exit_2(cli, tmp_path, monkeypatch):
    project(tmp_path, "expect = 'PA(SS'")
    monkeypatch.chdir(tmp_path)
    for command in (("scan", "sum.c"), ("tune", "sum.c", "--budget", "2")):
        done = cli(*command)
        assert done.exit_code == 2 and "Traceback" not in done.stderr
        assert "annotune.toml:9:11" in done.stderr and "invalid expect regex" in done.stderr


def test_scan_says_outputs_are_checked(cli, tmp_path, monkeypatch):
    project(tmp_path, "expect = '^PASS$'\nreject = 'FAIL'")
    monkeypatch.chdir(tmp_path)
    done = cli("scan", "sum.c", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["output_check"] == {"expect": "^PASS$", "reject": "FAIL"}
    plain = cli("scan", "sum.c")
    assert "by the config's [file.check] (expect '^PASS$', reject 'FAIL')" in plain.stderr
