"""Options merged once: the command line over the config file's run settings over the defaults;
option combinations that never work refused before the source is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate.problem import EnvSetting, Problem, RunSettings, TunableParam
from annotune.builder import CompilerCommand
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.run.program import RunSpec
from annotune.session.options import TuneArguments, TuneOptions, tune_options

CONFIGURED = RunSettings(
    compile=("gcc",),
    args=("--size", "64"),
    time_regex=r"took (\d+) ms",
    timeout=10.0,
    repeats=3,
    warmup=0,
)


NOTHING_CONFIGURED = RunSettings()


def problem(settings: RunSettings = NOTHING_CONFIGURED) -> Problem:
    return Problem(Path("k.c"), "c", (), (), ("k.c",), settings=settings)


def test_nothing_given_nothing_configured_is_the_defaults():
    assert tune_options(problem(), TuneArguments()) == TuneOptions()


def test_the_config_file_fills_what_the_command_line_leaves_out():
    options = tune_options(problem(CONFIGURED), TuneArguments())
    assert options.compiler == CompilerCommand.parse("gcc")
    assert options.run == RunSpec(
        args=("--size", "64"), timeout=10.0, warmup=0, repeats=3, time_regex=r"took (\d+) ms"
    )


def test_the_command_line_wins_setting_by_setting():
    given = TuneArguments(args=("--size", "8"), repeats=1, time_regex=r"(\d+)")
    options = tune_options(problem(CONFIGURED), given)
    assert options.run == RunSpec(
        args=("--size", "8"), timeout=10.0, warmup=0, repeats=1, time_regex=r"(\d+)"
    )
    assert tune_options(problem(CONFIGURED), TuneArguments(compiler="nvcc")).compiler == (
        CompilerCommand.parse("nvcc")
    )


def test_a_configured_compile_command_is_a_preset_a_template_or_an_argv():
    template = "gcc -O2 {source} -o {output}"
    for configured, expected in (
        (("g++",), CompilerCommand.parse("g++")),
        ((template,), CompilerCommand.parse(template)),
        (("gcc", "-O2", "{source}", "-o", "{output}"), CompilerCommand.parse(template)),
    ):
        settings = RunSettings(compile=configured)
        assert tune_options(problem(settings), TuneArguments()).compiler == expected


def test_everything_else_is_passed_as_given():
    passed = dict(
        strategy="transfer",
        budget=7,
        seconds=2.5,
        seed=3,
        device="dev",
        jobs=2,
        out_dir=Path("out"),
        db_path=Path("r.db"),
        fresh=True,
        compile_timeout=9.0,
        mode="program",
        kernel="k",
        backend="pycuda",
        transfer_from=(Path("a.json"),),
    )
    assert tune_options(problem(), TuneArguments(**passed)) == TuneOptions(**passed)
    assert not tune_options(problem(), TuneArguments(transfer=False)).transfer


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (TuneArguments(repeats=0), "at least 1"),
        (TuneArguments(time_regex="no group"), "group"),
        (TuneArguments(compiler="gcc {src} -o {output}"), "unknown placeholder {src}"),
    ],
)
def test_unusable_merged_settings_are_user_errors(given, message):
    with pytest.raises(AnnotuneError, match=message):
        tune_options(problem(), given)


def test_an_unusable_configured_setting_is_a_user_error_too():
    with pytest.raises(AnnotuneError, match="warmup"):
        tune_options(problem(RunSettings(warmup=-1)), TuneArguments())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"transfer": False, "transfer_from": (Path("a.json"),)}, "needs transfer"),
        ({"strategy": "random", "transfer_from": (Path("a.json"),)}, "works with the strategies"),
    ],
)
def test_combinations_that_never_work_are_refused_up_front(fields, message):
    with pytest.raises(AnnotuneError, match=message):
        TuneArguments(**fields)


def test_the_run_directory_is_run_dir_over_the_config_over_where_tune_is_called(tmp_path):
    configured = tmp_path / "data"
    given = tmp_path / "other"
    configured.mkdir()
    given.mkdir()
    settings = RunSettings(run_dir=str(configured))
    assert tune_options(problem(), TuneArguments()).run.cwd is None  # tune: the current dir
    assert tune_options(problem(settings), TuneArguments()).run.cwd == configured
    assert tune_options(problem(settings), TuneArguments(run_dir=given)).run.cwd == given


def test_a_relative_run_dir_is_from_where_annotune_was_started(tmp_path, monkeypatch):
    (tmp_path / "inputs").mkdir()
    monkeypatch.chdir(tmp_path)
    options = tune_options(problem(), TuneArguments(run_dir=Path("inputs")))
    assert options.run.cwd == tmp_path.resolve() / "inputs"


def test_the_time_unit_is_the_command_lines_else_the_configs():
    configured = RunSettings(time_regex=r"took ([0-9.]+)", time_unit="s")
    assert tune_options(problem(configured), TuneArguments()).run.time_unit == "s"
    given = TuneArguments(time_unit="us")
    assert tune_options(problem(configured), given).run.time_unit == "us"
    assert tune_options(problem(), TuneArguments()).run.time_unit == "ms"
    with pytest.raises(AnnotuneError, match="--time-regex"):
        tune_options(problem(), given)  # a unit of nothing


def env_problem(value: str) -> Problem:
    where = Location("annotune.toml", 7, 19)
    threads = TunableParam("THREADS", (1, 2, 4), 1, "config", True, where, "values(1, 2, 4)")
    settings = RunSettings(env=(EnvSetting("OMP_NUM_THREADS", value, where),))
    return Problem(Path("k.c"), "c", (threads,), (), ("k.c",), settings=settings)


def test_the_configs_environment_is_passed_once_it_names_parameters():
    options = tune_options(env_problem("{THREADS}"), TuneArguments())
    assert options.run.env == (("OMP_NUM_THREADS", "{THREADS}"),)
    with pytest.raises(AnnotuneError, match="{THREAD} in env OMP_NUM_THREADS") as caught:
        tune_options(env_problem("x{THREAD}"), TuneArguments())
    assert caught.value.location == Location("annotune.toml", 7, 20)  # at the "{"
    assert "THREADS" in caught.value.hint
