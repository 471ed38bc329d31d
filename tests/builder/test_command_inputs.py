"""A build is a function of every byte it reads: with several inputs in one compile command
(other sources and the headers only they include, objects, static and shared libraries,
response files), editing any of them rebuilds. Before, only the last translation unit's
headers were recorded and nothing the command named itself was hashed, so each edit below
was served the stale binary from the cache."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand, dependencies
from annotune.builder.dependencies import command_files

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

MAIN = """\
#include <stdio.h>
#ifndef B
#define B 4 // @tune values(4, 8)
#endif
int other(void);
int third(void);
int object(void);
int archived(void);
int shared(void);
int main(void) {
    printf("%d %d %d %d %d %d %d\\n", B, other(), third(), object(), archived(), shared(), R);
    return 0;
}
"""


OTHER_PLUS_100 = '#include "other.h"\nint other(void) { return OTHER + 100; }\n'


def compile_c(source: Path, *flags: str) -> None:
    subprocess.run(["gcc", "-O0", *flags, str(source)], check=True, cwd=source.parent)


def write_object(project: Path, value: int) -> None:
    (project / "object.c").write_text(f"int object(void) {{ return {value}; }}\n")
    compile_c(project / "object.c", "-c", "-o", "object.o")


def write_archive(project: Path, value: int) -> None:
    (project / "lib" / "archived.c").write_text(f"int archived(void) {{ return {value}; }}\n")
    compile_c(project / "lib" / "archived.c", "-c", "-o", "archived.o")
    (project / "lib" / "libarchived.a").unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", "libarchived.a", "archived.o"], check=True, cwd=project / "lib")


def write_shared(project: Path, value: int) -> None:
    (project / "lib" / "shared.c").write_text(f"int shared(void) {{ return {value}; }}\n")
    compile_c(project / "lib" / "shared.c", "-shared", "-fPIC", "-o", "libshared.so")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """`main.c`, tuned, linked with another source and one more (`other.c` includes a header
    nothing else reads), an object file, a static library found through `-L`/`-l`, a shared
    library named by its path, and a response file holding a define."""
    root = tmp_path / "project"
    (root / "lib").mkdir(parents=True)
    (root / "main.c").write_text(MAIN)
    (root / "other.h").write_text("#define OTHER 1\n")
    (root / "other.c").write_text('#include "other.h"\nint other(void) { return OTHER; }\n')
    (root / "third.c").write_text("int third(void) { return 2; }\n")
    (root / "flags.rsp").write_text("-DR=10\n")
    write_object(root, 3)
    write_archive(root, 4)
    write_shared(root, 5)
    monkeypatch.chdir(root)  # the command names its inputs relative to here, as a Makefile does
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    return root


def builder(project: Path, cache: Path) -> Builder:
    command = CompilerCommand.parse(
        "gcc -O0 {source} other.c third.c object.o lib/libshared.so @flags.rsp "
        "-Wl,-rpath,lib -Llib -larchived -o {output}"
    )
    return Builder(read_problem(project / "main.c"), compiler=command, cache_dir=cache)


def output(build) -> str:
    assert build.ok, build.error
    return subprocess.run([str(build.executable)], capture_output=True, text=True).stdout.strip()


EDITS = {
    "the other source": (lambda p: (p / "other.c").write_text(OTHER_PLUS_100), "8 101 2 3 4 5 10"),
    "a header only the other source reads": (
        lambda p: (p / "other.h").write_text("#define OTHER 11\n"),
        "8 11 2 3 4 5 10",
    ),
    "an object file": (lambda p: write_object(p, 30), "8 1 2 30 4 5 10"),
    "a static library found through -L": (lambda p: write_archive(p, 40), "8 1 2 3 40 5 10"),
    "a shared library": (lambda p: write_shared(p, 50), "8 1 2 3 4 50 10"),
    "a response file": (lambda p: (p / "flags.rsp").write_text("-DR=100\n"), "8 1 2 3 4 5 100"),
}


@pytest.mark.parametrize("what", EDITS)
def test_editing_any_input_of_the_command_rebuilds(project, tmp_path, what):
    cache = tmp_path / "cache"
    (first,) = builder(project, cache).build([{"B": 8}])
    assert output(first) == "8 1 2 3 4 5 10"
    assert builder(project, cache).build([{"B": 8}])[0].cached

    edit, expected = EDITS[what]
    edit(project)
    (build,) = builder(project, cache).build([{"B": 8}])
    assert not build.cached, f"{what} edited, and the build came from the cache"
    assert output(build) == expected
    assert builder(project, cache).build([{"B": 8}])[0].cached  # nothing edited since


def test_a_library_appearing_earlier_on_the_search_path_rebuilds(project, tmp_path):
    """`-La -Lb -lx` links b's libx.a until a libx appears in a: the file that is not there is
    a dependency too."""
    cache = tmp_path / "cache"
    (project / "first").mkdir()
    assert output(builder_with(project, cache, "-Lfirst")) == "8 1 2 3 4 5 10"
    assert builder_with(project, cache, "-Lfirst").cached
    (project / "first" / "archived.c").write_text("int archived(void) { return 9; }\n")
    compile_c(project / "first" / "archived.c", "-c", "-o", "archived.o")
    subprocess.run(["ar", "rcs", "libarchived.a", "archived.o"], check=True, cwd=project / "first")
    build = builder_with(project, cache, "-Lfirst")
    assert not build.cached and output(build) == "8 1 2 3 9 5 10"


def builder_with(project: Path, cache: Path, flag: str):
    command = CompilerCommand.parse(
        f"gcc -O0 {{source}} other.c third.c object.o lib/libshared.so @flags.rsp "
        f"-Wl,-rpath,lib {flag} -Llib -larchived -o {{output}}"
    )
    problem = read_problem(project / "main.c")
    return Builder(problem, compiler=command, cache_dir=cache).build([{"B": 8}])[0]


def test_the_files_a_command_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIBRARY_PATH", f"/env{os.pathsep}")
    (tmp_path / "outer.rsp").write_text('"spaced name.c" @inner.rsp -Lrsp\n')
    (tmp_path / "inner.rsp").write_text("x.o @outer.rsp\n")  # names itself again: left as is
    (tmp_path / "nvcc.opt").write_text("-DV=1 kernel.cu\n")
    (tmp_path / "compiler.log").write_text("")  # a wrapper's: not an input
    argv = (
        "gcc", "-O2", "{includes}", "{source}", "other.c", "-o", "{output}", "@outer.rsp",
        "--options-file", "nvcc.opt", "-MF", "deps.d", "compiler.log", "libz.so.1", "-L",
        "/l", "-lm", "-l:exact.a", "-x", "c", "-Wl,--as-needed",
    )  # fmt: skip
    found = command_files(argv)
    here = str(tmp_path)
    assert found.files == tuple(
        os.path.join(here, name)
        for name in (
            "outer.rsp", "inner.rsp", "nvcc.opt", "other.c", "spaced name.c", "x.o",
            "kernel.cu", "libz.so.1", "rsp/libm.so", "rsp/libm.a", "/l/libm.so", "/l/libm.a",
            "/env/libm.so", "/env/libm.a", "rsp/exact.a", "/l/exact.a", "/env/exact.a",
        )
    )  # fmt: skip
    assert found.expand(["gcc", "@outer.rsp", "-optf", "nvcc.opt", "@missing.rsp"]) == [
        "gcc", "spaced name.c", "x.o", "@outer.rsp", "-Lrsp", "-DV=1", "kernel.cu",
        "@missing.rsp",
    ]  # fmt: skip


def test_a_settled_library_is_read_once_not_once_per_batch(project, tmp_path, monkeypatch):
    """A library of hundreds of MiB is part of every batch's keys: once it has settled, its
    status stands for its bytes until it changes."""
    monkeypatch.setattr(dependencies, "_SETTLED", 0)  # whatever was written before counts
    library = str(project / "lib" / "libarchived.a")
    opened: list[str] = []

    read = dependencies.regular_file_digest

    def counted(path, *args, **kwargs):
        if str(path) == library:
            opened.append(library)
        return read(path, *args, **kwargs)

    monkeypatch.setattr(dependencies, "regular_file_digest", counted)
    one = builder(project, tmp_path / "cache")
    assert output(one.build([{"B": 8}])[0]) == "8 1 2 3 4 5 10" and len(opened) == 1
    assert one.build([{"B": 8}])[0].cached and len(opened) == 1
    write_archive(project, 40)
    (build,) = one.build([{"B": 8}])
    assert not build.cached and output(build) == "8 1 2 3 40 5 10" and len(opened) == 2
