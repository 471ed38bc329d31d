"""What every command shares: a bug is reported as one, with a crash log; Ctrl-C is exit 130
with one line; user-controlled text that looks like rich markup is printed as it is."""

from __future__ import annotations

import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import annotune.api.scan
import annotune.cli.explain
import annotune.cli.scan
from annotune import __version__
from annotune.cli import main
from annotune.cli.tune_output import ProgressDisplay
from annotune.session.report import TuneProgress


@pytest.fixture
def source(tmp_path, data_dir) -> Path:
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return tmp_path / "synthetic.c"


def crash(*args, **kwargs):
    raise RuntimeError("boom: a bug\nsecond line")


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """`annotune ARGS` through the real entry point; its exit code and stderr."""
    monkeypatch.setattr(sys, "argv", ["annotune", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


def crash_log(stderr: str) -> Path:
    return Path(stderr.split("the traceback is in ")[1].split(";")[0])


def test_a_bug_names_itself_and_its_versions_and_leaves_a_crash_log(
    source, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("ANNOTUNE_DEBUG", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(annotune.api.scan, "summarize_space", crash)
    code, stderr = run_main(monkeypatch, capsys, "scan", source)

    assert code == 1
    assert stderr.startswith("annotune: internal error: RuntimeError: boom: a bug\n")
    assert "second line" not in stderr and "Traceback" not in stderr
    assert f"a bug in annotune (annotune {__version__}, Python {platform.python_version()})" in (
        stderr
    )
    log = crash_log(stderr)
    assert log.parent == tmp_path / "cache" / "annotune" / "crash"
    text = log.read_text()
    assert text.startswith(f"annotune {__version__}\nPython {sys.version}\n")
    assert "Traceback (most recent call last)" in text
    assert 'raise RuntimeError("boom: a bug\\nsecond line")' in text
    assert "'scan'" in text  # the command line that crashed


def test_the_crash_log_falls_back_to_the_temp_directory(source, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANNOTUNE_DEBUG", raising=False)
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-dir"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(annotune.api.scan, "summarize_space", crash)
    code, stderr = run_main(monkeypatch, capsys, "scan", source)
    assert code == 1
    assert crash_log(stderr).parent == tmp_path / "tmp" / "annotune" / "crash"
    assert "boom" in crash_log(stderr).read_text()


def test_ctrl_c_outside_the_guarded_work_is_exit_130_in_one_line(cli, source, monkeypatch):
    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(annotune.api.scan, "scan_warnings", interrupt)
    result = cli("scan", source)
    assert result.exit_code == 130
    assert result.stderr == "annotune: interrupted\n"


def test_a_bad_option_value_is_one_line_naming_the_option(cli, source):
    result = cli("scan", source, "--config", source.parent)  # a located error, as before
    assert result.exit_code == 2
    result = cli("tune", source, "--seed", "-1")
    assert result.exit_code == 2
    assert result.stderr.startswith("annotune: error: Invalid value for '--seed': ")
    assert len(result.stderr.splitlines()) == 1


def test_markup_in_a_dataset_prints_as_it_is(cli, tmp_path):
    """Parameter names and file names are the user's: `[/]` once raised a MarkupError and
    `[bold]` vanished into a style."""
    cache = {
        f"{x},{y}": {"[/]": x, "[red]y[/red]": y, "time": 1.0 + (x - 7) ** 2 + (y - 2) ** 2}
        for x in range(12)
        for y in range(12)
    }
    data = tmp_path / "[bold]tiny.json"
    data.write_text(json.dumps({"tune_params_keys": ["[/]", "[red]y[/red]"], "cache": cache}))
    explained = cli("explain", data)
    assert explained.exit_code == 0, explained.stderr
    assert "[/] <= " in explained.stdout and "[red]y[/red]" in explained.stdout
    assert "[bold]tiny" in explained.stdout
    benched = cli("bench", data, "--repeats", "1", "--workers", "1")
    assert benched.exit_code == 0, benched.stderr
    assert "[bold]tiny" in benched.stdout


def test_markup_in_a_device_name_or_warning_prints_as_it_is(capsys):
    display = ProgressDisplay(enabled=True)
    progress = TuneProgress(
        device="[/]",
        space_size=3,
        budget=3,
        strategy="iterml",
        warnings=("no device features known for '[red]x[/red]'",),
        transfer_from=("[/]",),
    )
    with display:
        display.update(progress)
    stderr = capsys.readouterr().err
    assert "no device features known for '[red]x[/red]'" in stderr
    assert "tuning on [/] (" in stderr
