"""Variants, compile commands and the content-hash cache, with gcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand
from annotune.builder.compiler import parse_ptxas
from annotune.builder.variants import variant_source
from annotune.core.diagnostics import AnnotuneError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture
def synthetic(tmp_path, data_dir):
    source = tmp_path / "synthetic.c"
    shutil.copy(data_dir / "synthetic" / "synthetic.c", source)
    return read_problem(source)


def run(executable: Path) -> str:
    return subprocess.run([str(executable)], capture_output=True, text=True, check=True).stdout


def test_guarded_macros_use_defines_unguarded_ones_a_rewritten_copy(synthetic):
    variant = variant_source(synthetic, {"X": 4, "Y": 3})
    assert variant.defines == ("-DX=4",)
    assert variant.rewritten
    (text,) = variant.files.values()
    assert b"#define Y 3 /* @tune values(1, 2, 3) */" in text
    assert b"#define X 1 //" in text  # guarded: left alone, set by -D


def test_builds_run_with_their_values_and_the_cache_compiles_once(synthetic, tmp_path):
    builder = Builder(synthetic, compiler=CompilerCommand.parse("gcc"), cache_dir=tmp_path / "c")
    first = builder.build([{"X": 4, "Y": 3}, {"X": 2, "Y": 1}])
    assert [b.ok for b in first] == [True, True]
    assert "X=4 Y=3" in run(first[0].executable)
    assert "X=2 Y=1" in run(first[1].executable)
    again = builder.build([{"X": 4, "Y": 3}])
    assert again[0].cached and again[0].executable == first[0].executable
    assert synthetic.source.read_text().count("#define Y 2") == 1  # the user's file untouched


def test_a_failed_compile_is_a_result_and_is_cached_too(synthetic, tmp_path):
    builder = Builder(synthetic, compiler=CompilerCommand.parse("gcc"), cache_dir=tmp_path / "c")
    (failed,) = builder.build([{"X": 5, "Y": 1}])
    assert not failed.ok
    assert "does not compile" in failed.error
    assert f"{synthetic.source}:18:2: error:" in failed.error  # the user's file, not the copy
    (again,) = builder.build([{"X": 5, "Y": 1}])
    assert again.cached and not again.ok and again.error == failed.error


def test_a_changed_source_is_never_served_from_the_cache(synthetic, tmp_path):
    cache = tmp_path / "c"
    Builder(synthetic, compiler=CompilerCommand.parse("gcc"), cache_dir=cache).build(
        [{"X": 1, "Y": 2}]
    )
    synthetic.source.write_text(synthetic.source.read_text().replace("X=%d", "x=%d"))
    changed = read_problem(synthetic.source)
    (build,) = Builder(changed, compiler=CompilerCommand.parse("gcc"), cache_dir=cache).build(
        [{"X": 1, "Y": 2}]
    )
    assert not build.cached
    assert "x=1 Y=2" in run(build.executable)


def test_a_missing_compiler_is_a_failed_build(synthetic, tmp_path):
    missing = CompilerCommand.parse("no-such-compiler-xyz {source} -o {output}")
    (build,) = Builder(synthetic, compiler=missing, cache_dir=tmp_path / "c").build(
        [{"X": 1, "Y": 2}]
    )
    assert not build.ok and "cannot run no-such-compiler-xyz" in build.error


def test_compile_templates():
    command = CompilerCommand.parse("gcc -O3 {source} -o {output}")
    argv = command.render(Path("a.c"), Path("a.out"), ["-DX=1"], ["/inc"])
    assert argv == ["gcc", "-O3", "-I/inc", "-DX=1", "a.c", "-o", "a.out"]
    with pytest.raises(AnnotuneError, match="needs a {output}"):
        CompilerCommand.parse("gcc {source}")
    with pytest.raises(AnnotuneError, match="unknown placeholder {src}"):
        CompilerCommand.parse("gcc {src} -o {output} {source}")


def test_ptxas_resources_are_parsed():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4kernPf' for 'sm_90'
ptxas info    : Function properties for _Z4kernPf
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]
"""
    (resources,) = parse_ptxas(log).values()
    assert (resources.registers, resources.shared_bytes) == (40, 2048)
    assert (resources.spill_stores, resources.spill_loads, resources.stack_bytes) == (8, 4, 16)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_records_registers_per_variant(tmp_path, data_dir):
    examples = data_dir.parent.parent / "examples" / "cuda"
    shutil.copytree(examples / "stencil2d", tmp_path / "stencil2d")
    shutil.copytree(examples / "common", tmp_path / "common")
    source = tmp_path / "stencil2d" / "stencil2d.cu"
    problem = read_problem(source)
    builder = Builder(problem, cache_dir=tmp_path / "c")
    (build,) = builder.build([{"BLOCK_X": 64, "BLOCK_Y": 4, "ROWS_PER_THREAD": 2}])
    assert build.ok, build.error
    (kernel,) = build.resources.values()
    assert kernel.registers > 0


def test_a_compiler_killed_from_outside_is_transient_and_not_cached(synthetic, tmp_path):
    """A compile the machine ended (a signal, here the compiler killing itself) says nothing
    about the variant: it is not cached, so the next build compiles it again."""
    script = tmp_path / "killed-cc"
    script.write_text("#!/bin/sh\nkill -9 $$\n")
    script.chmod(0o755)
    builder = Builder(
        synthetic,
        compiler=CompilerCommand.parse(f"{script} {{source}} -o {{output}}"),
        cache_dir=tmp_path / "c",
    )
    (first,) = builder.build([{"X": 4, "Y": 3}])
    assert not first.ok and first.transient and "signal 9" in first.error
    (again,) = builder.build([{"X": 4, "Y": 3}])
    assert not again.cached and again.transient


def test_the_configs_include_directories_reach_the_compiler(tmp_path):
    """A header found only through `include` in annotune.toml: libclang read it, so must gcc."""
    (tmp_path / "third_party" / "inc").mkdir(parents=True)
    (tmp_path / "third_party" / "inc" / "common.h").write_text("#define SCALE 3\n")
    source = tmp_path / "third_party" / "k.c"
    source.write_text(
        '#include <stdio.h>\n#include "common.h"\n#define B 2\n'
        'int main(void) { printf("%d\\n", B * SCALE); return 0; }\n'
    )
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "third_party/k.c"\ninclude = ["third_party/inc"]\n'
        '[file.params]\nB = "values(2, 4)"\n'
    )
    problem = read_problem(source)
    builder = Builder(problem, compiler=CompilerCommand.parse("gcc"), cache_dir=tmp_path / "c")
    (built,) = builder.build([{"B": 4}])
    assert built.ok, built.error
    assert run(built.executable).strip() == "12"


def test_output_twice_compiles_and_is_checked_as_the_compiler_takes_it(synthetic, tmp_path):
    """gcc takes `-o {output} -o {output}` (the last wins); annotune's `-MD` and its `-E`
    read-back of the values would fail with both (cc1: "too many filenames given", "output
    filename specified twice"), so the rendered command keeps the last alone."""
    command = CompilerCommand.parse("gcc {source} -o {output} -o {output}")
    argv = command.render(Path("a.c"), Path("a.out"), ["-DX=1"], [])
    assert argv == ["gcc", "-DX=1", "a.c", "-o", "a.out"]
    builder = Builder(synthetic, compiler=command, cache_dir=tmp_path / "c")
    assert builder.verifies_values
    (build,) = builder.build([{"X": 4, "Y": 3}])
    assert build.ok, build.error
    assert "X=4 Y=3" in run(build.executable)
    with pytest.raises(AnnotuneError, match="where the last -o says"):
        CompilerCommand.parse("gcc {source} -o {output} -o prog")
    wrapper = CompilerCommand.parse("./wrap.sh {source} -o log -o {output}")  # not gcc's -o
    assert wrapper.render(Path("a.c"), Path("a.out"), [], [])[-4:] == ["-o", "log", "-o", "a.out"]
