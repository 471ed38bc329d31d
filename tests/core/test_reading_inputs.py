"""Reading user-named files: regular files only, bounded, UTF-8 errors located; never a hang."""

from __future__ import annotations

import gzip
import os
import socket
from pathlib import Path

import pytest

from annotune.core import inputs
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import (
    CONFIG,
    SOURCE,
    InputKind,
    argument_path,
    decode_utf8,
    read_input,
    read_results,
    read_text,
)


def error_of(call, *args) -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        call(*args)
    return caught.value


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a regular file"),
        (lambda p: p.mkdir(), "is a directory, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
        (lambda p: p.symlink_to(p), "cannot read: Too many levels of symbolic links"),
        (lambda p: p.symlink_to(p.parent / "gone"), "no such file"),
    ],
)
def test_only_regular_files_are_read_and_nothing_blocks(tmp_path, make, message):
    path = tmp_path / "input"
    make(path)
    error = error_of(read_input, path, SOURCE)
    assert error.message == message
    assert (error.location.file, error.location.line, error.location.column) == (str(path), 1, 1)


def test_a_socket_is_no_input(tmp_path):
    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        assert error_of(read_input, path, CONFIG).message == "is a socket, not a regular file"
    finally:
        server.close()


def test_a_fifo_swapped_in_after_the_check_is_refused_not_waited_on(tmp_path, monkeypatch):
    path = tmp_path / "k.c"
    path.write_text("int x;\n")
    real_open = os.open

    def swap_then_open(name, flags, *args):
        Path(name).unlink()
        os.mkfifo(name)
        return real_open(name, flags, *args)  # without O_NONBLOCK this would block forever

    monkeypatch.setattr(inputs.os, "open", swap_then_open)
    assert "is a FIFO" in error_of(read_input, path, SOURCE).message


def test_size_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.toml"
    with path.open("wb") as file:
        file.truncate(CONFIG.limit + 1)  # sparse: nothing is written or read
    error = error_of(read_text, path, CONFIG)
    assert error.message == "is too large for a config file: 1,048,577 bytes, more than 1 MiB"


def test_invalid_utf8_is_located_at_its_character_column(tmp_path):
    path = tmp_path / "a.toml"
    path.write_bytes(b"x = 1\n# " + "日本é".encode() + b" \xff\n")  # 6 characters, 10 bytes
    error = error_of(read_text, path, CONFIG)
    assert error.message == "invalid UTF-8 byte 0xff"
    assert (error.location.line, error.location.column) == (2, 7)


def test_a_byte_order_mark_is_dropped_from_text(tmp_path):
    path = tmp_path / "a.toml"
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")
    assert read_text(path, CONFIG) == "x = 1\n"
    assert error_of(decode_utf8, b"ab\xfe", "f").location.column == 3


def test_gzip_is_read_and_its_decompressed_size_bounded(tmp_path, monkeypatch):
    plain, bomb = tmp_path / "r.json", tmp_path / "bomb.json.gz"
    plain.write_bytes(gzip.compress(b'{"a": 1}'))
    assert read_results(plain) == '{"a": 1}'
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))  # 4 KiB on disk
    monkeypatch.setattr(inputs, "RESULTS", InputKind("results file", 1 << 20))
    assert "more than 1 MiB" in error_of(read_results, bomb).message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x1f\x8bnot gzip", "not a readable gzip file"),
        (gzip.compress(b"{}", mtime=0)[:-6], "gzip"),
    ],
    ids=["not-gzip", "truncated"],  # test ids the same in every xdist worker
)
def test_a_broken_gzip_file_is_a_user_error(tmp_path, data, message):
    path = tmp_path / "r.json.gz"
    path.write_bytes(data)
    assert message in error_of(read_results, path).message


def test_a_path_starting_with_a_dash_is_no_option():
    assert argument_path(Path("-x.c")) == "./-x.c"
    assert argument_path(Path("/tmp/-x.c")) == "/tmp/-x.c"
    assert argument_path(Path("a/-x.c")) == "a/-x.c"


def test_a_small_file_is_read_without_a_buffer_as_large_as_the_limit():
    """`read(limit + 1)` allocated 64 MiB for a three-line source (1 GiB for a results file):
    under `ulimit -v` that was a MemoryError. Read a chunk at a time, never past the limit."""
    import io

    from annotune.core.inputs import read_bounded

    class Counting(io.BytesIO):
        asked: list[int] = []

        def read(self, size: int | None = -1) -> bytes:
            self.asked.append(size if size is not None else -1)
            return super().read(size)

    small = Counting(b"int b;\n")
    assert read_bounded(small, 1 << 30) == b"int b;\n"
    assert max(small.asked) <= 1 << 20
    big = Counting(b"x" * (3 << 20))
    assert len(read_bounded(big, 2 << 20)) == (2 << 20) + 1  # one more: too large, said
