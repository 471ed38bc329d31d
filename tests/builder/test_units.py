"""One value per program: a tuned copy of an unguarded header reaches every translation unit of
the compile command, and each unit is read back. Shaped like Rodinia's heartwall: the tuned
source and another file compiled with it both `#include "header.h"`, which defines the knob with
no `#ifndef`; a quoted include finds the header beside the including file first. Before, only
the tuned source read the copy, and every variant's other file ran with the header's 16."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

HEADER = "#define B 16\nint from_file(void);\nint from_sub(void);\n"
MAIN = """\
#include <stdio.h>
#include "header.h"
int main(void) { printf("main %d file %d sub %d\\n", B, from_file(), from_sub()); return 0; }
"""
FILE = '#include "header.h"\nint from_file(void) { return B; }\n'
# In a folder of its own, beside a header the tuned source never reads.
SUB = '#include "local.h"\nint from_sub(void) { return B * SCALE; }\n'
LOCAL = '#include "../header.h"\n#define SCALE 1\n'


def heartwall(root: Path, command: str = "gcc -O0 {source} file.c sub/sub.c -o {output}") -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "header.h").write_text(HEADER)
    (root / "main.c").write_text(MAIN)
    (root / "file.c").write_text(FILE)
    (root / "sub" / "sub.c").write_text(SUB)
    (root / "sub" / "local.h").write_text(LOCAL)
    (root / "annotune.toml").write_text(
        f'[[file]]\npath = "main.c"\ncompile = "{command}"\n'
        '[file.params]\nB = "values(16, 32, 64)"\n'
    )
    return root / "main.c"


def builder(source: Path, cache: Path) -> Builder:
    problem = read_problem(source)
    assert not problem.param("B").guarded  # only a rewritten copy sets it
    command = CompilerCommand(problem.settings.compile or ())
    return Builder(problem, compiler=command, cache_dir=cache)


def run(build) -> str:
    assert build.ok, build.error
    return subprocess.run([str(build.executable)], capture_output=True, text=True).stdout


def test_every_unit_of_the_command_prints_the_tuned_value(tmp_path, monkeypatch):
    source = heartwall(tmp_path / "heartwall")
    monkeypatch.chdir(tmp_path)  # the command's paths are the config's, made absolute
    builds = builder(source, tmp_path / "cache").build([{"B": 16}, {"B": 32}, {"B": 64}])
    assert [run(b) for b in builds] == [f"main {b} file {b} sub {b}\n" for b in (16, 32, 64)]
    assert (source.parent / "header.h").read_text() == HEADER  # the user's files untouched
    assert (source.parent / "sub" / "local.h").read_text() == LOCAL


def test_a_header_read_only_by_a_copied_unit_is_a_dependency(tmp_path, monkeypatch):
    """`sub/local.h` is copied beside the copy of `sub/sub.c`; the entry depends on the
    original, not on the copy that was deleted with the scratch directory."""
    source = heartwall(tmp_path / "heartwall")
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    assert run(builder(source, cache).build([{"B": 32}])[0]) == "main 32 file 32 sub 32\n"
    assert builder(source, cache).build([{"B": 32}])[0].cached
    (source.parent / "sub" / "local.h").write_text(LOCAL.replace("SCALE 1", "SCALE 2"))
    (build,) = builder(source, cache).build([{"B": 32}])
    assert not build.cached and run(build) == "main 32 file 32 sub 64\n"


def test_a_unit_that_cannot_have_the_copy_is_a_failure_naming_it(tmp_path, monkeypatch):
    """A unit outside the tuned source's tree, including the header by a relative path: its
    copy would not find the header's, so it keeps reading the original, and the read-back
    check says which unit sees which definition."""
    source = heartwall(
        tmp_path / "heartwall", "gcc -O0 {source} file.c sub/sub.c ../far.c -o {output}"
    )  # noqa: E501
    (tmp_path / "far.c").write_text('#include "heartwall/header.h"\nint far(void) { return B; }\n')
    monkeypatch.chdir(tmp_path)
    built, failed = builder(source, tmp_path / "cache").build([{"B": 16}, {"B": 32}])
    assert run(built) == "main 16 file 16 sub 16\n"
    assert not failed.ok and failed.executable is None
    header = tmp_path / "heartwall" / "header.h"
    assert failed.error == (
        f"tuned value not seen by the compiler in {tmp_path / 'far.c'}: {header}:1: error: "
        "the compiler sees B = 16, not the tuned 32: the compiler read the original of this "
        f"file, not its copy ({tmp_path / 'far.c'} is outside {tmp_path / 'heartwall'}, where "
        "annotune copies the files it compiles: move it there, or have it include the header "
        "through an -I directory)"
    )


def test_another_unit_defining_a_tuned_macro_otherwise_is_a_failure_naming_it(tmp_path):
    """A `-D` macro reaches every unit, but a unit's own unguarded `#define` wins there: the
    program would run with two values of B."""
    source = tmp_path / "main.c"
    source.write_text(
        "#include <stdio.h>\n#ifndef B\n#define B 1 // @tune values(1, 2)\n#endif\n"
        'int other(void);\nint main(void) { printf("%d %d\\n", B, other()); return 0; }\n'
    )
    other = tmp_path / "other.c"
    other.write_text("#define B 1\nint other(void) { return B; }\n")
    command = CompilerCommand.parse(f"gcc -O0 -w {{source}} {other} -o {{output}}")
    one, two = Builder(read_problem(source), compiler=command, cache_dir=tmp_path / "c").build(
        [{"B": 1}, {"B": 2}]
    )
    assert run(one) == "1 1\n"
    assert two.error == (
        f"tuned value not seen by the compiler in {other}: {other}:1: error: the compiler sees "
        f"B = 1, not the tuned 2: this definition wins over annotune's ({source}:3)"
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_compiles_the_copy_of_the_host_file_too(tmp_path, monkeypatch):
    """heartwall itself: `main.cu` tuned, `file.c` compiled with it by nvcc (whose `-M` lists
    a unit's files too)."""
    root = tmp_path / "heartwall"
    root.mkdir()
    (root / "header.h").write_text(
        '#define B 16\n#ifdef __cplusplus\nextern "C"\n#endif\nint from_file(void);\n'
    )
    (root / "main.cu").write_text(
        '#include <stdio.h>\n#include "header.h"\n__global__ void k(int *x) { *x = B; }\n'
        'int main(void) { printf("main %d file %d\\n", B, from_file()); return 0; }\n'
    )
    (root / "file.c").write_text(FILE)
    (root / "annotune.toml").write_text(
        '[[file]]\npath = "main.cu"\ncompile = "nvcc -O0 {source} file.c -o {output}"\n'
        '[file.params]\nB = "values(16, 32)"\n'
    )
    monkeypatch.chdir(tmp_path)
    builds = builder(root / "main.cu", tmp_path / "cache").build([{"B": 16}, {"B": 32}])
    assert [run(b) for b in builds] == ["main 16 file 16\n", "main 32 file 32\n"]
