"""Program mode applies the config's `[file.check]` to every run: a run whose output fails
`expect` or `reject`, or whose `result` captures differ from the baseline's, is wrong output;
a run's output is read bounded, its end included."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.core.output_check import OutputCheck
from annotune.core.records import BuildResult
from annotune.run import process
from annotune.run.program import ProgramRunner, RunSpec

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def program(tmp_path: Path, name: str, body: str) -> BuildResult:
    source = tmp_path / f"{name}.c"
    source.write_text("#include <stdio.h>\n" + body)
    binary = tmp_path / name
    subprocess.run(["gcc", str(source), "-o", str(binary)], check=True)
    return BuildResult({"BS": 1}, binary, seconds=0.1)


def printing(tmp_path: Path, name: str, out: str, err: str = "") -> BuildResult:
    return program(
        tmp_path,
        name,
        f'int main(void) {{ printf("took 2 ms\\n{out}"); fprintf(stderr, "{err}"); return 0; }}',
    )


def runner(rules: OutputCheck | None) -> ProgramRunner:
    return ProgramRunner(
        RunSpec(warmup=1, repeats=1, max_repeats=1, time_regex=r"took (\d+) ms", output_check=rules)
    )


def test_a_run_that_prints_fail_and_returns_0_is_wrong_output(tmp_path):
    rules = OutputCheck(expect="^PASS$")
    passed = runner(rules).measure(printing(tmp_path, "pass", "PASS\\n"))
    assert passed.status == "ok" and passed.time == 2.0
    failed = runner(rules).measure(printing(tmp_path, "fail", "sum = 3\\nFAIL\\n"))
    assert failed.status == "wrong_output" and failed.time is None
    assert failed.error == "expect '^PASS$': nothing in the output matches " + (
        "(its last line: 'FAIL')"
    )
    assert runner(None).measure(printing(tmp_path, "fail", "FAIL\\n")).status == "ok"  # today's


def test_reject_reads_stderr_too(tmp_path):
    build = printing(tmp_path, "err", "PASS\\n", "error: residual 0.3 too large\\n")
    m = runner(OutputCheck(expect="PASS", reject="(?i)error")).measure(build)
    assert m.status == "wrong_output"
    assert "reject '(?i)error' matches line 'error: residual 0.3 too large'" in m.error


def test_result_captures_are_kept_and_compared_with_the_baselines(tmp_path):
    rules = OutputCheck(result=r"checksum = (\S+)", rtol=1e-6)
    baseline = runner(rules).measure(printing(tmp_path, "base", "checksum = 12.5\\n"))
    assert baseline.status == "ok" and baseline.compile_info["result"] == ["12.5"]
    checked = runner(rules)
    checked.reference_result = ("12.5",)  # the baseline's captures, adopted by the measurer
    close = printing(tmp_path, "close", "checksum = 12.5000001\\n")
    assert checked.measure(close).status == "ok"
    less = printing(tmp_path, "less", "checksum = 6.25\\n")
    wrong = checked.measure(less)
    assert wrong.status == "wrong_output"
    assert "capture 1 is '6.25', the baseline's '12.5' (rtol 1e-06)" in wrong.error
    none = checked.measure(printing(tmp_path, "none", "done\\n"))
    assert none.status == "wrong_output" and "nothing in the output matches" in none.error


def test_the_rules_are_part_of_the_study_key_only_when_given():
    assert "output_check" not in RunSpec().to_json()
    keyed = RunSpec(output_check=OutputCheck(expect="PASS")).to_json()
    assert keyed["output_check"] == {"expect": "PASS"}


def test_a_huge_output_is_read_bounded_with_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "OUTPUT_LIMIT", 1 << 16)
    build = program(
        tmp_path,
        "big",
        'int main(void) { printf("took 2 ms\\n"); for (int i = 0; i < 100000; i++)'
        ' puts("row FAIL-free filler"); puts("checksum = 7"); puts("PASS"); return 0; }',
    )
    m = runner(OutputCheck(expect="^PASS$", result=r"checksum = (\S+)")).measure(build)
    assert m.status == "ok" and m.compile_info["result"] == ["7"]


def test_what_is_read_of_an_output_is_its_start_and_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "OUTPUT_LIMIT", 1000)
    with (tmp_path / "out").open("w+b") as file:
        file.write(b"first\n" + b"x" * 100_000 + b"\nlast\n")
        text = process._read(file)
    assert text.startswith("first\n") and text.endswith("\nlast\n") and len(text) < 1100
    assert "bytes of output not read" in text
