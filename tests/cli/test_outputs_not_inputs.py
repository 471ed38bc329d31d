"""No output over an input (issue 46.2): `build -o`, `--env-file` and `export -o` refuse the
source, a header it reads, the config, the results database and each other, exit 2, the file
untouched."""

from __future__ import annotations

import pytest

SOURCE = '#include "conf.h"\n// @tune pow2(1, 8)\n#define B 4\nint main(void) { return B - B; }\n'


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "k.c").write_text(SOURCE)
    (tmp_path / "conf.h").write_text("#define OTHER 1\n")
    (tmp_path / ".annotune").mkdir()
    (tmp_path / ".annotune" / "results.db").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "victim", "said"),
    [
        (["build", "k.c", "-o", "k.c"], "k.c", "-o k.c is the source"),
        (["build", "k.c", "-o", "./sub/../k.c"], "k.c", "is the source"),
        (["build", "k.c", "-o", "conf.h"], "conf.h", "a file the source reads"),
        (["build", "k.c", "-o", ".annotune/results.db"], ".annotune/results.db",
         "the results database"),
        (["build", "k.c", "-o", "out.h", "--env-file", "k.c"], "k.c", "--env-file k.c is"),
        (["build", "k.c", "-o", "same.h", "--env-file", "same.h"], None, "another of its"),
        (["export", "k.c", "-o", "k.c"], "k.c", "is the source"),
        (["export", "k.c", "-o", "conf.h"], "conf.h", "which the source reads"),
    ],
)  # fmt: skip
def test_an_output_that_is_an_input_is_refused_untouched(cli, project, args, victim, said):
    (project / "sub").mkdir()
    before = (project / victim).read_bytes() if victim else None
    done = cli(*args)
    assert done.exit_code == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    if victim:
        assert (project / victim).read_bytes() == before


def test_a_link_to_the_source_is_the_source(cli, project):
    (project / "alias.c").symlink_to(project / "k.c")
    done = cli("build", "k.c", "-o", "alias.c")
    assert done.exit_code == 2 and "is the source" in done.stderr
    assert (project / "k.c").read_text() == SOURCE


def test_a_new_file_and_a_device_may_be_written(cli, project):
    assert cli("build", "k.c", "-o", "new.h").exit_code == 0
    assert cli("build", "k.c", "-o", "/dev/null").exit_code == 0
