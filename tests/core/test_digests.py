"""One digest for every stage (`core.digests`): SHA-256 hex, None for no regular file."""

from __future__ import annotations

import hashlib
import os

from annotune.core.digests import bytes_digest, file_digest, regular_file_digest, text_digest


def test_a_file_digest_is_the_sha256_of_its_bytes(tmp_path):
    path = tmp_path / "a.h"
    path.write_bytes(b"#define A 1\n")
    assert file_digest(path) == hashlib.sha256(b"#define A 1\n").hexdigest()
    assert file_digest(path) == bytes_digest(path.read_bytes()) == text_digest("#define A 1\n")
    digest, status = regular_file_digest(path)
    assert digest.hex() == file_digest(path) and status.st_size == 12


def test_no_regular_file_is_none_and_a_fifo_is_never_waited_on(tmp_path):
    fifo = tmp_path / "h.h"
    os.mkfifo(fifo)
    assert file_digest(fifo) is None  # would block forever if opened for reading plainly
    assert file_digest(tmp_path / "missing.h") is None
    assert file_digest(tmp_path) is None
    assert file_digest("bad\0name") is None


def test_a_bound_makes_a_larger_file_no_digest(tmp_path):
    path = tmp_path / "big.c"
    path.write_bytes(b"x" * 100)
    assert file_digest(path, max_bytes=99) is None
    assert file_digest(path, max_bytes=100) is not None
