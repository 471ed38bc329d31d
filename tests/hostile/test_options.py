"""Hostile input: every bad option value and every output that cannot be written is a clear
error naming what is wrong, with exit code 2, before any work; never an internal error.

Each case is `annotune COMMAND ARGS` with placeholders for the test's files: {src} an annotated
C source, {data} a replay dataset, {dir} a directory, {file} a regular file, {tmp} the test's
directory. None of them gets as far as compiling or measuring anything. (Mistakes that were
already refused cleanly before, such as --recheck-rounds 2 or --arch garbage, are tested beside
their commands in tests/cli.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

NAN = "nan"
INF = "inf"
HUGE = str(10**30)

CASES: list[tuple[str, list[str], int, str]] = [
    # tune: ranges and formats
    ("tune", ["--seconds", "-1"], 2, "'--seconds'"),
    ("tune", ["--seconds", NAN], 2, "'--seconds'"),
    ("tune", ["--seconds", INF], 2, "'--seconds'"),
    ("tune", ["--seconds", "0"], 2, "'--seconds'"),
    ("tune", ["--seed", "-1"], 2, "'--seed'"),
    ("tune", ["--seed", str(2**32)], 2, "'--seed'"),
    ("tune", ["--seed", "x"], 2, "'--seed'"),
    ("tune", ["--jobs", "0"], 2, "'--jobs'"),
    ("tune", ["--jobs", HUGE], 2, "'--jobs'"),
    ("tune", ["--timeout", NAN], 2, "'--timeout'"),
    ("tune", ["--timeout", INF], 2, "'--timeout'"),
    ("tune", ["--timeout", "-1"], 2, "'--timeout'"),
    ("tune", ["--timeout", "1e300"], 2, "'--timeout'"),
    ("tune", ["--compile-timeout", NAN], 2, "'--compile-timeout'"),
    ("tune", ["--compile-timeout", "0"], 2, "'--compile-timeout'"),
    ("tune", ["--budget", "0"], 2, "'--budget'"),
    ("tune", ["--budget", "-5"], 2, "'--budget'"),
    ("tune", ["--budget", HUGE], 2, "'--budget'"),
    ("tune", ["--time-regex", "("], 2, "'--time-regex': '(' is not a regular expression: missing"),
    ("tune", ["--time-regex", "a(b"], 2, "at position 1"),
    ("tune", ["--time-regex", "took .* ms"], 2, "has no group to capture the time"),
    ("tune", ["--repeats", "0"], 2, "'--repeats'"),
    ("tune", ["--max-repeats", "0"], 2, "'--max-repeats'"),
    ("tune", ["--warmup", "-1"], 2, "'--warmup'"),
    ("tune", ["--stable-within", NAN], 2, "'--stable-within'"),
    ("tune", ["--stable-within", "1"], 2, "'--stable-within'"),
    ("tune", ["--check-rtol", "-1"], 2, "'--check-rtol'"),
    ("tune", ["--check-rtol", NAN], 2, "'--check-rtol'"),
    ("tune", ["--time-unit", "xs"], 2, "'--time-unit': 'xs' is not one of s, ms, us, ns"),
    ("tune", ["--recheck", "-1"], 2, "'--recheck'"),
    ("tune", ["--strategy", "nope"], 2, "'--strategy': 'nope' is not one of"),
    ("tune", ["--mode", "nope"], 2, "'--mode': 'nope' is not one of program, kernel, auto"),
    ("tune", ["--backend", "nope"], 2, "'--backend': 'nope' is not one of"),
    ("tune", ["--device", ""], 2, "'--device': '' is no device name"),
    ("tune", ["--device", " "], 2, "'--device'"),
    ("tune", ["--device", "a\nb"], 2, "'--device'"),
    # tune: paths
    ("tune", ["--run-dir", "{file}"], 2, "'--run-dir'"),
    ("tune", ["--run-dir", "{tmp}/missing"], 2, "'--run-dir'"),
    ("tune", ["--out-dir", "{file}"], 2, "'--out-dir': cannot write"),
    ("tune", ["--out-dir", "{file}/sub"], 2, "is not a directory"),
    ("tune", ["--config", "{dir}"], 2, "is a directory"),
    # build
    ("build", ["-o", "{dir}"], 2, "'--output' / '-o': cannot write"),
    ("build", ["-o", "{file}/x.h"], 2, "'--output' / '-o'"),
    ("build", ["-o", ""], 2, "'--output' / '-o'"),
    ("build", [], 2, "Missing option '--output'"),
    ("build", ["-o", "{tmp}/out.h", "--device", ""], 2, "'--device'"),
    ("build", ["-o", "{tmp}/out.h", "--shadow-dir", "{file}"], 2, "'--shadow-dir'"),
    ("build", ["-o", "{tmp}/out.h", "--out-dir", "{file}"], 2, "'--out-dir'"),
    # export
    ("export", ["-o", "{dir}"], 2, "'--output' / '-o': cannot write"),
    ("export", ["-o", "{file}/x.json"], 2, "'--output' / '-o'"),
    ("export", ["-o", "{tmp}/x.json", "--device", ""], 2, "'--device'"),
    # predict
    ("predict", ["--device", ""], 2, "'--device'"),
    ("predict", ["--device", "NVIDIA A100-PCIE-40GB", "--seed", "-1"], 2, "'--seed'"),
    ("predict", ["--device", "NVIDIA A100-PCIE-40GB", "--out-dir", "{file}"], 2, "'--out-dir'"),
    ("predict", [], 2, "--device names the GPU to predict for"),
    ("predict", ["--size", "N=0"], 2, "'0' is not a positive integer size"),
    ("tune", ["--sizes", "N=1,1"], 2, "1 is given twice"),
    # lift, scan
    ("lift", ["--config", "{dir}"], 2, "is a directory"),
    ("scan", ["--config", "{dir}"], 2, "is a directory"),
]

DATASET_CASES: list[tuple[str, list[str], int, str]] = [
    ("explain", ["--depth", "0"], 2, "'--depth'"),
    ("explain", ["--depth", HUGE], 2, "'--depth'"),
    ("explain", ["--plot", "{dir}"], 2, "'--plot': cannot write"),
    ("explain", ["--plot", "{file}/x.png"], 2, "'--plot'"),
    ("explain", ["--device", ""], 2, "'--device'"),
    ("bench", ["--repeats", "0"], 2, "'--repeats'"),
    ("bench", ["--seed", "-1"], 2, "'--seed'"),
    ("bench", ["--seed", str(2**32)], 2, "'--seed'"),
    ("bench", ["--max-evals", "0"], 2, "'--max-evals'"),
    ("bench", ["--workers", "0"], 2, "'--workers'"),
    ("bench", ["-s", "iterml", "-s", "nope"], 2, "'--strategy' / '-s': 'nope' is not one of"),
    ("bench", ["--plot", "{dir}"], 2, "'--plot': cannot write"),
]


@pytest.fixture
def places(tmp_path, data_dir) -> dict[str, str]:
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("not a directory\n")
    cache = {f"{x},{y}": {"x": x, "y": y, "time": 1.0 + x + y} for x in range(4) for y in range(4)}
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps({"tune_params_keys": ["x", "y"], "cache": cache}))
    return {
        "src": str(tmp_path / "synthetic.c"),
        "data": str(data),
        "dir": str(tmp_path / "adir"),
        "file": str(tmp_path / "afile"),
        "tmp": str(tmp_path),
    }


def check(cli, command: str, target: str, args: list[str], code: int, expected: str, places):
    filled = [arg.format(**places) for arg in args]
    result = cli(command, target.format(**places), *filled)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "╭" not in result.stderr  # plain lines like every other error, not a framed panel
    assert result.exit_code == code, result.stderr
    assert expected.format(**places) in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(("command", "args", "code", "expected"), CASES)
def test_a_bad_option_on_a_source(cli, places, monkeypatch, command, args, code, expected):
    monkeypatch.chdir(places["tmp"])
    check(cli, command, "{src}", args, code, expected, places)


@pytest.mark.parametrize(("command", "args", "code", "expected"), DATASET_CASES)
def test_a_bad_option_on_a_dataset(cli, places, monkeypatch, command, args, code, expected):
    monkeypatch.chdir(places["tmp"])
    check(cli, command, "{data}", args, code, expected, places)


def test_the_default_header_directory_is_checked_before_tuning(cli, places):
    Path(places["tmp"], "tuned").write_text("a file where tuned/ goes\n")
    result = cli("tune", places["src"], "--device", "test-device")
    assert result.exit_code == 2
    assert "cannot write the tuned header in" in result.stderr
    assert "tuned: is not a directory" in result.stderr
    assert not Path(places["tmp"], ".annotune").exists()  # no database, nothing measured


def test_predict_write_checks_the_header_directory_first(cli, places):
    Path(places["tmp"], "tuned").write_text("a file where tuned/ goes\n")
    device = "NVIDIA A100-PCIE-40GB"
    result = cli("predict", places["src"], "--device", device, "--write")
    assert result.exit_code == 2
    assert "cannot write the tuned header in" in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_build_into_a_full_device_is_a_clean_error(cli, places):
    """It once read /dev/full's endless zeros to compare, until it ran out of memory."""
    result = cli("build", places["src"], "-o", "/dev/full", "--device", "test-device")
    assert result.exit_code == 2
    assert "annotune: error: cannot write /dev/full: No space left on device" in result.stderr
