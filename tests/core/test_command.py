"""One reader of compile commands: the cases each stage's own reader handled, and those on
which they disagreed (each disagreement hashed, verified or rebuilt another program)."""

from __future__ import annotations

import os

import pytest

from annotune.core.command import (
    PRESET_NAMES,
    architectures,
    arguments,
    compiles_c_as_cxx,
    expand_responses,
    input_kind,
    inputs,
    is_nvcc,
    is_source_text,
    knows_options,
    last_output_only,
    read_option,
    reports_resources,
    template_mistake,
    units,
    values,
)


@pytest.mark.parametrize(
    ("executable", "nvcc", "gnu"),
    [
        ("nvcc", True, True),
        ("nvcc-12.4", True, True),  # once nvcc to the verifier, not to compile-only or scan
        ("/usr/local/cuda/bin/nvcc", True, True),
        ("gcc", False, True),
        ("x86_64-linux-gnu-gcc-12", False, True),
        ("clang++", False, True),
        ("nvc++", False, True),
        ("cc", False, True),
        ("ccache", False, False),  # a wrapper: not assumed to take -MD or -E -dM
        ("python3", False, False),
        ("nvccwrap", False, False),
    ],
)
def test_which_compiler_is_one_answer(executable, nvcc, gnu):
    assert is_nvcc(executable) is nvcc
    assert knows_options(executable) is gnu


@pytest.mark.parametrize(
    ("executable", "cxx"),
    [("g++", True), ("g++-12", True), ("clang++", True), ("nvc++", True), ("mpicxx", True),
     ("icpx", True), ("CC", True), ("gcc", False), ("cc", False), ("nvcc", False),
     ("x86_64-linux-gnu-g++-12", True)],
)  # fmt: skip
def test_a_cxx_driver_reads_c_as_cxx(executable, cxx):
    assert compiles_c_as_cxx(executable) is cxx


@pytest.mark.parametrize(
    ("arg", "kind"),
    [
        ("k.c", "unit"), ("k.cp", "unit"), ("K.CPP", "unit"), ("k.c++", "unit"),
        ("k.cu", "unit"), ("k.o", "object"), ("k.obj", "object"), ("libm.a", "library"),
        ("libx.so", "library"), ("libx.so.1.2", "library"), ("x.dylib", "library"),
        ("x.lib", "library"), ("k.ptx", "device"), ("k.cubin", "device"),
        ("k.fatbin", "device"), ("k.h", None), ("k.cuh", None), ("build.log", None),
    ],
)  # fmt: skip
def test_every_input_kind_in_one_list(arg, kind):
    # The verifier once knew no .ptx, .cubin, .fatbin or .dylib, the dependency reader did.
    assert input_kind(arg) == kind


def test_headers_and_units_are_source_text_objects_are_not():
    assert is_source_text("conf.h") and is_source_text("a.inl") and is_source_text("k.cp")
    assert not is_source_text("k.o") and not is_source_text("notes.txt")


@pytest.mark.parametrize(
    ("arg", "following", "expected"),
    [
        ("-I", "inc", ("include_dir", "inc", True)),
        ("-Iinc", None, ("include_dir", "inc", False)),
        ("--include-path=inc", None, ("include_dir", "inc", False)),
        ("--include-path", "inc", ("include_dir", "inc", True)),
        ("-isystem", "s", ("system_dir", "s", True)),
        ("-isystems", None, ("system_dir", "s", False)),
        ("--system-include=s", None, ("system_dir", "s", False)),
        ("-iquote", "q", ("quote_dir", "q", True)),
        ("-idirafter", "a", ("after_dir", "a", True)),
        ("-include", "f.h", ("forced_include", "f.h", True)),
        ("--pre-include=f.h", None, ("forced_include", "f.h", False)),
        ("-include-pch", None, (None, "-include-pch", False)),  # no forced include "-pch"
        ("-I-", None, (None, "-I-", False)),
        ("-imacros", "m.h", ("forced_macros", "m.h", True)),
        ("-DB=8", None, ("define", "B=8", False)),
        ("-D", "B", ("define", "B", True)),
        ("--define-macro=B=8", None, ("define", "B=8", False)),
        ("-UB", None, ("undefine", "B", False)),
        ("-undef", None, (None, "-undef", False)),  # gcc's: no macro "ndef" undefined
        ("-lineinfo", None, (None, "-lineinfo", False)),  # nvcc's: no library "ineinfo"
        ("-lib", None, (None, "-lib", False)),
        ("-lcudart", None, ("library", "cudart", False)),
        ("-xc++", None, ("language", "c++", False)),
        ("-x", "cu", ("language", "cu", True)),
        ("--x=cu", None, ("language", "cu", False)),
        ("-Llib", None, ("library_dir", "lib", False)),
        ("--library-path=lib", None, ("library_dir", "lib", False)),
        ("-lm", None, ("library", "m", False)),
        ("--library=m", None, ("library", "m", False)),
        ("-o", "k.o", ("output", "k.o", True)),
        ("-MF", "k.d", ("dependency_output", "k.d", True)),
        ("--dependency-output=k.d", None, ("dependency_output", "k.d", False)),
        ("-arch=sm_80", None, ("architecture", "sm_80", False)),
        ("-arch", "sm_80", ("architecture", "sm_80", True)),
        ("--gpu-architecture=compute_90", None, ("architecture", "compute_90", False)),
        ("-gencode", "arch=compute_80", ("architecture", "arch=compute_80", True)),
        ("-code=sm_80", None, ("architecture", "sm_80", False)),
        ("-Xcompiler", "-fopenmp", ("pass_host", "-fopenmp", True)),
        ("-Xptxas=-v", None, ("pass_ptxas", "-v", False)),
        ("-optf", "a.rsp", ("options_file", "a.rsp", True)),
        ("--options-file=a.rsp", None, ("options_file", "a.rsp", False)),
        ("-I=inc", None, ("include_dir", "=inc", False)),  # gcc's sysroot form: not `-I inc`
        ("-O3", None, (None, "-O3", False)),
        ("-I", None, (None, "-I", False)),  # a value missing at the end: no option
    ],
)  # fmt: skip
def test_every_spelling_of_an_option_reads_alike(arg, following, expected):
    assert read_option(arg, following) == expected


def test_an_option_value_is_never_taken_for_an_input():
    # Old readers took `-I src.c`'s value, `-o prog.o` and `-Xlinker x.o` for inputs in one
    # place and not in another.
    argv = ["gcc", "-I", "inc.c", "-o", "out.o", "-Xlinker", "x.o", "main.c", "lib.a", "-lm"]
    assert [a.value for a in inputs(argv)] == ["main.c", "lib.a"]
    assert units(argv) == ["main.c"]
    assert values(argv, "library") == ["m"]
    spans = [a.args for a in arguments(argv)]
    assert spans[:3] == [("-I", "inc.c"), ("-o", "out.o"), ("-Xlinker", "x.o")]


def test_placeholders_are_no_inputs():
    assert units(["nvcc", "{source}", "-o", "{output}", "other.cu"]) == ["other.cu"]


def test_the_architectures_are_read_from_every_spelling():
    assert architectures(["nvcc", "-arch=sm_80", "k.cu"]) == ["80"]
    assert architectures(["nvcc", "-arch", "sm_90a", "k.cu"]) == ["90"]
    two = ["nvcc", "-gencode", "arch=compute_80,code=sm_80",
           "--generate-code=arch=compute_90,code=[sm_90]"]  # fmt: skip
    assert architectures(two) == ["80", "90"]
    assert architectures(["nvcc", "-code=sm_75", "k.cu"]) == ["75"]
    assert architectures(["nvcc", "-arch=all", "k.cu"]) is None
    assert architectures(["nvcc", "-arch", "native", "k.cu"]) is None
    assert architectures(["nvcc", "k.cu"]) == []


@pytest.mark.parametrize(
    ("argv", "reports"),
    [
        (["nvcc", "-Xptxas", "-v"], True),
        (["nvcc", "-Xptxas=-v"], True),
        (["nvcc", "--ptxas-options=-O3,--verbose"], True),
        (["nvcc", "--resource-usage"], True),
        (["nvcc", "-res-usage"], True),
        (["nvcc", "-v"], False),  # nvcc's own verbosity: no ptxas report
        (["nvcc", "-Xptxas", "-O3"], False),
        (["nvcc", "-Xptxas"], False),
    ],
)
def test_the_ptxas_report_is_read_from_every_spelling(argv, reports):
    assert reports_resources(argv) is reports


def test_response_files_expand_in_place_and_a_loop_is_left_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    held = {
        os.path.join(str(tmp_path), "a.rsp"): ("-DA=1", "@b.rsp"),
        os.path.join(str(tmp_path), "b.rsp"): ("-DB=2",),
        os.path.join(str(tmp_path), "loop.rsp"): ("@loop.rsp",),
    }
    assert expand_responses(["gcc", "@a.rsp", "k.c"], held.get) == ["gcc", "-DA=1", "-DB=2", "k.c"]
    assert expand_responses(["nvcc", "--options-file", "a.rsp,b.rsp"], held.get) == [
        "nvcc", "-DA=1", "-DB=2", "-DB=2"
    ]  # fmt: skip
    assert expand_responses(["gcc", "@loop.rsp"], held.get) == ["gcc", "@loop.rsp"]
    assert expand_responses(["gcc", "@missing.rsp"], held.get) == ["gcc", "@missing.rsp"]
    assert expand_responses(["gcc", "@{source}"], held.get) == ["gcc", "@{source}"]


def test_the_builder_has_a_template_for_every_preset_name():
    from annotune.builder.compiler import PRESETS

    assert tuple(PRESETS) == PRESET_NAMES


def test_several_outputs_are_the_last_as_the_drivers_take_them():
    argv = ["gcc", "-o", "a", "k.c", "--output-file=b", "-o", "c", "-lm"]
    assert last_output_only(argv) == ["gcc", "k.c", "-o", "c", "-lm"]
    assert last_output_only(["gcc", "k.c", "-o", "c"]) == ["gcc", "k.c", "-o", "c"]


@pytest.mark.parametrize(
    ("argv", "mistake"),
    [
        (["gcc", "{source}", "-o", "{output}"], None),
        (["gcc", "{source}", "-o", "{output}", "-o", "{output}"], None),
        (["gcc", "k.c", "-o", "{output}"], (None, "the compile command needs a {source} argument")),
        (["gcc", "{source}", "-o", "{output}", "-o", "p"], (4, "the compiler writes its program")),
        (["./run.sh", "{source}", "{output}", "-o", "log"], None),  # a wrapper's own -o
        (["gcc", "{src}", "{source}", "-o", "{output}"], (1, "unknown placeholder {src}")),
    ],
)
def test_a_template_is_read_once_for_the_config_and_the_builder(argv, mistake):
    found = template_mistake(argv)
    if mistake is None:
        assert found is None
    else:
        assert found is not None and found[0] == mistake[0] and found[1].startswith(mistake[1])
