"""Program mode: times from the timing header, a regex or the wall clock; failures as data."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from annotune.builder.compiler import PRESETS
from annotune.core.records import BuildResult
from annotune.run.program import TIMING_VARIABLES, ProgramRunner, RunSpec

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def program(tmp_path: Path, body: str) -> BuildResult:
    source = tmp_path / "p.c"
    headers = "".join(f"#include <{h}.h>\n" for h in ("stdio", "stdlib", "unistd", "signal"))
    source.write_text(headers + body)
    binary = tmp_path / "p"
    subprocess.run(["gcc", str(source), "-o", str(binary)], check=True)
    return BuildResult({"A": 1}, binary, seconds=0.1)


def test_median_of_the_reported_times(tmp_path):
    build = program(
        tmp_path,
        'int main(void) { FILE *f = fopen("count", "a"); fputs("x", f); fclose(f);'
        ' printf("annotune-time-ms: 9\\nannotune-time-ms: 10\\nannotune-time-ms: 30\\n"); }',
    )
    m = ProgramRunner(RunSpec(cwd=tmp_path, warmup=2, repeats=3, max_repeats=3)).measure(build)
    assert m.status == "ok" and m.time == 10.0 and m.times == (10.0, 10.0, 10.0)
    assert (tmp_path / "count").read_text() == "xxxxx"  # 2 warm-up + 3 timed runs


def test_user_regex_and_wall_time(tmp_path):
    build = program(tmp_path, 'int main(void) { printf("kernel took 2.5 ms\\n"); return 0; }')
    by_regex = ProgramRunner(RunSpec(repeats=1, warmup=0, time_regex=r"took ([0-9.]+) ms"))
    assert by_regex.measure(build).time == 2.5
    wall = ProgramRunner(RunSpec(repeats=1, warmup=0)).measure(build)
    assert wall.status == "ok" and 0 < wall.time < 5000
    missing = ProgramRunner(RunSpec(repeats=1, warmup=0, time_regex=r"nothing (\d+)"))
    assert missing.measure(build).status == "runtime_error"


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (
            'int main(void) { fprintf(stderr, "bad input\\n"); return 3; }',
            "runtime_error",
            "code 3: bad input",
        ),
        ("int main(void) { abort(); }", "runtime_error", "signal 6"),
        ("int main(void) { sleep(30); return 0; }", "timeout", "timed out after 0.5 s"),
    ],
)
def test_failures_keep_their_reason(tmp_path, body, status, reason):
    m = ProgramRunner(RunSpec(timeout=0.5, warmup=0, repeats=1)).measure(program(tmp_path, body))
    assert m.status == status and reason in m.error and m.time is None


def test_a_check_value_that_differs_from_the_default_is_wrong_output(tmp_path):
    build = program(
        tmp_path,
        'int main(void) { printf("annotune-time-ms: 1\\nannotune-check: 41\\n"); return 0; }',
    )
    runner = ProgramRunner(RunSpec(warmup=0, repeats=1))
    runner.reference = 41.0
    assert runner.measure(build).status == "ok"
    runner.reference = 42.0
    wrong = runner.measure(build)
    assert wrong.status == "wrong_output" and "differs" in wrong.error


def test_a_failed_build_is_a_compile_error():
    m = ProgramRunner(RunSpec()).measure(BuildResult({"A": 1}, None, error="compile failed: boom"))
    assert m.status == "compile_error" and m.error == "compile failed: boom"


def test_presets_are_complete_templates():
    for argv in PRESETS.values():
        assert "{source}" in argv and "{output}" in argv


def test_a_relative_executable_runs_in_another_directory(tmp_path, monkeypatch):
    build = program(tmp_path, 'int main(void) { printf("annotune-time-ms: 4\\n"); return 0; }')
    monkeypatch.chdir(tmp_path.parent)
    relative = BuildResult(build.params, build.executable.relative_to(tmp_path.parent))
    elsewhere = tmp_path / "run here"
    elsewhere.mkdir()
    m = ProgramRunner(RunSpec(cwd=elsewhere, repeats=1, warmup=0)).measure(relative)
    assert m.status == "ok" and m.time == 4.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


@pytest.mark.parametrize("main_returns", [True, False], ids=["exits", "hangs"])
def test_no_process_the_program_started_survives_its_run(tmp_path, main_returns):
    """A forked sleeper keeps stdout open; the run neither waits for it nor leaves it running."""
    rest = 'printf("annotune-time-ms: 1\\n"); return 0;' if main_returns else "sleep(30);"
    build = program(
        tmp_path,
        "int main(void) { pid_t child = fork(); if (child == 0) { sleep(30); return 0; }"
        ' FILE *f = fopen("child", "w"); fprintf(f, "%d", (int)child); fclose(f);'
        " fflush(stdout); " + rest + " }",
    )
    started = time.monotonic()
    m = ProgramRunner(RunSpec(cwd=tmp_path, timeout=2, warmup=0, repeats=1)).measure(build)
    assert time.monotonic() - started < 10
    assert m.status == ("ok" if main_returns else "timeout")
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "garbage"])
def test_a_check_value_that_is_not_a_finite_number_makes_the_variant_invalid(tmp_path, value):
    build = program(
        tmp_path,
        f'int main(void) {{ printf("annotune-time-ms: 1\\nannotune-check: {value}\\n"); }}',
    )
    checked = ProgramRunner(RunSpec(warmup=0, repeats=1))
    checked.reference = 1.0
    m = checked.measure(build)
    assert m.status == "wrong_output" and value in m.error and "finite" in m.error
    alone = ProgramRunner(RunSpec(warmup=0, repeats=1)).measure(build)
    assert alone.status == "wrong_output"


def counting_program(tmp_path: Path, times: str, sleep_us: int = 0) -> BuildResult:
    """Prints `times[k % len]` on its k-th run (a counter file in its directory)."""
    values = ", ".join(times.split())
    return program(
        tmp_path,
        f"int main(void) {{ double t[] = {{{values}}}; int k = 0;"
        ' FILE *f = fopen("k", "r"); if (f) { fscanf(f, "%d", &k); fclose(f); }'
        ' f = fopen("k", "w"); fprintf(f, "%d", k + 1); fclose(f);'
        f" usleep({sleep_us});"
        ' printf("annotune-time-ms: %g\\n", t[k % (int)(sizeof t / sizeof *t)]); return 0; }',
    )


def test_a_stable_configuration_stops_once_its_median_interval_is_tight(tmp_path):
    build = counting_program(tmp_path, "10 10.1")
    m = ProgramRunner(RunSpec(cwd=tmp_path, warmup=0, repeats=3)).measure(build)
    assert len(m.times) == 6  # the fewest samples with a 95% interval of the median


def test_a_noisy_configuration_runs_until_the_cap(tmp_path):
    build = counting_program(tmp_path, "10 12")
    m = ProgramRunner(RunSpec(cwd=tmp_path, warmup=0, repeats=3, max_repeats=12)).measure(build)
    assert len(m.times) == 12 and m.time == 11.0


def test_a_clearly_slow_configuration_gets_only_the_minimum(tmp_path):
    build = counting_program(tmp_path, "10 12")
    runner = ProgramRunner(RunSpec(cwd=tmp_path, warmup=0, repeats=3, max_repeats=12))
    assert len(runner.measure(build, stop_above=5.0).times) == 3
    assert len(runner.measure(build, stop_above=11.0).times) == 12  # not all runs slower


def test_the_time_cap_ends_the_repeats(tmp_path):
    build = counting_program(tmp_path, "10 12", sleep_us=100_000)
    spec = RunSpec(cwd=tmp_path, warmup=0, repeats=2, max_repeats=50, max_seconds=0.5)
    assert 2 <= len(ProgramRunner(spec).measure(build).times) <= 8


def test_each_measurement_says_where_its_time_went(tmp_path):
    """Each run sleeps 30 ms but reports 2 ms: the rest is set-up, the warm-up run all of it."""
    build = program(
        tmp_path, 'int main(void) { usleep(30000); printf("annotune-time-ms: 2\\n"); return 0; }'
    )
    m = ProgramRunner(RunSpec(warmup=1, repeats=3, max_repeats=3)).measure(build)
    seconds = m.compile_info["run_seconds"]
    assert m.status == "ok" and set(seconds) == {"wall", "setup", "gpu"}
    assert seconds["gpu"] == pytest.approx(3 * 2e-3)  # the timed runs' reported times
    assert seconds["setup"] >= 4 * 0.03 - seconds["gpu"]  # 4 runs' sleep, less what was timed
    assert seconds["setup"] + seconds["gpu"] <= seconds["wall"] + 1e-9
    failed = ProgramRunner(RunSpec()).measure(BuildResult({"A": 1}, None, error="boom"))
    assert failed.compile_info["run_seconds"]["gpu"] == 0


def test_a_program_that_reports_more_than_it_took_has_no_negative_setup(tmp_path):
    build = program(tmp_path, 'int main(void) { printf("annotune-time-ms: 60000\\n"); }')
    m = ProgramRunner(RunSpec(warmup=0, repeats=1, max_repeats=1)).measure(build)
    assert m.compile_info["run_seconds"]["gpu"] == 60.0
    assert m.compile_info["run_seconds"]["setup"] == 0.0


def test_the_timing_source_is_explicit(tmp_path):
    silent = program(tmp_path, 'int main(void) { printf("done\\n"); return 0; }')
    header = ProgramRunner(RunSpec(repeats=1, warmup=0, timing_header=True)).measure(silent)
    assert header.status == "runtime_error" and "no timing line" in header.error
    regex = ProgramRunner(RunSpec(repeats=1, warmup=0, time_regex=r"took (\d+)")).measure(silent)
    assert regex.status == "runtime_error" and "no timing line" in regex.error
    wall = ProgramRunner(RunSpec(repeats=1, warmup=0)).measure(silent)
    assert wall.status == "ok" and wall.compile_info["timing"] == "wall"


@pytest.mark.parametrize("line", ["nan", "inf", "-3"])
def test_a_timing_line_that_is_not_a_time_makes_the_variant_invalid(tmp_path, line):
    build = program(tmp_path, f'int main(void) {{ printf("annotune-time-ms: {line}\\n"); }}')
    m = ProgramRunner(RunSpec(repeats=1, warmup=0)).measure(build)
    assert m.status == "runtime_error" and "not a finite" in m.error


def test_gpu_conditions_are_recorded_with_each_measurement(tmp_path):
    class Monitor:
        clocks = iter([1980, 1410, 1980])

        def sample(self):
            return {
                "sm_clock_mhz": next(self.clocks),
                "temperature_c": 70,
                "power_w": 300.0,
                "throttled": [],
            }

    build = program(tmp_path, 'int main(void) { printf("annotune-time-ms: 2\\n"); }')
    spec = RunSpec(warmup=1, repeats=3, max_repeats=3)
    m = ProgramRunner(spec, monitor=Monitor()).measure(build)
    assert m.compile_info["gpu"]["sm_clock_mhz"] == 1410  # the lowest of the timed runs


def test_a_run_killed_from_outside_is_transient(tmp_path):
    build = program(tmp_path, "int main(void) { kill(getpid(), 9); return 0; }")
    m = ProgramRunner(RunSpec(warmup=0, repeats=1)).measure(build)
    assert m.status == "runtime_error" and m.transient and "killed from outside" in m.error


def test_a_crash_is_permanent(tmp_path):
    build = program(tmp_path, "int main(void) { abort(); }")
    m = ProgramRunner(RunSpec(warmup=0, repeats=1)).measure(build)
    assert m.status == "runtime_error" and not m.transient


def test_a_timeout_is_retried_once(tmp_path):
    """Slow only on its first run (a cold cache, a busy machine): the retry's time stands."""
    build = program(
        tmp_path,
        'int main(void) { if (access("seen", F_OK) != 0) { fclose(fopen("seen", "w"));'
        ' sleep(5); } printf("annotune-time-ms: 3\\n"); return 0; }',
    )
    spec = RunSpec(cwd=tmp_path, timeout=1, warmup=0, repeats=1, max_repeats=1)
    m = ProgramRunner(spec).measure(build)
    assert m.status == "ok" and m.time == 3.0
    hangs = program(tmp_path, "int main(void) { sleep(5); return 0; }")
    assert ProgramRunner(spec).measure(hangs).status == "timeout"


@pytest.mark.parametrize(
    ("printed", "unit"),
    [("0.0015 s", "s"), ("1.5 ms", "ms"), ("1500 us", "us"), ("1.5e6 ns", "ns")],
)
def test_a_regex_time_is_converted_from_its_unit_to_milliseconds(tmp_path, printed, unit):
    build = program(tmp_path, f'int main(void) {{ printf("took {printed}\\n"); return 0; }}')
    spec = RunSpec(repeats=1, warmup=0, time_regex=r"took ([0-9.e]+) \w+", time_unit=unit)
    assert ProgramRunner(spec).measure(build).time == pytest.approx(1.5)


def test_env_reaches_every_run_with_the_configurations_values(tmp_path, monkeypatch):
    monkeypatch.setenv("ANNOTUNE_TEST_INHERITED", "3")
    build = program(
        tmp_path,
        'int main(void) { printf("annotune-time-ms: %d\\n",'
        ' atoi(getenv("TIME_MS")) + atoi(getenv("ANNOTUNE_TEST_INHERITED"))); return 0; }',
    )
    spec = RunSpec(repeats=1, warmup=0, env=(("TIME_MS", "{A}0"),))
    assert ProgramRunner(spec).measure(build).time == 13.0  # A=1: "10", plus what annotune has
    assert spec.environment({"A": 4.0})["TIME_MS"] == "40"  # a whole float as an integer


def test_the_environment_that_changes_times_is_part_of_the_study_key(monkeypatch):
    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    plain = RunSpec()
    assert "environment" not in plain.to_json() and "time_unit" not in plain.to_json()
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("HOME", "/elsewhere")  # changes no time: not in the key
    env = (("OMP_PROC_BIND", "close"), ("OMP_NUM_THREADS", "{T}"))
    spec = RunSpec(env=env, time_regex=r"took (\S+) s", time_unit="s")
    assert spec.to_json()["environment"] == {"OMP_NUM_THREADS": "{T}", "OMP_PROC_BIND": "close"}
    assert spec.to_json()["time_unit"] == "s"
    assert plain.to_json()["environment"] == {"OMP_NUM_THREADS": "4"}
    assert spec.environment({"T": 8}) == {"OMP_NUM_THREADS": "8", "OMP_PROC_BIND": "close"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"time_unit": "min"}, "unknown time unit 'min'"),
        ({"time_unit": "s"}, "there is none"),
        ({"env": (("A=B", "1"),)}, "cannot be an environment variable's name"),
        ({"env": (("A", "{}"),)}, "names no parameter"),
    ],
)
def test_unusable_time_units_and_environments_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        RunSpec(**fields)
