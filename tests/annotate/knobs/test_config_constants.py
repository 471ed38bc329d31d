"""Knobs that are C constants or variables (`const int block_size = 256;`, `constexpr`,
`static const`, an enumerator, `unsigned int threads = 256;`, `dim3 blocks (256);`), declared
in annotune.toml for code that must not be edited: set by rewriting the initializer in a copy,
never with a `-D` that would replace the name itself."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import variant_source
from annotune.core.diagnostics import AnnotuneError


def project(tmp_path: Path, source: str, params: str, name: str = "k.cpp") -> Path:
    path = tmp_path / name
    path.write_text(source)
    (tmp_path / "annotune.toml").write_text(f'[[file]]\npath = "{name}"\n[file.params]\n{params}\n')
    return path


@pytest.mark.parametrize(
    ("declaration", "value", "kind"),
    [
        ("const int block_size = 256;", "256", "constant"),
        ("static const unsigned block_size = 256u;", "256u", "constant"),
        ("constexpr int block_size{256};", "256", "constant"),
        ("static constexpr long block_size = (256);", "(256)", "constant"),
        ("const int other = 1, block_size = 256;", "256", "constant"),
        ("enum { A = 1, block_size = 256, C };", "256", "constant"),
        ("enum class Sizes : int { block_size = 256 };", "256", "constant"),
        ("struct S { static constexpr int block_size = 256; };", "256", "constant"),
        ("#define HALF 128\nconst int block_size = 2 * HALF;", "2 * HALF", "constant"),
        ("int block_size = 256;", "256", "variable"),
        ("void f() { unsigned int block_size = 256; }", "256", "variable"),
        ("struct dim3 { dim3(int); };\nvoid f() { dim3 block_size (256); }", "256", "variable"),
        ("static std::size_t block_size = 256;", "256", "variable"),
        ("void f() { int n = 1, block_size = 256; }", "256", "variable"),
        # a statement sets it where no declaration initializes it (the 46 launches HeCBench
        # sizes so: `threads_per_block = 256;`)
        ("void f() { int block_size; block_size = 256; }", "256", "assignment"),
        ("int block_size;\nvoid f(int c) { if (c) block_size = 256; }", "256", "assignment"),
    ],
)
def test_a_constant_or_variable_is_a_knob_set_in_a_copy(tmp_path, declaration, value, kind):
    source = project(
        tmp_path,
        f"{declaration}\nint main() {{ return 0; }}\n",
        'block_size = "values(128, 256)"',
    )
    problem = read_problem(source)
    param = problem.param("block_size")
    assert (param.default, param.guarded, param.declaration) == (256, False, kind)
    span = param.value_span
    assert Path(span.file).read_bytes()[span.start : span.end] == value.encode()
    variant = variant_source(problem, {"block_size": 128})
    assert variant.defines == ()  # a -Dblock_size=128 would make `const int 128 = ...`
    written = variant.files["k.cpp"].decode()
    assert declaration.replace(value, "128") in written


def test_a_name_only_used_keeps_the_old_meaning(tmp_path):
    source = project(
        tmp_path,
        "int g() { int x; x = block_size; return x; }\nint main() { return 0; }\n",
        'block_size = "values(128, 256)"',
    )  # only used: a -D may set it, given a default
    with pytest.raises(AnnotuneError, match="not #defined to a number"):
        read_problem(source)


@pytest.mark.parametrize(
    ("code", "role", "column"),
    [
        # a statement of one literal is its place now (test above); others are not
        ("void f() { int block_size; block_size += 256; }", "a variable no rewrite can set", 16),
        ("void f(int n) { int block_size; block_size = n / 4; }", "a variable no rewrite", 21),
        ("const int *block_size = 0;", "a variable no rewrite can set", 12),
        ("void f(const int block_size = 256);", "a function parameter", 18),
        ("void f(int n, float *block_size) {}", "a function parameter", 22),
        ("typedef const int block_size;", "a type", 19),
        ("struct block_size;", "a type", 8),
        ("constexpr int block_size() { return 128; }", "a function", 15),
        ("int g() { return block_size(); }", "a function", 18),
        ("template <int block_size> int g() { return block_size; }", "a template parameter", 15),
        ("struct S { int n; } s; int g() { return s.block_size; }", "a member", 43),
        ("int g() { for (int block_size; ;) {} return 0; }", "a variable of a `for`", 20),
    ],
)
def test_a_name_no_d_flag_can_stand_for_is_refused_where_the_config_names_it(
    tmp_path, code, role, column
):
    """`-Dblock_size=256` would replace each of these names (`int f(int 256)`,
    `constexpr int 256()`): every variant would fail at `<command-line>`, naming nothing of the
    user's. Refused when the config is read, at the knob, saying what the name is there."""
    source = project(
        tmp_path,
        f"{code}\nint main() {{ return 0; }}\n",
        'block_size = { domain = "values(128, 256)", default = 128 }',
    )
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    message = caught.value.message
    assert message.startswith(f"'block_size' is {role}")
    assert f"{source}:1:{column}, not a value a knob can set" in message
    location = caught.value.location
    assert (Path(location.file).name, location.line) == ("annotune.toml", 4)
    assert "a knob must name a macro" in caught.value.hint


def test_a_config_default_that_differs_from_the_constant_is_an_error(tmp_path):
    source = project(
        tmp_path,
        "const int block_size = 256;\nint main() { return block_size; }\n",
        'block_size = { domain = "values(128, 256)", default = 128 }',
    )
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert "default of block_size is 128, but the compiler uses 256: the constant at" in str(
        caught.value.message
    )
    assert Path(caught.value.location.file).name == "annotune.toml"


def test_a_constant_declared_twice_is_ambiguous(tmp_path):
    source = project(
        tmp_path,
        "void f() { const int bs = 64; }\nvoid g() { const int bs = 128; }\nint main() {}\n",
        'bs = "values(64, 128)"',
    )
    with pytest.raises(AnnotuneError, match="'bs' is declared 2 times"):
        read_problem(source)


def test_a_constant_in_a_skipped_branch_is_not_the_knob(tmp_path):
    source = project(
        tmp_path,
        "#ifdef NEVER\nconst int bs = 64;\n#else\nconst int bs = 32;\n#endif\nint main() {}\n",
        'bs = "values(32, 64)"',
    )
    assert read_problem(source).param("bs").default == 32


def test_a_name_found_nowhere_is_an_error_before_anything_compiles(tmp_path):
    source = project(
        tmp_path, "int main() { return 0; }\n", 'BLOCK = { domain = "values(1, 2)", default = 1 }'
    )
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert (
        "'BLOCK' is neither a macro, a constant, nor a name the code uses" in caught.value.message
    )
    location = caught.value.location
    assert (Path(location.file).name, location.line) == ("annotune.toml", 4)


def test_a_name_only_the_environment_carries_is_not_an_error(tmp_path):
    source = project(
        tmp_path, "int main() { return 0; }\n", 'T = { domain = "values(1, 2)", default = 1 }'
    )
    config = tmp_path / "annotune.toml"
    config.write_text(config.read_text() + '[file.env]\nOMP_NUM_THREADS = "{T}"\n')
    assert read_problem(source).param("T").default == 1


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_each_variant_of_a_constant_is_the_program_measured(cli, tmp_path, monkeypatch):
    """`const int delay = 30;` read by the program's timing line: every configuration compiles
    (none fails with `expected an identifier`) and is timed at its own value."""
    project(
        tmp_path,
        "#include <stdio.h>\nstatic const int delay = 30;\n"
        'int main(void) { printf("took %d ms\\n", delay); return 0; }\n',
        'delay = "values(10, 20, 30)"',
        name="k.c",
    )
    config = tmp_path / "annotune.toml"
    config.write_text(
        config.read_text().replace(
            "[file.params]", "time_regex = 'took ([0-9]+) ms'\n[file.params]"
        )
    )
    monkeypatch.chdir(tmp_path)
    result = cli("tune", "k.c", "--budget", "3", "--recheck", "0", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["default"]["params"], report["default"]["time"]) == ({"delay": 30}, 30.0)
    assert (report["best"]["params"], report["best"]["time"]) == ({"delay": 10}, 10.0)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_build_ships_a_tuned_constant_through_copies_and_never_as_a_macro(
    cli, tmp_path, monkeypatch
):
    """The header force-included into the original source must compile (a `#define delay`
    would turn the declaration into `const int 10 = 30;`); the tuned value reaches the program
    through `--shadow-dir`'s copy, and without it build refuses, naming the constant."""
    source = project(
        tmp_path,
        "#include <stdio.h>\nstatic const int delay = 30;\n"
        'int main(void) { printf("took %d ms\\n", delay); return 0; }\n',
        'delay = "values(10, 30)"',
        name="k.c",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANNOTUNE_DEVICE", "test-host")
    defaults = cli("build", "k.c", "-o", "defaults.h")
    assert defaults.exit_code == 0, defaults.stderr
    run = subprocess.run(["gcc", "-include", "defaults.h", str(source), "-o", "k"], check=False)
    assert run.returncode == 0  # the header leaves the constant's declaration alone

    header = tmp_path / "tuned" / "test-host" / "k.h"
    header.parent.mkdir(parents=True)
    header.write_text("#if 0\n#define delay 10\n#endif\n")
    refused = cli("build", "k.c", "-o", "out.h")
    assert refused.exit_code == 2
    assert "delay is tuned to 10" in refused.stderr and "uses this constant, 30" in refused.stderr

    shadow = cli("build", "k.c", "-o", "out.h", "--shadow-dir", "shadow")
    assert shadow.exit_code == 0, shadow.stderr
    args = shlex.split(shadow.stdout)
    subprocess.run(["gcc", "-include", "out.h", *args, "-o", "k"], check=True)
    assert subprocess.run(["./k"], capture_output=True, text=True).stdout == "took 10 ms\n"


def test_a_declaration_after_a_block_is_found(tmp_path):
    """HeCBench atomicSystemWide: `if (...) { ... }` and then `unsigned int numThreads = 256;`:
    the block before is no part of the declaration."""
    source = project(
        tmp_path,
        "int main(int argc, char **argv) {\n  if (argc < 2) {\n    return 1;\n  }\n"
        "  unsigned int numThreads = 256;\n  return (int)numThreads;\n}\n",
        'numThreads = "pow2(32, 1024)"',
    )
    param = read_problem(source).param("numThreads")
    assert (param.default, param.declaration, param.location.line) == (256, "variable", 5)


def test_one_name_declared_with_one_value_in_two_places_is_one_knob_set_in_both(tmp_path):
    """HeCBench attention-paged: `const int threads = 256;` in main.cu and `int threads = 256;`
    in a header's function, both the block of their kernels: one knob, both rewritten."""
    (tmp_path / "fill.h").write_text("static int fill() { int threads = 256; return threads; }\n")
    source = project(
        tmp_path,
        '#include "fill.h"\nint main() { const int threads = 256; return threads + fill(); }\n',
        'threads = "pow2(64, 1024)"',
    )
    problem = read_problem(source)
    param = problem.param("threads")
    assert param.default == 256 and len(param.more_spans) == 1
    variant = variant_source(problem, {"threads": 64})
    assert b"const int threads = 64;" in variant.files["k.cpp"]
    assert b"int threads = 64;" in variant.files["fill.h"]


def test_statements_of_one_number_are_one_knob_and_of_two_numbers_an_error(tmp_path):
    code = "int bs;\nvoid f() { bs = 256; }\nvoid g() { bs = 256; }\nint main() { return 0; }\n"
    problem = read_problem(project(tmp_path, code, 'bs = "values(128, 256)"'))
    written = variant_source(problem, {"bs": 128}).files["k.cpp"].decode()
    assert written.count("bs = 128;") == 2 and "256" not in written
    with pytest.raises(AnnotuneError, match="annotune cannot tell which one is the knob"):
        read_problem(
            project(
                tmp_path,
                code.replace("g() { bs = 256", "g() { bs = 512"),
                'bs = "values(128, 256)"',
            )
        )
