"""Writing the user's files: the old file survives a failed write, a device or FIFO is written in
place without a hang and never read to compare, and an unwritable path is known up front."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from annotune.core import files
from annotune.core.files import read_regular, replace_atomically, same_content, why_not_writable

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_dev = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "k.h"
    path.write_bytes(b"old\n")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        replace_atomically(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["k.h"]


@needs_dev
def test_a_full_device_is_an_error_and_stays_a_device():
    with pytest.raises(OSError) as caught:
        replace_atomically(Path("/dev/full"), b"x" * 100_000)
    assert caught.value.errno == errno.ENOSPC
    assert Path("/dev/full").is_char_device()  # written in place, not renamed over


def test_a_fifo_without_reader_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="nothing reads from it"):
        replace_atomically(fifo, b"x")


def test_a_fifo_with_a_reader_gets_the_bytes(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    for _ in range(200):  # the reader must have the FIFO open before a writer may
        try:
            replace_atomically(fifo, b"#define A 1\n")
            break
        except OSError:
            threading.Event().wait(0.01)
    reader.join(timeout=5)
    assert received == [b"#define A 1\n"]
    assert fifo.is_fifo()


def test_a_symbolic_link_stays_a_link_to_the_replaced_file(tmp_path):
    target = tmp_path / "real.h"
    target.write_bytes(b"old\n")
    link = tmp_path / "link.h"
    link.symlink_to(target)
    replace_atomically(link, b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"new\n"


@needs_dev
def test_comparing_never_reads_a_device_or_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert not same_content(Path("/dev/zero"), b"\0" * 8)  # endless: not read at all
    assert not same_content(fifo, b"")  # would block for a writer
    assert read_regular(fifo) is None


def test_comparing_reads_no_more_than_the_new_content(tmp_path):
    big = tmp_path / "big.h"
    big.write_bytes(b"x" * 1_000_000)
    assert not same_content(big, b"x" * 10)  # sizes differ: not read
    small = tmp_path / "small.h"
    small.write_bytes(b"abc")
    assert same_content(small, b"abc")
    assert read_regular(big, limit=10) is None


def test_why_not_writable_names_the_reason(tmp_path):
    afile = tmp_path / "file.c"
    afile.write_text("x")
    assert why_not_writable(tmp_path / "new" / "deeper" / "out.h") is None
    assert why_not_writable(afile) is None
    assert why_not_writable(tmp_path) == "is a directory"
    assert why_not_writable(afile, directory=True) == "is not a directory"
    assert why_not_writable(afile / "out.h") == f"{afile} is not a directory"
    assert why_not_writable(afile / "sub" / "out.h") == f"{afile} is not a directory"
    assert why_not_writable(tmp_path / "new", directory=True) is None


@pytest.mark.skipif(ROOT, reason="root writes through any permission")
def test_why_not_writable_sees_a_read_only_directory(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert why_not_writable(locked / "out.h") == f"{locked}: permission denied"
        assert why_not_writable(locked / "sub" / "out.h") == f"{locked}: permission denied"
        assert why_not_writable(locked, directory=True) == "permission denied"
    finally:
        locked.chmod(0o755)


def test_a_directory_where_a_file_was_expected_is_no_file(tmp_path):
    """`os.fdopen` of a directory raised IsADirectoryError past the bounded reader: a build
    record replaced by a directory was a traceback, not a miss."""
    from annotune.core.files import open_regular, read_regular

    assert read_regular(tmp_path) is None
    assert open_regular(tmp_path) is None
