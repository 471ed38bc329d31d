"""Options merged once: the command line over the config file's run settings over the defaults;
option combinations that never work refused before the source is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate.problem import Problem, RunSettings
from annotune.builder import CompilerCommand
from annotune.core.diagnostics import AnnotuneError
from annotune.run.program import RunSpec
from annotune.session.options import TuneArguments, tune_options
from annotune.session.tuner import TuneOptions

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
        ({"strategy": "magic"}, "unknown strategy 'magic'"),
        ({"budget": 0}, "--budget must be at least 1"),
        ({"transfer": False, "transfer_from": (Path("a.json"),)}, "needs transfer"),
        ({"strategy": "random", "transfer_from": (Path("a.json"),)}, "works with the strategies"),
    ],
)
def test_combinations_that_never_work_are_refused_up_front(fields, message):
    with pytest.raises(AnnotuneError, match=message):
        TuneArguments(**fields)
