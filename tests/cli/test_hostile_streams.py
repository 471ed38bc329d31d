"""Hostile output streams: a stdout or stderr that cannot be written (/dev/full, a closed
descriptor, a pipe whose reader is gone) ends the command with exit 1 and one line on stderr
when stderr works, never an internal error or a crash log, and a tune keeps what it measured;
a `--plot` that cannot be written is an error, never exit 0.

The streams are the process's own, so these run `python -m annotune` as a child process, its
cache (where a crash log would go) in the test's directory.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from importlib import import_module
from pathlib import Path

import pytest

FULL = "/dev/full"
TIMEOUT_S = 120


@pytest.fixture
def source(tmp_path, data_dir) -> Path:
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return tmp_path / "synthetic.c"


@pytest.fixture(autouse=True)
def _full_exists():
    if not os.path.exists(FULL):
        pytest.skip("no /dev/full on this system")


def annotune(tmp_path: Path, *args: str, stdout=None, stderr=None, shell_tail: str = ""):
    """`python -m annotune ARGS` in `tmp_path`; with `shell_tail`, run by sh with that
    redirection appended (`>&-` closes a descriptor, which Popen cannot)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "ANNOTUNE_DEVICE": "dev"}
    env.pop("ANNOTUNE_DEBUG", None)
    argv = [sys.executable, "-m", "annotune", *map(str, args)]
    if shell_tail:
        argv = ["sh", "-c", f'"$@" {shell_tail}', "sh", *argv]
    return subprocess.run(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE if stderr is None else stderr,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def no_crash(tmp_path: Path, stderr: str | None) -> None:
    """No sign of an internal error; a crash log's traceback is the failure's message (its
    stderr may have been the full device that hid it)."""
    assert "internal error" not in (stderr or ""), stderr
    assert "Traceback" not in (stderr or "")
    assert "Exception ignored" not in (stderr or "")
    logs = sorted((tmp_path / "cache" / "annotune" / "crash").glob("*"))
    assert not logs, "\n".join(log.read_text() for log in logs)


def write_to_full(path: str = FULL):
    return open(path, "w")  # noqa: SIM115 -- closed by the caller's `with`


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "table"])
def test_stdout_on_dev_full_is_one_line_and_exit_1(tmp_path, source, json_flag):
    with write_to_full() as full:
        done = annotune(tmp_path, "scan", source, *json_flag, stdout=full)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "annotune: error: cannot write to stdout: No space left on device"
    )
    no_crash(tmp_path, done.stderr)


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "table"])
def test_a_closed_stdout_is_one_line_and_exit_1(tmp_path, source, json_flag):
    done = annotune(tmp_path, "scan", source, *json_flag, shell_tail=">&-")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("annotune: error: cannot write to stdout: ")
    no_crash(tmp_path, done.stderr)
    # stderr closed or full too: nothing to say it on, and nothing raised while not saying it
    done = annotune(tmp_path, "scan", source, *json_flag, shell_tail=f">{FULL} 2>&-")
    assert done.returncode == 1
    no_crash(tmp_path, None)
    with write_to_full() as full:
        done = annotune(tmp_path, "scan", source, *json_flag, stdout=full, stderr=full)
    assert done.returncode == 1
    no_crash(tmp_path, None)


def test_a_pipe_whose_reader_is_gone_is_exit_1(tmp_path, source):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "ANNOTUNE_DEVICE": "dev"}
    child = subprocess.Popen(
        [sys.executable, "-m", "annotune", "scan", str(source)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child.stdout.close()  # before the child has written anything: its first write is EPIPE
    stderr = child.stderr.read()
    assert child.wait(timeout=TIMEOUT_S) == 1
    assert stderr.splitlines()[-1] == "annotune: error: cannot write to stdout: Broken pipe"
    no_crash(tmp_path, stderr)


def test_bad_input_that_cannot_be_said_is_still_exit_2(tmp_path, source):
    with write_to_full() as full:
        missing = annotune(tmp_path, "scan", tmp_path / "missing.c", stderr=full)
        bad_option = annotune(tmp_path, "tune", source, "--seed", "-1", stderr=full)
    assert missing.returncode == 2
    assert bad_option.returncode == 2
    no_crash(tmp_path, None)


def test_help_on_a_full_stdout_is_exit_1(tmp_path):
    with write_to_full() as full:
        done = annotune(tmp_path, "--help", stdout=full)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("annotune: error: cannot write to stdout")
    no_crash(tmp_path, done.stderr)


def measured(cli, source: Path) -> int:
    """How many configurations of `source` its results database holds (asked in-process: the
    streams under test are the tune's)."""
    return cli.json("explain", source, "--device", "dev", "--json")["samples"]


QUICK = ("--warmup", "0", "--repeats", "1", "--max-repeats", "1", "--recheck", "0")
"""One timed run per configuration and no final check: the tunes here are about their streams."""


def test_a_tune_whose_stdout_is_full_keeps_its_measurements_and_header(tmp_path, source, cli):
    with write_to_full() as full:
        done = annotune(tmp_path, "tune", source, "--budget", "4", *QUICK, stdout=full)
    no_crash(tmp_path, done.stderr)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "annotune: error: cannot write to stdout: No space left on device"
    )
    assert (tmp_path / "tuned" / "dev" / "synthetic.h").is_file()
    assert measured(cli, source) == 4


def test_a_tune_whose_stderr_is_full_stops_as_on_ctrl_c_and_keeps_its_work(tmp_path, source, cli):
    with write_to_full() as full:
        done = annotune(tmp_path, "tune", source, "--budget", "4", *QUICK, stderr=full)
    no_crash(tmp_path, None)
    assert done.returncode == 1
    assert "interrupted: every measurement so far is kept" in done.stdout
    assert (tmp_path / "tuned" / "dev" / "synthetic.h").is_file()
    assert measured(cli, source) >= 1


def tiny_recording(path: Path, time) -> Path:
    cache = {f"{x},{y}": {"X": x, "Y": y, "time": time(x, y)} for x in range(6) for y in range(6)}
    path.write_text(json.dumps({"tune_params_keys": ["X", "Y"], "cache": cache}))
    return path


@pytest.mark.parametrize("command", ["explain", "bench"])
def test_a_plot_that_cannot_be_written_is_an_error(cli, tmp_path, command):
    pytest.importorskip("matplotlib")
    data = tiny_recording(tmp_path / "tiny.json", lambda x, y: 1.0 + (x - 3) ** 2 + y)
    extra = ["--repeats", "1", "--workers", "1"] if command == "bench" else []
    result = cli(command, data, *extra, "--plot", FULL)
    assert result.exit_code == 2
    assert f"cannot write {FULL}: " in result.stderr


@pytest.mark.parametrize(
    "time", [lambda x, y: float("nan"), lambda x, y: "InvalidConfig"], ids=["nan", "invalid"]
)
@pytest.mark.parametrize("mode", [[], ["--transfer"]], ids=["standards", "transfer"])
def test_bench_on_a_recording_without_one_time_names_the_file(cli, tmp_path, time, mode):
    good = tiny_recording(tmp_path / "good.json", lambda x, y: 1.0 + x + y)
    bad = tiny_recording(tmp_path / "bad.json", time)
    result = cli("bench", good, bad, "--repeats", "1", "--workers", "1", *mode)
    assert result.exit_code == 2
    assert f"{bad}: none of its 36 configurations has a valid time" in result.stderr
    assert result.stdout == ""


class _Full:
    """A stream whose every write fails as /dev/full's does."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass


def test_a_failed_write_in_another_thread_is_kept_for_the_exit_code(monkeypatch, capsys):
    app = import_module("annotune.cli.app")  # `annotune.cli.app` is also the Typer object
    monkeypatch.setattr(app, "_output_failures", [])
    stream = app.GuardedStream(_Full(), "stdout")
    writer = threading.Thread(target=stream.write, args=("a live display's refresh\n",))
    writer.start()
    writer.join()  # nothing raised there: the main thread is not stopped from another
    assert stream.broken and stream.write("dropped\n") == len("dropped\n")
    assert app.finish_output(0) == 1
    assert capsys.readouterr().err == (
        "annotune: error: cannot write to stdout: No space left on device\n"
    )
    with pytest.raises(app.OutputFailed):  # in the main thread, the first failure stops it
        app.GuardedStream(_Full(), "stderr").write("x")
    assert app.finish_output(2) == 2  # bad input stays bad input
