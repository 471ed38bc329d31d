"""A study's measurements are of the program built from every file the compile command reads:
an edit of a second source, or of a header only it includes, is another program, measured
again; an unchanged tree reuses every measurement."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture
def two_units(tmp_path, monkeypatch) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "conf.h").write_text("#define TILE 8\n")
    (project / "b.h").write_text("#define OFFSET 0\n")
    (project / "a.c").write_text(
        '#include <stdio.h>\n#include "conf.h"\nint b_part(void);\n'
        'int main(void) { printf("took %d ms\\n", TILE + b_part()); return 0; }\n'
    )
    (project / "b.c").write_text('#include "b.h"\nint b_part(void) { return OFFSET; }\n')
    (project / "annotune.toml").write_text(
        '[[file]]\npath = "a.c"\ncompile = "gcc -O1 {source} b.c -o {output}"\n'
        "time_regex = 'took ([0-9]+) ms'\n"
        '[file.params]\nTILE = "values(4, 8, 16)"\n'
    )
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("ANNOTUNE_DEVICE", "test-host")
    return project


def tune(cli) -> dict:
    result = cli("tune", "../proj/a.c", "--budget", "3", "--recheck", "0", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("edited", "text"),
    [("b.h", "#define OFFSET 100\n"), ("b.c", "int b_part(void) { return 100; }\n")],
)
def test_an_edit_any_unit_reads_is_measured_again(cli, two_units, edited, text):
    first = tune(cli)
    assert first["reused"] == 0
    assert tune(cli)["reused"] == 3  # nothing changed: nothing measured again
    (two_units / edited).write_text(text)
    again = tune(cli)
    assert again["reused"] == 0
    assert again["default"]["time"] == 108.0  # 8 + 100: the program as the files are now
