"""Every compiled variant is read back with the compiler's preprocessor: a tuned macro that
another definition overrides makes a failed build naming it, never a measurement of values
the program did not have."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand
from annotune.builder.verify import preprocess_command

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

PRINTS_B = (
    "#include <stdio.h>\n"
    "#ifndef B\n"
    "#define B 1 // @tune values(1, 2, 4)\n"
    "#endif\n"
    '#include "late.h"\n'
    'int main(void) { printf("B=%d\\n", B); return 0; }\n'
)


def run(executable: Path) -> str:
    return subprocess.run([str(executable)], capture_output=True, text=True, check=True).stdout


def gcc(flags: str = "") -> CompilerCommand:
    return CompilerCommand.parse(f"gcc -O0 {flags} {{source}} -o {{output}}")


def test_a_definition_annotune_did_not_read_makes_the_variant_a_located_failure(tmp_path):
    """`late.h` is found only through the compile command's -I, so annotune never read it; its
    unguarded `#define B 2` beats `-DB=4`. Compiled and run, the variant would say B=2."""
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "late.h").write_text("/* vendored */\n#define B 2\n")
    source = tmp_path / "k.c"
    source.write_text(PRINTS_B)
    problem = read_problem(source)
    command = gcc(f"-I{tmp_path / 'hidden'}")
    builder = Builder(problem, compiler=command, cache_dir=tmp_path / "c")
    assert builder.verifies_values

    (build,) = builder.build([{"B": 4}])
    assert not build.ok and build.executable is None
    assert build.error == (
        "tuned value not seen by the compiler: "
        f"{tmp_path / 'hidden' / 'late.h'}:2: error: the compiler sees B = 2, not the tuned 4: "
        f"this definition wins over annotune's ({source}:3)"
    )
    (again,) = builder.build([{"B": 4}])  # cached like any compile error
    assert again.cached and again.error == build.error

    (default,) = builder.build([{"B": 2}])  # the value the compiler sees anyway
    assert default.ok and run(default.executable) == "B=2\n"


def test_rewritten_headers_in_include_directories_win_over_the_originals(tmp_path):
    """A third-party header in another directory, found through the command's own `-I` (which
    comes before annotune's): the rewritten copy must be the one included, and the check
    proves it. Before, every variant ran with the header's 8."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "conf.h").write_text("#define TILE 8\n")
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "k.c"
    source.write_text(
        '#include <stdio.h>\n#include "conf.h"\n'
        'int main(void) { printf("TILE=%d\\n", TILE); return 0; }\n'
    )
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "src/k.c"\ninclude = ["include"]\n'
        'compile = "gcc -O0 -Iinclude {source} -o {output}"\n'
        '[file.params]\nTILE = "values(8, 32)"\n'
    )
    problem = read_problem(source)
    assert not problem.param("TILE").guarded
    builder = Builder(
        problem,
        compiler=CompilerCommand.parse(" ".join(problem.settings.compile)),
        cache_dir=tmp_path / "c",
    )
    (build,) = builder.build([{"TILE": 32}])
    assert build.ok, build.error
    assert run(build.executable) == "TILE=32\n"


def test_a_macro_undefined_at_the_end_is_judged_by_its_last_definition(tmp_path):
    """Hygienic headers `#undef` their knobs when done: absent from `-dM`, not wrong."""
    source = tmp_path / "k.c"
    source.write_text(
        "#include <stdio.h>\n"
        "#ifndef B\n#define B 1 // @tune values(1, 2, 4)\n#endif\n"
        "static const int b = B;\n#undef B\n"
        'int main(void) { printf("B=%d\\n", b); return 0; }\n'
    )
    builder = Builder(read_problem(source), compiler=gcc(), cache_dir=tmp_path / "c")
    (build,) = builder.build([{"B": 4}])
    assert build.ok, build.error
    assert run(build.executable) == "B=4\n"


def test_one_preprocessor_run_per_compiled_variant_none_per_cached_one(tmp_path):
    log = tmp_path / "calls"
    wrapper = tmp_path / "bin" / "gcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {shutil.which("gcc")} "$@"\n')
    wrapper.chmod(0o755)
    source = tmp_path / "k.c"
    source.write_text(PRINTS_B.replace('#include "late.h"\n', ""))
    command = CompilerCommand.parse(f"{wrapper} -O0 {{source}} -o {{output}}")
    builder = Builder(read_problem(source), compiler=command, cache_dir=tmp_path / "c")
    builds = builder.build([{"B": 1}, {"B": 2}])
    assert all(b.ok for b in builds)
    builder.build([{"B": 1}, {"B": 2}])
    calls = [line.split() for line in log.read_text().splitlines()]
    assert sum("-dM" in call for call in calls) == 2
    assert sum("-E" not in call and "--version" not in call for call in calls) == 2


def test_a_compiler_annotune_cannot_run_preprocess_only_is_not_checked(tmp_path):
    wrapper = tmp_path / "my-wrapper"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("gcc")} "$@"\n')
    wrapper.chmod(0o755)
    source = tmp_path / "k.c"
    source.write_text(PRINTS_B.replace('#include "late.h"\n', ""))
    command = CompilerCommand.parse(f"{wrapper} {{source}} -o {{output}}")
    builder = Builder(read_problem(source), compiler=command, cache_dir=tmp_path / "c")
    assert not builder.verifies_values
    (build,) = builder.build([{"B": 4}])
    assert build.ok and run(build.executable) == "B=4\n"


def test_the_preprocess_only_command_keeps_flags_and_drops_other_inputs():
    argv = [
        "gcc", "-O2", "-I/inc", "-include", "pre.c", "-DX=1", "/s/k.c", "util.c", "lib.o",
        "-MD", "-MF", "deps.d", "-o", "/s/macros.txt", "-lm",
    ]  # fmt: skip
    assert preprocess_command(argv, "/s/k.c", "M") == [
        "gcc", "-E", "-dM", "-O2", "-I/inc", "-include", "pre.c", "-DX=1", "/s/k.c",
        "-o", "/s/macros.txt", "-lm",
    ]  # fmt: skip
    nvcc = ["nvcc", "-cubin", "-Xptxas", "-v", "k.cu", "-o", "out"]
    assert preprocess_command(nvcc, "k.cu", "D") == [
        "nvcc", "-E", "-Xcompiler", "-dD", "-cubin", "-Xptxas", "-v", "k.cu", "-o", "out",
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_variants_are_checked_through_the_host_preprocessor(tmp_path):
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "late.h").write_text("#define B 2\n")
    source = tmp_path / "k.cu"
    source.write_text(
        PRINTS_B.replace("int main", "__global__ void k(int *b) { *b = B; }\nint main")
    )
    command = CompilerCommand.parse(f"nvcc -I{tmp_path / 'hidden'} {{source}} -o {{output}}")
    builder = Builder(read_problem(source), compiler=command, cache_dir=tmp_path / "c")
    wrong, right = builder.build([{"B": 4}, {"B": 2}])
    assert (
        not wrong.ok and "late.h:1: error: the compiler sees B = 2, not the tuned 4" in wrong.error
    )
    assert right.ok, right.error
