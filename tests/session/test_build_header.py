"""`annotune build`'s record cannot go stale: it holds every place the front end looked for a
header and found none, every response file of the compile command and every place a config
could be found or its search stops, and a change to any of them works the header out again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

GUARDED = "#ifndef B\n#define B {} // @tune values(2, 4, 8)\n#endif\n"
DEVICE = ("--device", "NVIDIA H100 80GB HBM3")  # no tuned header: the defaults are written


@pytest.fixture
def build(cli, tmp_path, monkeypatch):
    """Run `annotune build m.c -o out.h` in `tmp_path` (a repository, so that no config
    above it is read); the header written."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)

    def run(source: str = "m.c") -> str:
        out = tmp_path / "out.h"
        result = cli("build", tmp_path / source, "-o", out, *DEVICE)
        assert result.exit_code == 0, result.stderr
        return out.read_text()

    return run


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _config(tmp_path: Path, lines: str) -> None:
    _write(tmp_path / "annotune.toml", f'[[file]]\npath = "m.c"\n{lines}\n')


@pytest.mark.parametrize(
    "setting",
    ['include = ["include"]', 'compile = "gcc -Iinclude {source} -o {output}"'],
    ids=["include", "-I"],
)
def test_a_header_created_beside_the_source_shadows_the_one_found(build, tmp_path, setting):
    """Issue 46's case: `conf.h` found in `include/`, then one created beside `m.c`, which
    the compiler now finds first."""
    _write(tmp_path / "m.c", '#include "conf.h"\nint main(void) { return B; }\n')
    _write(tmp_path / "include" / "conf.h", GUARDED.format(4))
    _config(tmp_path, setting)
    assert "#define B 4 " in build() and "#define B 4 " in build()  # the second from the record
    _write(tmp_path / "conf.h", GUARDED.format(8))
    assert "#define B 8 " in build()


def test_a_header_created_in_an_earlier_include_directory_shadows_the_one_found(
    build, tmp_path
):
    _write(tmp_path / "m.c", "#include <conf.h>\nint main(void) { return B; }\n")
    _write(tmp_path / "second" / "conf.h", GUARDED.format(4))
    _config(tmp_path, 'compile = "gcc -Ifirst -Isecond {source} -o {output}"')
    (tmp_path / "first").mkdir()
    assert "#define B 4 " in build() and "#define B 4 " in build()
    _write(tmp_path / "first" / "conf.h", GUARDED.format(8))
    assert "#define B 8 " in build()


def test_a_header_not_found_anywhere_that_appears_is_read(build, tmp_path):
    """A missing header is expected (libclang has no system headers): it is no error, and
    its appearing in any place it was looked for is a change."""
    _write(tmp_path / "m.c", "#include <conf.h>\n#define A 1 // @tune values(1, 2)\nint a = A;\n")
    _config(tmp_path, 'include = ["include"]')
    assert "#define B" not in build() and "#define B" not in build()
    _write(tmp_path / "include" / "conf.h", GUARDED.format(8))
    assert "#define B 8 " in build()


def test_a_header_tested_with_has_include_that_appears_is_read(build, tmp_path):
    _write(
        tmp_path / "m.c",
        '#if __has_include("big.h")\n#define B 8 // @tune values(2, 4, 8)\n#else\n'
        "#define B 4 // @tune values(2, 4, 8)\n#endif\nint b = B;\n",
    )
    assert "#define B 4 " in build() and "#define B 4 " in build()
    _write(tmp_path / "big.h", "\n")
    assert "#define B 8 " in build()


def test_a_define_changed_in_a_response_file_is_read(build, tmp_path):
    _write(tmp_path / "m.c", GUARDED.format(4) + "int main(void) { return B; }\n")
    rsp = _write(tmp_path / "d.rsp", "-DB=2\n")
    _config(tmp_path, 'compile = "gcc @d.rsp {source} -o {output}"')
    assert "#define B 2 " in build() and "#define B 2 " in build()
    rsp.write_text("-DB=8\n")
    assert "#define B 8 " in build()


def test_a_response_file_named_from_the_working_directory_is_its_own(
    cli, tmp_path, monkeypatch
):
    """`@d.rsp` not beside the config names the one in the directory `build` runs in: another
    directory's is another command."""
    (tmp_path / "src" / ".git").mkdir(parents=True)
    _write(tmp_path / "src" / "m.c", GUARDED.format(4) + "int main(void) { return B; }\n")
    _write(
        tmp_path / "src" / "annotune.toml",
        '[[file]]\npath = "m.c"\ncompile = "gcc @d.rsp {source} -o {output}"\n',
    )
    out = tmp_path / "out.h"
    for directory, value in (("one", 2), ("two", 8), ("one", 2)):
        _write(tmp_path / directory / "d.rsp", f"-DB={value}\n")
        monkeypatch.chdir(tmp_path / directory)
        result = cli("build", tmp_path / "src" / "m.c", "-o", out, *DEVICE)
        assert result.exit_code == 0, result.stderr
        assert f"#define B {value} " in out.read_text()


def test_a_repository_boundary_that_appears_hides_the_config_above_it(
    build, tmp_path, monkeypatch
):
    """The search for a config stops at a `.git`: one created between the source and the
    config means the config no longer applies, run from the source's directory (a Makefile
    there). Run from the config's own directory, the config naming the source is used: a
    vendored repository's file, configured from outside it."""
    source = _write(tmp_path / "sub" / "m.c", GUARDED.format(4) + "int b = B;\n")
    _write(
        tmp_path / "annotune.toml",
        '[[file]]\npath = "sub/m.c"\ncompile = "gcc -DB=8 {source} -o {output}"\n',
    )
    monkeypatch.chdir(source.parent)
    assert "#define B 8 " in build("sub/m.c") and "#define B 8 " in build("sub/m.c")
    (source.parent / ".git").mkdir()
    assert "#define B 4 " in build("sub/m.c")
    monkeypatch.chdir(tmp_path)
    assert "#define B 8 " in build("sub/m.c")
    monkeypatch.chdir(source.parent)
    shutil.rmtree(source.parent / ".git")
    assert "#define B 8 " in build("sub/m.c")


def test_an_output_where_a_header_is_looked_for_is_refused(cli, tmp_path, monkeypatch):
    """OUT in a place an include was looked for and nothing found would be read by the next
    build (a source that includes its own header): refused as an input is, nothing written."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "m.c", '#include "m.tuned.h"\n' + GUARDED.format(4) + "int b = B;\n")
    out = tmp_path / "m.tuned.h"
    result = cli("build", tmp_path / "m.c", "-o", out, *DEVICE)
    assert result.exit_code == 2
    assert "where a header or config of the source is looked for" in result.stderr
    assert not out.exists()
