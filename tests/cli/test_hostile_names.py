"""Hostile names: user text that becomes a file name (a device's slug in
`tuned/<device-slug>/<stem>.h`, a source's stem, the directory named after a source's in the
user cache, the temporary names beside a file written) is bounded, with a hash of the whole
when cut (`annotune.core.files.bounded_name`), so a 5,000-character `--device` or a 255-byte
file name is a name like any other, never "File name too long" as an internal error. Short
names, and so every committed header's path, are as they were."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import annotune.results.workspace
from annotune.core import files
from annotune.emit import slugify, tuned_header_path, write_if_changed
from annotune.results.database import Database
from annotune.results.workspace import workspace
from annotune.run.device import DEVICE_ENV

LONG_DEVICE = "NVIDIA " + "H" * 4993  # 5,000 characters
NAME_MAX = 255  # bytes of a file name on ext4, XFS, tmpfs


@pytest.fixture
def source(tmp_path, data_dir) -> Path:
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return tmp_path / "synthetic.c"


def components_fit(path: Path) -> bool:
    return all(len(part.encode()) <= NAME_MAX for part in path.parts)


@pytest.mark.parametrize("how", ["option", "environment"])
def test_build_for_a_5000_character_device_writes_the_defaults(
    cli, source, tmp_path, monkeypatch, how
):
    out = tmp_path / "out.h"
    if how == "environment":
        monkeypatch.setenv(DEVICE_ENV, LONG_DEVICE)
        result = cli("build", source, "-o", out)
    else:
        result = cli("build", source, "-o", out, "--device", LONG_DEVICE)
    assert result.exit_code == 0, result.stderr
    assert "internal error" not in result.stderr
    assert f"no tuned header for device '{LONG_DEVICE}'" in result.stderr
    assert "#define X 1" in out.read_text()


def test_a_tune_for_a_5000_character_device_is_found_by_build(cli, source, tmp_path):
    tuned = cli("tune", source, "--budget", "3", "--device", LONG_DEVICE, "--json")
    assert tuned.exit_code == 0, tuned.stderr
    header = tuned_header_path(source, LONG_DEVICE)
    assert header.is_file() and components_fit(header)
    out = tmp_path / "out.h"
    built = cli("build", source, "-o", out, "--device", LONG_DEVICE)
    assert built.exit_code == 0, built.stderr
    assert "no tuned header" not in built.stderr
    assert out.read_bytes() == header.read_bytes()


def test_slugs_are_bounded_with_a_hash_and_short_ones_unchanged():
    assert slugify("NVIDIA A100-PCIE-40GB") == "nvidia-a100-pcie-40gb"
    assert slugify("cpu-Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz") == (
        "cpu-intel-xeon-gold-6230-cpu-2.10ghz"
    )
    assert slugify("x" * 100) == "x" * 100
    long = slugify(LONG_DEVICE)
    assert len(long) <= 100 and long.startswith("nvidia-hhhh")
    assert long == slugify(LONG_DEVICE)  # stable: the next build finds the tune's header
    assert long != slugify(LONG_DEVICE + "H")  # one more letter, another device


def test_bounded_name_counts_bytes_and_keeps_whole_characters():
    name = "é" * 200  # 400 bytes
    bounded = files.bounded_name(name)
    assert len(bounded.encode()) <= NAME_MAX
    assert bounded.startswith("é" * 100) and bounded[-17] == "-"
    assert files.bounded_name("short.h") == "short.h"


def test_a_source_with_a_255_byte_name_gets_a_header(tmp_path):
    source = tmp_path / ("k" * NAME_MAX)  # no suffix: `<stem>.h` would be 257 bytes
    source.write_text("int x;\n")
    header = tuned_header_path(source, "dev")
    assert components_fit(header) and header.suffix == ".h"
    assert write_if_changed(header, "/* tuned */\n")
    assert header.read_text() == "/* tuned */\n"


def test_a_file_with_a_255_byte_name_is_written_atomically(tmp_path):
    path = tmp_path / ("o" * (NAME_MAX - 2) + ".h")
    assert write_if_changed(path, "#define A 1\n")  # its temporary name beside it fits too
    assert path.read_text() == "#define A 1\n"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_results_database_with_the_longest_name_sqlite_takes_is_created(tmp_path):
    path = tmp_path / ("r" * (NAME_MAX - 7) + ".db")  # and "-wal" after it: 255 bytes
    with Database(path):
        pass
    assert path.is_file()


def test_the_cached_workspace_of_a_long_directory_name_is_a_name(tmp_path, monkeypatch):
    directory = tmp_path / ("d" * NAME_MAX)
    directory.mkdir()
    other = tmp_path / ("d" * (NAME_MAX - 1) + "e")
    other.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(annotune.results.workspace, "can_write", lambda path: False)
    place = workspace(directory / "k.c").directory
    assert components_fit(place) and place.name.startswith("ddd")
    place.mkdir(parents=True)  # the name is one the file system takes
    assert workspace(other / "k.c").directory != place  # the hash of the whole path


def test_names_holding_rich_markup_are_printed_as_written(tmp_path):
    """A file, device or command named with rich markup (`[red]k.c`; a file name holds no
    `[/red]`), in a real terminal's colours: every message shows it as written."""
    import os
    import subprocess
    import sys

    source = tmp_path / "[red]k.c"
    source.write_text("#define B 4 // @tune values(4, 8)\nint main(void) { return B; }\n")
    env = {**os.environ, "FORCE_COLOR": "1", DEVICE_ENV: "[bold]dev[/bold]"}
    runs = [
        ["scan", str(source)],
        ["build", str(source), "-o", str(tmp_path / "out.h")],
        ["scan", str(tmp_path / "[red]gone.c")],
        ["[red]nothing[/red]"],
    ]
    for args in runs:
        done = subprocess.run(
            [sys.executable, "-m", "annotune", *args], capture_output=True, text=True, env=env
        )
        shown = done.stdout + done.stderr
        assert "[red]" in shown or "[bold]" in shown, (args, shown)
