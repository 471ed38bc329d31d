"""`annotune tune --sizes` and `annotune predict --size` from the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from annotune.emit.sizes import read_size_table

TESTS = Path(__file__).parent.parent
PROGRAM = re.search(
    r'MACRO_PROGRAM = r"""(.*?)"""', (TESTS / "session" / "test_sizes.py").read_text(), re.S
).group(1)
FAST = [
    "--budget", "4", "--time-regex", "took ([0-9.]+) ms", "--repeats", "2", "--max-repeats", "2",
    "--warmup", "0", "--recheck", "1", "--recheck-rounds", "12",
]  # fmt: skip


def test_tune_sizes_reports_every_size_and_writes_one_header(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.c").write_text(PROGRAM)
    result = cli("tune", "k.c", "--sizes", "N=256,64", *FAST, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert [s["size"] for s in report["sizes"]] == [64, 256]
    assert [s["best"]["params"]["B"] for s in report["sizes"]] == [8, 32]
    assert report["via"] == "macro" and not report["interrupted"]
    table = read_size_table(Path(report["header"]).read_text(), "h")
    assert [e.size for e in table.entries] == [64, 256]
    text = cli("tune", "k.c", "--sizes", "N=256,64", *FAST)  # resumed: nothing measured again
    assert text.exit_code == 0, text.stderr
    assert "N = 64" in text.stdout and "(selects per N)" in text.stdout
    assert text.stdout.count("(4 reused") == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sizes", "N=64,64"], "64 is given twice"),
        (["--sizes", "N"], "expected NAME=SIZE"),
        (["--sizes", "M=64,128"], "the size M reaches nothing"),
        (["--sizes", "N=64,128", "--compile-only"], "--sizes tunes"),
    ],
)
def test_bad_sizes_exit_2_with_a_message(cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.c").write_text(PROGRAM)
    result = cli("tune", "k.c", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_predict_size_needs_two_tuned_sizes_and_one_size_at_a_time(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.c").write_text(PROGRAM)
    result = cli("predict", "k.c", "--size", "N=128")
    assert result.exit_code == 2 and "a model over size needs 2" in result.stderr
    result = cli("predict", "k.c", "--size", "N=128,256")
    assert result.exit_code == 2 and "one size at a time" in result.stderr
    result = cli("predict", "k.c")
    assert result.exit_code == 2 and "--device names the GPU" in result.stderr
