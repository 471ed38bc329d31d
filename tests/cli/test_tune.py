"""`annotune tune` as a user runs it: JSON output, SIGKILL and resume, Ctrl-C, bad options."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.transfer.features import lookup

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

ARGS = ["--device", "test-device", "--warmup", "0", "--timeout", "1"]
ARGS += ["--repeats", "1", "--max-repeats", "1"]  # one timed run each: tests count the runs


@pytest.fixture
def workdir(tmp_path, data_dir):
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return tmp_path


REPO = Path(__file__).resolve().parents[2]


def annotune(workdir: Path, *args: str, own_group: bool = False) -> subprocess.Popen:
    """The real command in its own process (importable from the checkout, installed or not);
    `own_group`: in a process group of its own, as a batch job's processes are."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "ANNOTUNE_TEST_LOG": str(workdir / "runs.log"), "PYTHONPATH": path}
    return subprocess.Popen(
        [sys.executable, "-m", "annotune", *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=own_group,
    )


def recorded(workdir: Path) -> list[tuple]:
    db = workdir / ".annotune" / "results.db"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT params_json, status FROM measurements").fetchall()
    except sqlite3.OperationalError:
        return []


def wait_for(process: subprocess.Popen, predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"annotune exited early ({process.returncode}): {process.stderr.read()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_json_output(cli, workdir, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(workdir / "runs.log"))
    report = cli.json("tune", workdir / "synthetic.c", "--budget", "8", "--json", *ARGS)
    assert set(report) >= {
        "device",
        "evaluations",
        "reused",
        "invalid",
        "best",
        "default",
        "header",
    }
    assert report["device"] == "test-device"
    assert report["evaluations"] == 8 and report["reused"] == 0
    assert report["default"] == {
        "params": {"X": 1, "Y": 2},
        "time": 14.0,
        "interval": None,  # one run: too few samples for a 95% interval
        "samples": 1,
    }
    assert set(report["best"]["params"]) == {"X", "Y"}
    # The program's times are exact, so the interleaved re-check agrees with the search.
    assert report["speedup"] == pytest.approx(14.0 / report["best"]["time"])
    assert report["speedup_interval"] == [report["speedup"]] * 2
    assert report["kept_default"] is False and len(report["recheck"]["contenders"]) == 3
    assert report["recheck"]["baseline_time"] == 14.0  # the check's own median, and the winner's:
    winner = [c for c in report["recheck"]["contenders"] if c["params"] == report["best"]["params"]]
    assert winner[0]["time"] == pytest.approx(report["best"]["time"])
    assert Path(report["header"]).is_file()
    assert f"speedup:       {report['speedup']:.2f}x" in Path(report["header"]).read_text()


def test_the_final_check_line_shows_its_own_medians(cli, workdir, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(workdir / "runs.log"))
    result = cli("tune", workdir / "synthetic.c", "--budget", "8", *ARGS)
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("final check"))
    assert "; in it the medians: baseline 14 ms, winner " in line, line


def test_the_report_says_why_configurations_failed(cli, workdir, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(workdir / "runs.log"))
    args = ["tune", workdir / "synthetic.c", "--strategy", "exhaustive", "--budget", "26", *ARGS]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    invalid = [line for line in result.stdout.splitlines() if line.startswith("invalid")]
    assert len(invalid) == 4  # three kinds shown, then how many failed otherwise
    assert "1 compile_error, e.g. {'X': 5, 'Y': 1}: " in result.stdout
    assert "does not compile" in result.stdout
    assert invalid[-1] == "invalid       1 more, failing in other ways (see --json)"
    assert result.stderr.count("annotune: invalid: ") == 4  # each kind once, as it happens
    assert result.stderr.count("annotune: final check: the best") == 1  # the last phase too,
    rounds = re.findall(r"annotune: final check: round (\d+) of 30", result.stderr)
    # and in a log, every tenth of the rounds it ran (it stops once the verdict is known)
    assert rounds and rounds == [str(10 * n) for n in range(1, len(rounds) + 1)]
    report = cli.json(*args, "--json")
    assert sorted(f["status"] for f in report["failures"]) == [
        "compile_error",
        "runtime_error",
        "timeout",
        "wrong_output",
    ]


def test_a_failing_default_stops_the_tune_unless_a_reference_is_given(cli, tmp_path):
    """No baseline, no check: a wrong-answer variant could win. So the tune stops at once."""
    source = tmp_path / "k.c"
    source.write_text(
        '#include <stdio.h>\n#include <stdlib.h>\n#include "annotune_timing.h"\n'
        "#ifndef X\n#define X 1 // @tune range(1, 4)\n#endif\n"
        "int main(void) { if (X == 1) abort();\n"
        '  printf("annotune-time-ms: %d\\n", 10 - X); annotune_report_check(X == 4 ? 7 : 1);\n'
        "  return 0; }\n"
    )
    stopped = cli("tune", source, "--budget", "4", *ARGS)
    assert stopped.exit_code == 1 and "Traceback" not in stopped.stderr
    assert "the baseline configuration {'X': 1} failed" in stopped.stderr
    assert "--reference" in stopped.stderr and "--no-check" in stopped.stderr
    assert not (tmp_path / "tuned").exists()  # no header from an unchecked search

    report = cli.json("tune", source, "--budget", "4", "--reference", "X=2", "--json", *ARGS)
    assert report["baseline"]["params"] == {"X": 2} and report["baseline"]["time"] == 8.0
    assert report["best"]["params"] == {"X": 3}  # X=4 prints a different check value
    assert {f["status"] for f in report["failures"]} == {"runtime_error", "wrong_output"}
    bad = cli("tune", source, "--reference", "X=9", *ARGS)
    assert bad.exit_code == 2 and "not a legal configuration" in bad.stderr


def test_a_broken_program_stops_the_search_with_exit_1(cli, tmp_path):
    source = tmp_path / "broken.c"
    source.write_text(
        "#include <stdlib.h>\n#ifndef X\n#define X 1 // @tune range(1, 64)\n#endif\n"
        "int main(void) { abort(); }\n"
    )
    result = cli("tune", source, "--budget", "64", "--jobs", "4", "--no-check", *ARGS)
    assert result.exit_code == 1
    assert re.search(r"stopped after \d+ configurations all failed the same way", result.stderr)
    assert "(runtime_error: exited with signal 6 (it printed nothing))" in result.stderr
    assert "--fresh" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_measures_nothing_twice(workdir):
    args = ["tune", "synthetic.c", "--budget", "20", "--strategy", "random", "--json", *ARGS]
    args += ["--recheck", "0"]  # the final check re-runs the best on purpose; not this test's
    first = annotune(workdir, *args)
    wait_for(first, lambda: len(recorded(workdir)) >= 6)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = recorded(workdir)
    assert len(before) >= 6

    second = annotune(workdir, *args)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    report = json.loads(out)
    assert report["reused"] >= len(before)
    assert report["evaluations"] == 20
    runs = Counter((workdir / "runs.log").read_text().split("\n")[:-1])
    for params_json, _ in before:
        params = json.loads(params_json)
        assert runs[f"{params['X']} {params['Y']}"] <= 1, params  # never run again


@pytest.mark.parametrize(
    ("stop", "code"),
    [
        (lambda p: p.send_signal(signal.SIGINT), 130),  # Ctrl-C
        (lambda p: p.send_signal(signal.SIGTERM), 143),  # timeout, kill
        (lambda p: os.killpg(p.pid, signal.SIGTERM), 143),  # a batch job's time limit
    ],
    ids=["ctrl-c", "sigterm", "sigterm-to-the-group"],
)
def test_a_signal_stops_keeping_results_and_the_header(workdir, stop, code):
    process = annotune(
        workdir,
        "tune",
        "synthetic.c",
        "--budget",
        "26",
        "--strategy",
        "random",
        *ARGS,
        own_group=True,
    )
    wait_for(process, lambda: len(recorded(workdir)) >= 4)
    stop(process)
    out, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert "interrupted: every measurement so far is kept" in out
    assert list((workdir / "tuned" / "test-device").glob("synthetic.h"))
    kept = recorded(workdir)
    assert len(kept) >= 4
    assert {status for _, status in kept} == {"ok"}  # a run the signal cut is not stored


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "magic"], "Invalid value for '--strategy': 'magic' is not one of"),
        (["--budget", "0"], "Invalid value for '--budget'"),
        (["--compiler", "gcc {src} -o {output}"], "unknown placeholder {src}"),
        (["--time-regex", "no group"], "Invalid value for '--time-regex': 'no group' has no group"),
        (["--check-rtol", "nan"], "Invalid value for '--check-rtol': must be a finite number"),
        (["--stable-within", "0"], "Invalid value for '--stable-within': must be a share above 0"),
        (["--recheck-rounds", "3"], "at least 6"),
        (["--reference", "X=one"], "is not NAME=NUMBER"),
        (["--time-unit", "min"], "'--time-unit': 'min' is not one of s, ms, us, ns"),
        (["--run-dir", "/no/such/directory"], "'/no/such/directory' does not exist"),
    ],
)
def test_bad_options_exit_2(cli, workdir, args, message):
    result = cli("tune", workdir / "synthetic.c", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_file_exit_2(cli, tmp_path):
    result = cli("tune", tmp_path / "nope.c")
    assert result.exit_code == 2 and "no such file" in result.stderr


def test_export_writes_the_study_as_t4(cli, workdir, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(workdir / "runs.log"))
    cli.json("tune", workdir / "synthetic.c", "--budget", "4", "--json", *ARGS)
    out = workdir / "results.t4.json"
    summary = cli.json("export", workdir / "synthetic.c", "-o", out, "--json")
    assert summary == {"output": str(out), "device": "test-device", "measurements": 4}
    t4 = json.loads(out.read_text())
    assert len(t4["results"]) == 4
    assert {"configuration", "invalidity", "measurements"} <= set(t4["results"][0])
    if Path("/dev/full").exists():  # a full disk: a clean error, not an internal one
        full = cli("export", workdir / "synthetic.c", "-o", "/dev/full")
        assert full.exit_code == 2
        assert full.stderr == "annotune: error: cannot write /dev/full: No space left on device\n"
    other = cli("export", workdir / "synthetic.c", "-o", out, "--device", "elsewhere")
    assert other.exit_code == 2 and "no measurements" in other.stderr


def record_a100_study(source: Path, best_x: int) -> None:
    """Results of the same source and space on another GPU, whose best configuration has X=best_x
    (as if tuned there and copied into this database)."""
    key = StudyKey.for_problem(read_problem(source), device="NVIDIA A100-PCIE-40GB", build={})
    with Database(default_db_path(source)) as db:
        study = db.open_study(key, device_features=lookup("NVIDIA A100-PCIE-40GB").to_json())
        for x in range(1, 10):
            for y in (1, 2, 3):
                if x + y != 12:
                    time = 1.0 + abs(x - best_x) + 0.1 * abs(y - 3)
                    db.record(study, Measurement({"X": x, "Y": y}, "ok", time))


def test_another_gpus_results_are_measured_first(cli, workdir, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(workdir / "runs.log"))
    monkeypatch.setenv("ANNOTUNE_DEVICE", "NVIDIA RTX A4000")
    record_a100_study(workdir / "synthetic.c", best_x=4)
    run = ["tune", workdir / "synthetic.c", "--budget", "2", "--warmup", "0"]
    run += ["--repeats", "1", "--max-repeats", "1"]
    result = cli(*run, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["device"] == "NVIDIA RTX A4000"
    assert report["transfer"]["sources"] == ["NVIDIA A100-PCIE-40GB"]
    assert "learning from NVIDIA A100-PCIE-40GB" in result.stderr
    # The default first (the baseline), then what the other GPU's results rank best.
    ran = (workdir / "runs.log").read_text().split("\n")[:-1]
    assert ran[0] == "1 2" and ran[1].split()[0] == "4"

    off = cli(*run, "--no-transfer", "--fresh", "--json")
    assert off.exit_code == 0 and json.loads(off.stdout)["transfer"] is None
    conflict = cli(*run, "--no-transfer", "--transfer-from", workdir / "other.json")
    assert conflict.exit_code == 2 and "--transfer-from needs transfer" in conflict.stderr


CUDA_SOURCE = (
    "#ifndef BLOCK\n#define BLOCK 64 // @tune values(64, 128, 1024)\n#endif\n"
    "#if BLOCK > 512\n#error BLOCK is too large\n#endif\n"
    "__global__ void k(float *x) {\n  __shared__ float s[BLOCK];\n  s[threadIdx.x] = x[0];\n"
    "  __syncthreads();\n  x[threadIdx.x] = s[BLOCK - 1 - threadIdx.x];\n}\n"
    "int main(void) { return 0; }\n"
)


@pytest.mark.parametrize("kernel_mode", [False, True])
def test_a_cuda_tune_without_a_gpu_stops_at_once(cli, tmp_path, data_dir, monkeypatch, kernel_mode):
    """Not one failing run timed by wall time: exit 1 with a pointer to --compile-only."""
    monkeypatch.setattr("annotune.session.tuner.gpu_name", lambda: None)
    monkeypatch.setenv("ANNOTUNE_DEVICE", "NVIDIA H100 PCIe")  # naming a GPU makes none appear
    if kernel_mode:  # a declared kernel: tuned in kernel mode
        for name in ("jacobi.cu", "params.cuh", "axpy.cuh"):
            shutil.copy(data_dir / "kernel" / name, tmp_path / name)
        source, args = tmp_path / "jacobi.cu", ["--kernel", "jacobi_step"]
    else:
        source, args = tmp_path / "k.cu", ["--mode", "program"]
        source.write_text(CUDA_SOURCE)
    result = cli("tune", source, "--budget", "4", *args)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert f"{source} is CUDA, and this machine has no CUDA GPU" in result.stderr
    assert "--compile-only" in result.stderr
    assert not (tmp_path / ".annotune").exists()  # nothing compiled, run or stored


def test_arch_needs_compile_only(cli, workdir):
    result = cli("tune", workdir / "synthetic.c", "--arch", "sm_90")
    assert result.exit_code == 2 and "--arch works with --compile-only" in result.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_compile_only_compiles_for_the_architecture_and_runs_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("annotune.session.tuner.gpu_name", lambda: None)
    source = tmp_path / "k.cu"
    source.write_text(CUDA_SOURCE)
    report = cli.json("tune", source, "--compile-only", "--arch", "sm_90", "--json")
    assert (report["compiled"], report["failed"], report["cached"]) == (2, 1, 0)
    assert report["seconds"] > 0 and report["arch"] == "sm_90"
    assert report["command"].startswith("nvcc -arch=sm_90 ")
    (kind,) = report["failures"]
    assert kind["count"] == 1 and kind["params"] == {"BLOCK": 1024}
    assert "BLOCK is too large" in kind["error"]
    assert report["kernels"]["_Z1kPf"]["shared_bytes"] == [256, 512]
    assert not (tmp_path / ".annotune" / "results.db").exists()  # no study: nothing measured

    text = cli("tune", source, "--compile-only", "--device", "H100")  # sm_90 from the GPU table
    assert text.exit_code == 0, text.stderr
    assert "compiled      2 of 3 configurations (3 legal) in " in text.stdout
    assert ": 1 failed, 3 from the compile cache" in text.stdout
    assert "invalid       1 compile_error, e.g. {'BLOCK': 1024}: " in text.stdout
    assert re.search(r"kernel +_Z1kPf: registers \d+(-\d+)?, shared 256-512 B", text.stdout)

    source.write_text("#error never compiles\n" + CUDA_SOURCE)
    broken = cli("tune", source, "--compile-only")
    assert broken.exit_code == 1 and "no configuration compiled" in broken.stderr


def test_input_files_are_found_where_annotune_was_started_or_where_told(
    cli, tmp_path, monkeypatch, data_dir
):
    """`annotune tune src/reader.c --arg size.txt` from the project root reads ./size.txt;
    `run_dir` in annotune.toml (from the config's directory) or `--run-dir` say otherwise."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    shutil.copy(data_dir / "reader" / "reader.c", project / "src" / "reader.c")
    for directory, size in ((project, 20), (project / "data", 30), (tmp_path / "other", 40)):
        directory.mkdir(exist_ok=True)
        (directory / "size.txt").write_text(str(size))
    run = ["--arg", "size.txt", "--budget", "2", "--recheck", "0", "--fresh", *ARGS]
    monkeypatch.chdir(project)
    here = cli("tune", "src/reader.c", *run)
    assert here.exit_code == 0, here.stderr
    assert f"run in        {project}\n" in here.stdout
    assert "default       21 ms" in here.stdout

    (project / "annotune.toml").write_text('[[file]]\npath = "src/reader.c"\nrun_dir = "data"\n')
    monkeypatch.chdir(tmp_path)
    configured = cli.json("tune", "project/src/reader.c", *run, "--json")
    assert configured["run_dir"] == str(project / "data")
    assert configured["default"]["time"] == 31.0
    told = cli.json("tune", "project/src/reader.c", *run, "--run-dir", "other", "--json")
    assert told["run_dir"] == str(tmp_path / "other") and told["default"]["time"] == 41.0


def test_a_time_in_seconds_is_read_as_milliseconds(cli, tmp_path):
    source = tmp_path / "seconds.c"
    source.write_text(
        "#include <stdio.h>\n#ifndef X\n#define X 1 // @tune values(1, 2)\n#endif\n"
        'int main(void) { printf("took %g s\\n", 0.0123 * X); return 0; }\n'
    )
    regex = ["--time-regex", r"took ([0-9.]+) s", "--time-unit", "s"]
    report = cli.json("tune", source, "--budget", "2", "--recheck", "0", *regex, "--json", *ARGS)
    assert report["default"]["time"] == pytest.approx(12.3)
    assert report["timing"] == "regex"


def test_the_configs_environment_reaches_the_program_and_its_header(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_PROC_BIND", raising=False)
    source = tmp_path / "threads.c"
    source.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "#ifndef X\n#define X 1 // @tune values(1, 2)\n#endif\n"
        'int main(void) { printf("annotune-time-ms: %d\\n",'
        ' 10 * atoi(getenv("OMP_NUM_THREADS")) + X); return 0; }\n'
    )
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "threads.c"\n[file.env]\nOMP_NUM_THREADS = "3"\n'
    )
    report = cli.json("tune", source, "--budget", "2", "--recheck", "0", "--json", *ARGS)
    assert report["default"]["time"] == 31.0  # the program saw the 3 threads
    assert "environment:   OMP_NUM_THREADS=3" in Path(report["header"]).read_text()
