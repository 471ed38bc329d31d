"""The environment a tuned header's values are for: string macros that the C compiler and
`header_env` read as the same text, whatever characters the value holds."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import header_env, render_defaults_header, render_header
from annotune.emit.arch import parse_tuned_header

SOURCE = """#include <stdio.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) {
  printf("%d\\n", X);
#ifdef ANNOTUNE_ENV_LABEL
  printf("[%s] [%s]\\n", ANNOTUNE_ENV_OMP_NUM_THREADS, ANNOTUNE_ENV_LABEL);
#endif
  return 0;
}
"""

# A value with every kind of character a C string or a shell might take otherwise.
LABEL = "x{X} \"q\" \\n */ ?? 'é' $HOME `t` €"


@pytest.fixture
def problem(tmp_path):
    (tmp_path / "t.c").write_text(SOURCE)
    label = LABEL.replace("\\", "\\\\").replace('"', '\\"')
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "t.c"\n[file.params]\n'
        'THREADS = { domain = "values(1, 2, 4)", default = 1 }\n'
        f'[file.env]\nOMP_NUM_THREADS = "{{THREADS}}"\nLABEL = "{label}"\n'
    )
    return read_problem(tmp_path / "t.c")


def tuned(problem) -> str:
    return render_header(
        problem,
        {"X": 2, "THREADS": 4},
        device="cpu-Test",
        space_size=6,
        measurements=6,
        default_time=2.0,
        best_time=1.0,
        tool_version="9.9.9",
    )


def test_the_environment_is_read_back_as_it_was_set(problem):
    text = tuned(problem)
    assert '#define ANNOTUNE_ENV_OMP_NUM_THREADS "4"' in text
    assert header_env(text, "h") == {"OMP_NUM_THREADS": "4", "LABEL": LABEL.replace("{X}", "2")}
    defaults = render_defaults_header(problem, device="cpu-Test")
    assert header_env(defaults, "h")["OMP_NUM_THREADS"] == "1"  # at the defaults


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_the_compiler_reads_the_same_strings(problem, tmp_path):
    header = tmp_path / "tuned.h"
    header.write_text(tuned(problem))
    program = tmp_path / "t"
    subprocess.run(
        ["gcc", "-include", str(header), str(tmp_path / "t.c"), "-o", str(program)], check=True
    )
    out = subprocess.run([str(program)], capture_output=True, check=True).stdout.decode()
    env = header_env(header.read_text(), str(header))
    assert out == f"2\n[{env['OMP_NUM_THREADS']}] [{env['LABEL']}]\n"


def test_a_header_with_an_environment_is_still_one_of_ours(problem, tmp_path):
    """`build --per-arch` reads tuned headers line by line: the block is no stranger there."""
    header = tmp_path / "tuned" / "cpu-test" / "t.h"
    header.parent.mkdir(parents=True)
    header.write_text(tuned(problem))
    assert "ANNOTUNE_ENV_" in header.read_text()
    assert parse_tuned_header(header, "t.c").values == {"X": 2, "THREADS": 4}


def test_an_environment_macro_annotune_cannot_read_is_a_located_error():
    text = '/* */\n#ifndef ANNOTUNE_ENV_A\n#define ANNOTUNE_ENV_A getenv("A")\n#endif\n'
    with pytest.raises(AnnotuneError, match="ANNOTUNE_ENV_A|variable A") as caught:
        header_env(text, "h.h")
    assert (caught.value.location.line, caught.value.location.column) == (3, 24)
