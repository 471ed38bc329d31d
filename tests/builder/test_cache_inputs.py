"""The compile cache sees every input: headers with no tunable (next to the source, through
`-I`), the compiler it resolves to, the environment that changes compiles, and, for a compiler
annotune does not know, the include directories on its command line."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand
from annotune.builder.dependencies import command_inputs, read_dependency_file

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

SOURCE = """\
#include <stdio.h>
#include <size.h>
#include "extra.h"
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) { printf("%d\\n", X * N + M); return 0; }
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A source beside `size.h` (included with <...>: not the front end's, but the compiler
    finds it on annotune's -I), and `extra.h` in a folder only the compile command names.
    Spaces in the path exercise the escapes of the compiler's dependency list."""
    root = tmp_path / "my project"
    (root / "inc").mkdir(parents=True)
    (root / "main.c").write_text(SOURCE)
    (root / "size.h").write_text("#define N 10\n")
    (root / "inc" / "extra.h").write_text("#define M 3\n")
    return root


def builder(project: Path, cache: Path, compiler: str = "gcc") -> Builder:
    argv = (compiler, "-O2", f"-I{project / 'inc'}", "{source}", "-o", "{output}")
    command = CompilerCommand.parse(shlex.join(argv))
    return Builder(read_problem(project / "main.c"), compiler=command, cache_dir=cache)


def output(build) -> str:
    assert build.ok, build.error
    return subprocess.run([str(build.executable)], capture_output=True, text=True).stdout.strip()


def test_editing_a_header_with_no_tunable_recompiles(project, tmp_path):
    cache = tmp_path / "cache"
    (first,) = builder(project, cache).build([{"X": 2}])
    assert output(first) == "23"
    (again,) = builder(project, cache).build([{"X": 2}])
    assert again.cached and output(again) == "23"  # an unchanged tree reuses the binary

    (project / "size.h").write_text("#define N 100\n")
    (edited,) = builder(project, cache).build([{"X": 2}])
    assert not edited.cached and output(edited) == "203"

    (project / "inc" / "extra.h").write_text("#define M 7\n")
    (edited,) = builder(project, cache).build([{"X": 2}])
    assert not edited.cached and output(edited) == "207"
    (again,) = builder(project, cache).build([{"X": 2}])
    assert again.cached and output(again) == "207"


def test_a_header_edited_while_one_builder_runs_is_seen(project, tmp_path):
    one = builder(project, tmp_path / "cache")
    assert one.dependency_tracking
    assert output(one.build([{"X": 1}])[0]) == "13"
    (project / "inc" / "extra.h").write_text("#define M 4\n")
    (build,) = one.build([{"X": 1}])
    assert not build.cached and output(build) == "14"


def test_compile_environment_is_part_of_the_key(project, tmp_path, monkeypatch):
    """CPATH decides which `size.h` the compiler reads: the dependency list alone (the old
    file, unchanged) would serve the stale binary."""
    (project / "size.h").unlink()
    for name, value in (("a", 10), ("b", 20)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "size.h").write_text(f"#define N {value}\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("CPATH", str(tmp_path / "a"))
    assert output(builder(project, cache).build([{"X": 1}])[0]) == "13"
    monkeypatch.setenv("CPATH", str(tmp_path / "b"))
    (build,) = builder(project, cache).build([{"X": 1}])
    assert not build.cached and output(build) == "23"

    monkeypatch.setenv("ANNOTUNE_UNRELATED_VARIABLE", "1")
    assert builder(project, cache).build([{"X": 1}])[0].cached
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-O0")
    assert not builder(project, cache).build([{"X": 1}])[0].cached


def test_another_compiler_on_path_recompiles(project, tmp_path, monkeypatch):
    """Same command, same version line: a `gcc` earlier on PATH is still another compiler."""
    cache = tmp_path / "cache"
    assert output(builder(project, cache).build([{"X": 1}])[0]) == "13"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    wrapper = wrappers / "gcc"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("gcc")} -DM=5 -w "$@"\n')
    wrapper.chmod(0o755)
    (project / "inc" / "extra.h").write_text("#ifndef M\n#define M 3\n#endif\n")
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
    (build,) = builder(project, cache).build([{"X": 1}])
    assert not build.cached and output(build) == "15"


def test_an_unknown_compiler_falls_back_to_the_include_directories(project, tmp_path):
    script = tmp_path / "mycompiler"
    script.write_text(f'#!/bin/sh\nexec {shutil.which("gcc")} "$@"\n')
    script.chmod(0o755)
    cache = tmp_path / "cache"
    unknown = builder(project, cache, compiler=str(script))
    assert not unknown.dependency_tracking
    assert output(unknown.build([{"X": 1}])[0]) == "13"
    assert builder(project, cache, compiler=str(script)).build([{"X": 1}])[0].cached
    (project / "inc" / "extra.h").write_text("#define M 8\n")
    (build,) = builder(project, cache, compiler=str(script)).build([{"X": 1}])
    assert not build.cached and output(build) == "18"
    (project / "size.h").write_text("#define N 30\n")  # the source's own folder
    (build,) = builder(project, cache, compiler=str(script)).build([{"X": 1}])
    assert not build.cached and output(build) == "38"


def test_a_failure_for_a_missing_header_is_rebuilt_once_the_header_is_there(project, tmp_path):
    cache = tmp_path / "cache"
    (project / "inc" / "extra.h").unlink()
    (failed,) = builder(project, cache).build([{"X": 1}])
    assert not failed.ok and "extra.h" in failed.error
    assert builder(project, cache).build([{"X": 1}])[0].cached  # still failing: still cached
    (project / "inc" / "extra.h").write_text("#define M 6\n")
    (build,) = builder(project, cache).build([{"X": 1}])
    assert not build.cached and output(build) == "16"


def test_dependency_lists_and_command_inputs_are_read_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    listing = tmp_path / "deps.d"
    listing.write_text("out\\ put : a\\ b.c /usr/include/stdio.h \\\n  inc/x$$y.h \\#h.h\n")
    assert read_dependency_file(listing) == [
        str(tmp_path / "a b.c"),
        "/usr/include/stdio.h",
        str(tmp_path / "inc" / "x$y.h"),
        str(tmp_path / "#h.h"),
    ]
    assert read_dependency_file(tmp_path / "none.d") is None
    argv = (
        "cc",
        "-Iinc",
        "-I",
        "/abs",
        "-isystem",
        "sys",
        "-include",
        "pre.h",
        "-I{x}",
        "{source}",
    )
    assert command_inputs(argv) == [
        str(tmp_path / "inc"),
        "/abs",
        str(tmp_path / "sys"),
        str(tmp_path / "pre.h"),
    ]
