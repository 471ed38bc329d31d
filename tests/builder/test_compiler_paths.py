"""A file whose name starts with `-` reaches the compiler as a file, never as an option."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand
from annotune.builder.compiler import run_compiler

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

PROGRAM = """#include <stdio.h>
#ifndef A
#define A 3 // @tune values(1, 3)
#endif
int main(void) { printf("%d\\n", A); return 0; }
"""


def test_paths_starting_with_a_dash_compile_with_gcc(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("-x.c").write_text(PROGRAM)
    argv = CompilerCommand.parse("gcc").render(Path("-x.c"), Path("-x"), ["-DA=1"], [])
    assert argv[-4:] == ["./-x.c", "-o", "./-x", "-lm"]
    assert run_compiler(argv, timeout=60).ok
    done = subprocess.run(["./-x"], capture_output=True, text=True, check=True)
    assert done.stdout == "1\n"


def test_a_source_named_like_an_option_is_built(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("-x.c").write_text(PROGRAM)
    problem = read_problem(Path("-x.c"))  # libclang, too, must not read it as `-x .c`
    builder = Builder(problem, compiler=CompilerCommand.parse("gcc"), cache_dir=tmp_path / "c")
    (build,) = builder.build([{"A": 1}])
    assert build.ok, build.error
    assert subprocess.run([str(build.executable)], capture_output=True, text=True).stdout == "1\n"
