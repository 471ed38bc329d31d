"""Config discovery as git's safe.directory: bounded by the repository or home, and only the
user's own files; hostile values in a config are located errors, never a crash."""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.config import find_config
from annotune.core.diagnostics import AnnotuneError

SOURCE = "#define N 4\nint a[N];\n"
NAMING_K = '[[file]]\npath = "{path}"\n[file.params]\nN = "values(2, 4)"\n'


def project(root: Path, config_dir: Path, relative: str = "k.c") -> tuple[Path, Path]:
    """A source at `root/relative` and an annotune.toml in `config_dir` naming it."""
    source = root / relative
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(SOURCE)
    config_dir.mkdir(parents=True, exist_ok=True)
    config = config_dir / "annotune.toml"
    config.write_text(NAMING_K.format(path=os.path.relpath(source, config_dir)))
    return source, config


def error_of(source: Path, **options) -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source, **options)
    return caught.value


@pytest.mark.parametrize("git", ["dir", "file"])  # a worktree's .git is a file
def test_discovery_stops_at_the_repository_root(tmp_path, git):
    repo = tmp_path / "shared" / "repo"
    source, _ = project(repo, tmp_path / "shared", "src/k.c")  # planted above the repository
    (repo / ".git").mkdir() if git == "dir" else (repo / ".git").write_text("gitdir: x\n")
    assert find_config(source) is None
    with pytest.raises(AnnotuneError, match="no tunable parameters"):
        read_problem(source)
    _, own = project(repo, repo, "src/k.c")  # the repository's own config is found
    assert find_config(source) == own


def test_discovery_stops_at_the_home_directory(tmp_path, monkeypatch):
    home = tmp_path / "home" / "me"
    source, _ = project(home / "work", tmp_path / "home")
    monkeypatch.setenv("HOME", str(home))
    assert find_config(source) is None


def test_a_config_of_another_user_is_refused_unless_named(tmp_path, monkeypatch):
    source, config = project(tmp_path, tmp_path)
    if os.geteuid() == 0:
        os.chown(config, 4242, -1)
    else:  # a file of ours seen by another user
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    error = error_of(source)
    assert "not using this config: it is owned by uid" in error.message
    assert error.location.file == str(config)
    assert error.hint == f"pass --config {config} to use it anyway"
    assert read_problem(source, config_path=config).param("N").values == (2, 4)


def test_a_config_anyone_may_write_is_refused(tmp_path):
    source, config = project(tmp_path, tmp_path)
    config.chmod(0o666)
    assert "writable by every user (mode 666)" in error_of(source).message
    assert read_problem(source, config_path=config).param("N").default == 4


def test_a_group_writable_config_is_used_only_in_a_private_group(tmp_path, monkeypatch):
    """Debian and Ubuntu give each user a group of their own and umask 002: such a group may
    write the config; a group with another member, or of another name, may not."""
    source, config = project(tmp_path, tmp_path)
    config.chmod(0o664)
    gid = config.stat().st_gid
    me = pwd.struct_passwd(("me", "x", os.geteuid(), gid, "", "/nonexistent", "/bin/sh"))
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: me)
    found = {}
    for group, members in [("me", []), ("me", ["me", "mallory"]), ("staff", [])]:
        entry = grp.struct_group((group, "x", gid, members))
        monkeypatch.setattr(grp, "getgrgid", lambda _, entry=entry: entry)
        try:
            found[group, len(members)] = find_config(source) == config
        except AnnotuneError as error:
            found[group, len(members)] = error.message
    refused = f"writable by group {{}} (gid {gid}) (mode 664)"
    assert found[("me", 0)] is True
    assert refused.format("me") in found[("me", 2)]
    assert refused.format("staff") in found[("staff", 0)]


@pytest.mark.parametrize(
    ("data", "where", "message"),
    [
        (b"[project]\nname = 'caf\xe9'\n", (2, 12), "invalid UTF-8 byte 0xe9"),
        (b"[project\n", (1, 9), "invalid TOML"),
    ],
)
def test_an_unreadable_pyproject_above_the_source_is_located(tmp_path, data, where, message):
    source, _ = project(tmp_path / "a" / "b", tmp_path / "a" / "b" / "elsewhere")
    (tmp_path / "a" / "pyproject.toml").write_bytes(data)
    error = error_of(source)
    assert message in error.message
    location = error.location
    assert (location.file, location.line, location.column) == (
        str(tmp_path / "a" / "pyproject.toml"),
        *where,
    )
    assert "--config" in error.hint


@pytest.mark.parametrize(
    ("entry", "where", "message"),
    [
        ('args = ["a\\u0000b"]', (3, 10), "a string cannot hold a NUL character"),
        ("repeats = inf", (3, 11), "'repeats' must be a finite number"),
        ("timeout = nan", (3, 11), "'timeout' must be a finite number"),
        ('[file.params]\n"A B" = { domain = "bool", default = 0 }', (4, 1), "'A B' is not a macro"),
        ('"\\u001b[2J" = 1', (3, 1), "unknown key '\\x1b[2J' in [[file]]"),
        ("args = " + "[" * 2000 + "]" * 2000, (1, 1), "nested too deeply"),
        # The position scan once lost its place after an inline table inside an array.
        ('constraints = [{}, "N > 1"]', (3, 1), "'constraints' must be a list of strings"),
    ],
)
def test_hostile_values_are_located_errors(tmp_path, entry, where, message):
    source = tmp_path / "k.c"
    source.write_text(SOURCE)
    config = tmp_path / "annotune.toml"
    config.write_text(f'[[file]]\npath = "k.c"\n{entry}\n')
    error = error_of(source)
    assert message in error.message
    assert (error.location.file, error.location.line, error.location.column) == (
        str(config),
        *where,
    )


def test_a_loop_of_links_named_in_a_config_is_no_crash(tmp_path):
    source, config = project(tmp_path, tmp_path)
    (tmp_path / "loop.c").symlink_to(tmp_path / "loop.c")
    config.write_text('[[file]]\npath = "loop.c"\n' + config.read_text())
    assert read_problem(source).param("N").values == (2, 4)


def vendored(tmp_path: Path) -> tuple[Path, Path]:
    """A read-only vendored tree holding no config, and the user's directory beside it."""
    source = tmp_path / "vendor" / "lib" / "k.c"
    source.parent.mkdir(parents=True)
    source.write_text(SOURCE)
    (tmp_path / "vendor" / ".git").mkdir()  # its own repository: discovery stops there
    mine = tmp_path / "mine"
    mine.mkdir()
    return source, mine


def test_the_working_directorys_config_naming_the_source_is_used(tmp_path, monkeypatch):
    """A config kept outside a vendored tree: run from its directory, no --config needed."""
    source, mine = vendored(tmp_path)
    (mine / "annotune.toml").write_text(NAMING_K.format(path="../vendor/lib/k.c"))
    source.parent.chmod(0o555)
    monkeypatch.chdir(mine)
    problem = read_problem(source)
    assert problem.param("N").values == (2, 4)
    assert problem.param("N").origin == "config"
    monkeypatch.chdir(mine.parent / "vendor")  # elsewhere: no config reaches the source
    assert "no tunable parameters" in error_of(source).message


def test_a_working_directory_config_that_does_not_name_the_source_is_not_used(
    tmp_path, monkeypatch
):
    source, mine = vendored(tmp_path)
    config = mine / "annotune.toml"
    config.write_text(NAMING_K.format(path="other.c"))
    config.chmod(0o666)  # untrusted, but it does not name the source: neither used nor refused
    monkeypatch.chdir(mine)
    error = error_of(source)
    assert "no tunable parameters" in error.message
    assert "--config PATH" in error.hint


def test_a_working_directory_config_naming_the_source_is_trusted_as_others(
    tmp_path, monkeypatch
):
    source, mine = vendored(tmp_path)
    config = mine / "annotune.toml"
    config.write_text(NAMING_K.format(path="../vendor/lib/k.c"))
    config.chmod(0o666)
    monkeypatch.chdir(mine)
    error = error_of(source)
    assert "writable by every user (mode 666)" in error.message
    assert error.location.file == str(config)


def test_a_config_above_the_source_comes_before_the_working_directorys(tmp_path, monkeypatch):
    source, mine = vendored(tmp_path)
    (mine / "annotune.toml").write_text(NAMING_K.format(path="../vendor/lib/k.c"))
    (source.parent / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\n[file.params]\nN = "values(4, 8)"\n'
    )
    monkeypatch.chdir(mine)
    assert read_problem(source).param("N").values == (4, 8)
