"""`annotune build --env-file` and `--json`'s `env`: the environment a tuned header's values are
for, in a form a job script applies; and the guide's example of it, run as written."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.emit import render_header
from annotune.emit.sizes import SizeEntry, SizeTable, render_size_header

ROOT = Path(__file__).resolve().parents[2]

SOURCE = """#include <stdio.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) { printf("%d\\n", X); return 0; }
"""

# What a shell would make of it if it were not quoted: a space, quotes, `$`, a command.
ODD = """a b 'c' "d" $HOME $(touch pwned) `touch pwned` ;|&"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A source whose THREADS is tuned through OMP_NUM_THREADS, with a tuned header for 'dev'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.c").write_text(SOURCE)
    odd = ODD.replace('"', '\\"')  # in a TOML string
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "t.c"\n[file.params]\n'
        'THREADS = { domain = "values(1, 2, 4)", default = 1 }\n'
        f'[file.env]\nOMP_NUM_THREADS = "{{THREADS}}"\nODD = "{odd}"\n'
    )
    problem = read_problem(tmp_path / "t.c")
    header = tmp_path / "tuned" / "dev" / "t.h"
    header.parent.mkdir(parents=True)
    header.write_text(
        render_header(
            problem,
            {"X": 2, "THREADS": 4},
            device="dev",
            space_size=6,
            measurements=6,
            default_time=2.0,
            best_time=1.0,
            tool_version="9.9.9",
        )
    )
    return tmp_path / "t.c"


def test_json_gives_the_environment_and_the_env_file_applies_it(cli, project, tmp_path):
    data = cli.json(
        "build", project, "--device", "dev", "-o", "out.h", "--env-file", "t.env", "--json"
    )
    assert data["env"] == {"OMP_NUM_THREADS": "4", "ODD": ODD}
    exports = (tmp_path / "t.env").read_text()
    assert "export OMP_NUM_THREADS=4\n" in exports
    shown = subprocess.run(
        ["sh", "-c", '. ./t.env && printf "%s|%s" "$OMP_NUM_THREADS" "$ODD"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == f"4|{ODD}" and not (tmp_path / "pwned").exists()


def test_a_device_without_a_tuned_header_gets_the_defaults_environment(cli, project, tmp_path):
    result = cli("build", project, "--device", "other", "-o", "out.h", "--env-file", "t.env")
    assert result.exit_code == 0, result.stderr
    assert "export OMP_NUM_THREADS=1\n" in (tmp_path / "t.env").read_text()


def _guide_block() -> str:
    text = (ROOT / "docs/guide/build.md").read_text()
    section = text[text.index("A tuned environment (`[file.env]`") :]
    return re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_the_guide_example_runs_from_the_repository_root(tmp_path):
    """As written, the build directory moved out of the checkout."""
    script = _guide_block()
    assert "build/threads" in script
    out = tmp_path / "threads"
    shown = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("build/threads", shlex.quote(str(out)))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header = (ROOT / "tests/data/threads/tuned/example-host/sum.h").read_text()
    tuned = re.search(r'#define ANNOTUNE_ENV_OMP_NUM_THREADS "(\d+)"', header).group(1)
    assert f"threads {tuned}\n" in shown  # the program ran with the header's thread count
    assert f"export OMP_NUM_THREADS={tuned}\n" in (out / "sum.env").read_text()


def test_a_size_aware_header_has_no_one_environment_to_write(cli, project, tmp_path):
    table = SizeTable(
        "N",
        64,
        "the source's default",
        tuple(SizeEntry(n, {"X": 1, "THREADS": t}, environment=f"OMP_NUM_THREADS={t}")
              for n, t in ((64, 1), (4096, 4))),
    )  # fmt: skip
    header = tmp_path / "tuned" / "dev" / "t.h"
    header.write_text(
        render_size_header(
            read_problem(project), table, device="dev", space_size=6, tool_version="9"
        )
    )
    assert cli.json("build", project, "--device", "dev", "-o", "out.h", "--json")["env"] is None
    result = cli("build", project, "--device", "dev", "-o", "o2.h", "--env-file", "t.env")
    assert result.exit_code == 2 and "per problem size" in result.stderr
    assert not (tmp_path / "t.env").exists() and not (tmp_path / "o2.h").exists()
