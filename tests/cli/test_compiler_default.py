"""The default is what the compiler sees: a vendored knob defined by an unguarded `#define B 16`,
declared in annotune.toml, tuned and built from a subdirectory as a user would.

The program prints `took <10 + B> ms`, so the baseline and every build can be read off its
output; `gcc -E -dM` with the header `build` writes shows what the compiler really gets."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.run.device import DEVICE_ENV

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

DEVICE = "test-host"


@pytest.fixture
def vendored(tmp_path, monkeypatch) -> Path:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "conf.h").write_text("#define B 16\n")
    (tmp_path / "k.c").write_text(
        '#include <stdio.h>\n#include "conf.h"\n'
        'int main(void) { printf("took %d ms\\n", 10 + B); return 0; }\n'
    )
    (tmp_path / "sub").mkdir()
    monkeypatch.setenv(DEVICE_ENV, DEVICE)
    monkeypatch.chdir(tmp_path / "sub")
    return tmp_path


def declare(root: Path, param: str) -> None:
    (root / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\ninclude = ["inc"]\n'
        "time_regex = 'took ([0-9.]+) ms'\n"
        f"[file.params]\n{param}\n"
    )


def compiled_value(root: Path, header: Path) -> str:
    """B as gcc sees it with `header` force-included, as the README's Makefile rule builds."""
    macros = subprocess.run(
        ["gcc", "-E", "-dM", "-include", str(header), f"-I{root / 'inc'}", str(root / "k.c")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next(line.split()[2] for line in macros.splitlines() if line.startswith("#define B "))


def test_a_config_default_the_compiler_never_sees_stops_the_tune(cli, vendored):
    declare(vendored, 'B = { domain = "values(4, 8, 16)", default = 8 }')
    result = cli("tune", "../k.c", "--budget", "2")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{vendored / 'annotune.toml'}:6:46: error: ")
    assert "the config's default of B is 8, but the compiler uses 16" in result.stderr
    assert not (vendored / "tuned").exists()


def test_the_baseline_is_the_program_the_user_builds(cli, vendored):
    declare(vendored, 'B = "values(4, 8, 16)"')
    result = cli("tune", "../k.c", "--budget", "3")
    assert result.exit_code == 0, result.stderr
    default = next(line for line in result.stdout.splitlines() if line.startswith("default"))
    assert "26 ms" in default and "{'B': 16}" in default  # 10 + 16: the program as built
    assert "1.86x" in result.stdout  # 26 ms against the best, B = 4 (14 ms)


def test_builds_refusal_names_the_compilers_value(cli, vendored):
    declare(vendored, 'B = "values(4, 8, 16)"')
    assert cli("tune", "../k.c", "--budget", "3").exit_code == 0
    result = cli("build", "../k.c", "-o", "out.h")
    assert result.exit_code == 2
    assert "B is tuned to 4" in result.stderr
    assert "the compiler uses this unguarded #define, 16" in result.stderr
    assert not Path("out.h").exists()


@pytest.mark.parametrize("tuned", [None, 8, 16])
@pytest.mark.parametrize("config_default", [", default = 8", ""])
def test_build_never_exits_0_with_a_header_the_compiler_ignores(
    cli, vendored, tuned, config_default
):
    """Before any tune (the defaults) and with a tuned value equal to the config's default or
    to the source's: whenever build succeeds, gcc sees the header's value."""
    declare(vendored, f'B = {{ domain = "values(4, 8, 16)"{config_default} }}')
    if tuned is not None:
        header = vendored / "tuned" / DEVICE / "k.h"
        header.parent.mkdir(parents=True)
        header.write_text(f"#ifndef B\n#define B {tuned}\n#endif\n")
    result = cli("build", "../k.c", "-o", "out.h")
    if result.exit_code == 0:
        written = next(
            line.split()[2]
            for line in Path("out.h").read_text().splitlines()
            if line.startswith("#define B ")
        )
        assert compiled_value(vendored, Path("out.h").resolve()) == written
    else:
        assert result.exit_code == 2
        assert "the compiler uses 16" in result.stderr or "unguarded #define, 16" in result.stderr


def test_an_undef_and_a_new_value_are_read_as_the_compiler_reads_them(cli, vendored):
    """`#undef B` and a new value after the include: the default is the later one, and the
    header build writes is what the compiler then sees."""
    (vendored / "k.c").write_text(
        '#include <stdio.h>\n#include "conf.h"\n#undef B\n#define B 32\n'
        'int main(void) { printf("took %d ms\\n", 10 + B); return 0; }\n'
    )
    declare(vendored, 'B = "values(4, 8, 16, 32)"')
    result = cli("build", "../k.c", "-o", "out.h")
    assert result.exit_code == 0, result.stderr
    assert "#define B 32 " in Path("out.h").read_text()
    assert compiled_value(vendored, Path("out.h").resolve()) == "32"


def test_build_reads_what_the_compiler_sees_with_its_own_preprocessor(cli, vendored):
    """A definition annotune's reading of the source misses (`push_macro`/`pop_macro` restore
    the include's value after a redefinition) still stops build: the header is checked with
    `gcc -E -dM`, as compiled."""
    (vendored / "k.c").write_text(
        '#include <stdio.h>\n#include "conf.h"\n#pragma push_macro("B")\n#undef B\n'
        '#define B 32\n#pragma pop_macro("B")\n'
        'int main(void) { printf("took %d ms\\n", 10 + B); return 0; }\n'
    )
    declare(vendored, 'B = "values(4, 8, 16, 32)"')
    result = cli("build", "../k.c", "-o", "out.h")
    assert result.exit_code == 2
    assert "the compiler sees B = 16, not the tuned 32" in result.stderr
    assert not Path("out.h").exists()


def test_a_compiler_that_cannot_preprocess_here_is_said_not_silently_passed(cli, vendored):
    declare(vendored, 'B = "values(4, 8, 16)"')
    config = vendored / "annotune.toml"
    config.write_text(
        config.read_text().replace(
            "[file.params]", 'compile = "no-such-cc {source} -o {output}"\n[file.params]'
        )
    )
    result = cli("build", "../k.c", "-o", "out.h")
    assert result.exit_code == 0, result.stderr
    assert "no-such-cc cannot be run preprocess-only here" in result.stderr
