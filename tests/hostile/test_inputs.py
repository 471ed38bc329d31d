"""Hostile input, table-driven: every bad file is a clear error with exit code 2 (or a clean
run where the input is fine), never an internal error, a traceback or a hang.

Each case builds its files in a fresh directory (the current one while it runs, with HOME
inside it) and gives the command's arguments. The command runs in-process on a daemon thread:
one that would hang fails its case after `HANG_SECONDS` instead of stalling the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from annotune.annotate.source import bounded
from annotune.core import inputs
from annotune.core.inputs import InputKind

HANG_SECONDS = 30
OK = "#define A 3 // @tune values(1, 3)\nint x = A;\n"
PLAIN = "#define N 4\nint a[N];\n"  # no annotation: tunable only through a config
NAMING = '[[file]]\npath = "{path}"\n[file.params]\nN = "values(2, 4)"\n'


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Path, pytest.MonkeyPatch], list[str]]  # builds files, returns the args
    code: int
    expect: str  # in stderr (or in stdout, for a clean run)


def write(path: str, data: str | bytes) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        Path(path).write_bytes(data)
    else:
        Path(path).write_text(data, encoding="utf-8")
    return path


def sparse(path: str, size: int) -> str:
    with open(path, "wb") as file:
        file.truncate(size)  # no byte written, and none read by annotune
    return path


def fifo(path: str) -> str:
    os.mkfifo(path)
    return path


def socket_file(path: str) -> str:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.close()  # the socket's inode stays
    return path


def link(path: str, target: str) -> str:
    os.symlink(target, path)
    return path


def unreadable(path: str) -> str:
    if os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000 anyway: nothing to refuse")
    os.chmod(path, 0)
    return path


def scan(*args: str) -> list[str]:
    return ["scan", *args]


def including(header: str, make: Callable[[str], object] = str, body: str = OK) -> list[str]:
    """Scan a source that includes `header`, made by `make` first."""
    make(header)
    return scan(write("k.c", f'#include "{header}"\n{body}'))


def with_config(config: str | bytes, source: str = PLAIN) -> list[str]:
    write("k.c", source)
    write("annotune.toml", config)
    return scan("k.c")


def below(pyproject: str | bytes, source: str = OK) -> list[str]:
    """Scan a source two directories below a pyproject.toml."""
    write("a/pyproject.toml", pyproject)
    return scan(write("a/b/k.c", source))


def planted(repo_marker: Callable[[], object]) -> list[str]:
    """A config above a boundary, naming a source below it: not used."""
    write("shared/annotune.toml", NAMING.format(path="repo/src/k.c"))
    args = scan(write("shared/repo/src/k.c", PLAIN))
    repo_marker()
    return args


def writable(*args: str) -> list[str]:
    """A config anyone may write, found (refused) or named with `args` (used)."""
    os.chmod(write("annotune.toml", NAMING.format(path="k.c")), 0o666)
    return scan(*args, write("k.c", PLAIN))


def other_owner(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    args = with_config(NAMING.format(path="k.c"))
    if os.geteuid() == 0:
        os.chown("annotune.toml", 4242, -1)
    else:  # a file of ours, seen by another user
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    return args


def results_limit(monkeypatch: pytest.MonkeyPatch, data: bytes) -> list[str]:
    monkeypatch.setattr(inputs, "RESULTS", InputKind("results file", 1 << 20))
    return ["explain", write("bomb.json.gz", data)]


def bomb(monkeypatch: pytest.MonkeyPatch, memory: int, seconds: int) -> list[str]:
    """A source whose one macro use expands to 2**40 tokens, parsed under small limits (so that
    the test itself can never take the machine's memory)."""
    monkeypatch.setattr(bounded, "PARSE_MEMORY", memory)
    monkeypatch.setattr(bounded, "PARSE_SECONDS", seconds)
    levels = "".join(f"#define L{i} L{i - 1} L{i - 1}\n" for i in range(1, 41))
    return scan(write("k.c", "#define L0 x\n" + levels + OK + "int f(void) { L40; }\n"))


NOT_UTF8 = os.fsdecode(b"k\xff.c")  # a name Linux allows: its bytes are not UTF-8


def including_bytes(make: Callable[[str], object], body: bytes) -> list[str]:
    """Scan a source that includes `h\xfe.h` (a name whose bytes are not UTF-8), made by
    `make` first."""
    make(os.fsdecode(b"h\xfe.h"))
    return scan(write("k.c", b'#include "h\xfe.h"\n' + body))


def config_then_source(make: Callable[[], object]) -> list[str]:
    make()
    return scan(write("k.c", OK))


CASES = [
    # --- special files and unreadable sources ------------------------------------------------
    Case("source-fifo", lambda t, m: scan(fifo("k.c")), 2, "k.c:1:1: error: is a FIFO"),
    Case("source-dev-zero", lambda t, m: scan("/dev/zero"), 2, "is a character device"),
    Case("source-directory", lambda t, m: scan(str(t)), 2, "is a directory, not a regular"),
    Case("source-socket", lambda t, m: scan(socket_file("k.c")), 2, "is a socket"),
    Case("source-link-loop", lambda t, m: scan(link("k.c", "k.c")), 2, "levels of symbolic"),
    Case("source-dangling-link", lambda t, m: scan(link("k.c", "gone.c")), 2, "no such file"),
    Case("source-link-to-fifo", lambda t, m: scan(link("k.c", fifo("p"))), 2, "is a FIFO"),
    Case("source-missing", lambda t, m: scan("nowhere.c"), 2, "nowhere.c:1:1: error: no such"),
    Case("source-mode-000", lambda t, m: scan(unreadable(write("k.c", OK))), 2, "denied"),
    Case("source-oversized", lambda t, m: scan(sparse("k.c", (64 << 20) + 1)), 2, "too large"),
    Case(
        "header-fifo",
        lambda t, m: including("h.h", fifo),
        2,
        "k.c:1:11: error: header 'h.h' is a FIFO",
    ),
    Case(
        "header-dev-zero",
        lambda t, m: including("/dev/zero"),
        2,
        "header '/dev/zero' is a character device",
    ),
    Case(
        "header-oversized",
        lambda t, m: including("h.h", lambda h: sparse(h, 65 << 20)),
        2,
        "header 'h.h' is too large for a source file",
    ),
    Case(
        "header-link-loop",  # clang cannot open it: a missing header, reported, not fatal
        lambda t, m: including("h.h", lambda h: link(h, h)),
        0,
        "local header 'h.h' not found",
    ),
    # --- special files as configs ----------------------------------------------------------
    Case(
        "config-fifo",
        lambda t, m: scan("--config", fifo("c.toml"), write("k.c", OK)),
        2,
        "c.toml:1:1: error: is a FIFO",
    ),
    Case(
        "config-dev-zero",
        lambda t, m: scan("--config", "/dev/zero", write("k.c", OK)),
        2,
        "/dev/zero:1:1: error: is a character device",
    ),
    Case(
        "config-directory",
        lambda t, m: scan("--config", ".", write("k.c", OK)),
        2,
        "is a directory",
    ),
    Case(
        "config-oversized",
        lambda t, m: scan("--config", sparse("c.toml", (1 << 20) + 1), write("k.c", OK)),
        2,
        "too large for a config file: 1,048,577 bytes",
    ),
    Case(
        "config-missing",
        lambda t, m: scan("--config", "no.toml", write("k.c", OK)),
        2,
        "no.toml:1:1: error: no such file",
    ),
    Case(
        "config-mode-000",
        lambda t, m: scan("--config", unreadable(write("c.toml", "")), write("k.c", OK)),
        2,
        "denied",
    ),
    Case(
        "found-config-fifo",
        lambda t, m: config_then_source(lambda: fifo("annotune.toml")),
        2,
        "annotune.toml:1:1: error: is a FIFO",
    ),
    Case(
        "found-config-directory",
        lambda t, m: config_then_source(lambda: os.mkdir("annotune.toml")),
        2,
        "annotune.toml:1:1: error: is a directory",
    ),
    # --- results files: --transfer-from, explain --------------------------------------------
    Case(
        "transfer-from-fifo",
        lambda t, m: ["tune", "--transfer-from", fifo("r.json"), write("k.c", OK)],
        2,
        "r.json:1:1: error: is a FIFO",
    ),
    Case(
        "transfer-from-dev-zero",
        lambda t, m: ["tune", "--transfer-from", "/dev/zero", write("k.c", OK)],
        2,
        "is a character device",
    ),
    Case("explain-fifo", lambda t, m: ["explain", fifo("r.json")], 2, "is a FIFO"),
    Case(
        "results-oversized",
        lambda t, m: ["explain", sparse("r.json", (1 << 30) + 1)],
        2,
        "too large for a results file",
    ),
    Case(
        "results-gzip-bomb",
        lambda t, m: results_limit(m, gzip.compress(b" " * (3 << 20))),
        2,
        "too large for a results file: more than 1 MiB",
    ),
    Case(
        "results-broken-gzip",
        lambda t, m: ["explain", write("r.json.gz", gzip.compress(b"{}")[:-6])],
        2,
        "not a readable gzip file",
    ),
    Case(
        "results-invalid-utf8",
        lambda t, m: ["explain", write("r.json", b'{"device_name": "\xff"}')],
        2,
        "r.json:1:18: error: invalid UTF-8 byte 0xff",
    ),
    Case(
        "results-deep-nesting",
        lambda t, m: ["explain", write("r.json", "[" * 100_000 + "]" * 100_000)],
        2,
        "nested too deeply",
    ),
    # --- encodings and odd bytes in sources: what the compiler takes, annotune takes -------
    Case("source-0xff", lambda t, m: scan(write("k.c", b"int \xff;\n" + OK.encode())), 0, "A"),
    Case("source-latin1", lambda t, m: scan(write("k.c", b"/* \xe9 */\n" + OK.encode())), 0, "A"),
    Case("source-bom", lambda t, m: scan(write("k.c", "\ufeff" + OK)), 0, "values(1, 3)"),
    Case("source-nul", lambda t, m: scan(write("k.c", "/* \0 */\n" + OK)), 0, "values(1, 3)"),
    Case("source-crlf", lambda t, m: scan(write("k.c", OK.replace("\n", "\r\n"))), 0, "A"),
    Case(
        "source-long-line",
        lambda t, m: scan(write("k.c", 'const char *s = "' + "x" * 2_000_000 + '";\n' + OK)),
        0,
        "values(1, 3)",
    ),
    Case(
        "source-long-line-error",  # the line shown is cut around the column
        lambda t, m: scan(write("k.c", "/*" + "x" * 100_000 + "*/ // @tune bool\n")),
        2,
        "k.c:1:100009: error: @tune must be on (or on the line just above) a #define or #pragma"
        " line\n..." + "x" * 100,
    ),
    Case(
        "source-cjk-column",
        lambda t, m: scan(write("k.c", "/* 日本 */ #define A 3 // @tune values(1 2)\n")),
        2,
        "k.c:1:25: error: @tune must be on",
    ),
    Case(
        "source-terminal-escapes",
        lambda t, m: scan(write("k.c", "/* \x1b[2J */ #define A 1 // @tune bool\n")),
        2,
        "\n/* \ufffd[2J */",
    ),
    Case(
        "header-latin1",
        lambda t, m: including("h.h", lambda h: write(h, b"/* \xe9 */\n" + OK.encode()), ""),
        0,
        "h.h:2",
    ),
    # --- file names ------------------------------------------------------------------------
    Case("name-dash", lambda t, m: scan("--", write("-x.c", OK)), 0, "values(1, 3)"),
    Case("name-spaces", lambda t, m: scan(write("my kernel.c", OK)), 0, "values(1, 3)"),
    Case("name-unicode", lambda t, m: scan(write("ядро 日本.c", OK)), 0, "values(1, 3)"),
    Case("name-not-utf8", lambda t, m: scan(write(NOT_UTF8, OK)), 0, "k\\xff.c:1"),
    Case(
        "name-not-utf8-json",
        lambda t, m: scan("--json", write(NOT_UTF8, OK)),
        0,
        '"file": "k\\\\xff.c"',
    ),
    Case(
        "name-not-utf8-error",
        lambda t, m: scan(write(NOT_UTF8, "#define A 3 // @tune values(1 2)\n")),
        2,
        "k\\xff.c:1:31: error: expected ',' or ')', found '2'",
    ),
    Case(
        "header-name-not-utf8",
        lambda t, m: including_bytes(lambda h: write(h, OK), b""),
        0,
        "h\\xfe.h:1",
    ),
    Case(
        "header-name-not-utf8-missing",
        lambda t, m: including_bytes(str, OK.encode()),
        0,
        "local header 'h\\xfe.h' not found",
    ),
    # --- parser bombs: libclang parses under a memory and a time limit ---------------------
    Case(
        "parser-bomb-memory",
        lambda t, m: bomb(m, 128 << 20, 20),  # reached in half the time of 256 MiB
        2,
        "k.c:1:1: error: libclang ran out of memory or failed parsing this file (its limit: "
        "0.125 GiB more",
    ),
    Case(
        "parser-bomb-time",
        lambda t, m: bomb(m, 2 << 30, 1),
        2,
        "k.c:1:1: error: libclang took more than 1 s of CPU time parsing this file",
    ),
    # --- config contents -------------------------------------------------------------------
    Case(
        "config-invalid-utf8",
        lambda t, m: with_config(b'[[file]]\npath = "k.c"\n# caf\xe9\n'),
        2,
        "annotune.toml:3:6: error: invalid UTF-8 byte 0xe9",
    ),
    Case(
        "ancestor-pyproject-invalid-utf8",
        lambda t, m: below(b"# \xff\n"),
        2,
        "a/pyproject.toml:1:3: error: invalid UTF-8 byte 0xff",
    ),
    Case(
        "ancestor-pyproject-invalid-toml",
        lambda t, m: below("[x\n"),
        2,
        "a/pyproject.toml:1:3: error: invalid TOML",
    ),
    Case("config-bom", lambda t, m: with_config("\ufeff" + NAMING.format(path="k.c")), 0, "N"),
    Case(
        "config-crlf",
        lambda t, m: with_config(NAMING.format(path="k.c").replace("\n", "\r\n")),
        0,
        "values(2, 4)",
    ),
    Case(
        "config-raw-nul",
        lambda t, m: with_config('[[file]]\npath = "k\0.c"\n'),
        2,
        "annotune.toml:2:10: error: invalid TOML",
    ),
    Case(
        "config-nul-escape",
        lambda t, m: with_config('[[file]]\npath = "k.c"\nargs = ["\\u0000"]\n'),
        2,
        "annotune.toml:3:10: error: a string cannot hold a NUL character",
    ),
    Case(
        "config-deep-nesting",
        lambda t, m: with_config("x = " + "[" * 5000 + "]" * 5000 + "\n"),
        2,
        "nested too deeply",
    ),
    Case(
        "config-infinite-number",
        lambda t, m: with_config('[[file]]\npath = "k.c"\nrepeats = inf\n'),
        2,
        "annotune.toml:3:11: error: 'repeats' must be a finite number",
    ),
    Case(
        "config-repeats-zero",
        lambda t, m: with_config('[[file]]\npath = "k.c"\nrepeats = 0\n'),
        2,
        "annotune.toml:3:11: error: 'repeats' must be at least 1",
    ),
    Case(
        "config-long-line",
        lambda t, m: with_config('args = ["' + "y" * 900_000 + '"]\n' + NAMING.format(path="k.c")),
        2,
        "annotune.toml:1:1: error: unknown key 'args' in annotune.toml (expected: file, gpu)",
    ),
    Case(
        "unknown-top-table",
        lambda t, m: with_config('[fille]\npath = "k.c"\n'),
        2,
        "annotune.toml:1:2: error: unknown key 'fille' in annotune.toml (did you mean 'file'?)",
    ),
    Case(
        "unknown-tool-key",
        lambda t, m: below("[tool.annotune]\nfiles = 3\n"),
        2,
        "pyproject.toml:2:1: error: unknown key 'files' in [tool.annotune] (did you mean 'file'?)",
    ),
    Case(
        "unknown-file-key",
        lambda t, m: with_config('[[file]]\npath = "k.c"\ncompiel = "gcc"\n'),
        2,
        "annotune.toml:3:1: error: unknown key 'compiel' in [[file]] (did you mean 'compile'?)",
    ),
    Case(
        "unknown-param-key",
        lambda t, m: with_config(
            '[[file]]\npath = "k.c"\n[file.params.N]\ndomain = "bool"\ndeflt = 1\n'
        ),
        2,
        "annotune.toml:5:1: error: unknown key 'deflt' in parameter N (did you mean 'default'?)",
    ),
    # --- where configs are looked for, and whose are trusted ---------------------------------
    Case(
        "planted-above-git-dir",
        lambda t, m: planted(lambda: os.mkdir("shared/repo/.git")),
        2,
        "no tunable parameters found",
    ),
    Case(
        "planted-above-git-file",  # a worktree's
        lambda t, m: planted(lambda: write("shared/repo/.git", "gitdir: elsewhere\n")),
        2,
        "no tunable parameters found",
    ),
    Case(
        "planted-above-home",
        lambda t, m: planted(lambda: m.setenv("HOME", str(t / "shared" / "repo"))),
        2,
        "no tunable parameters found",
    ),
    Case("config-world-writable", lambda t, m: writable(), 2, "writable by every user (mode 666)"),
    Case(
        "config-world-writable-named",  # --config: the user chose it
        lambda t, m: writable("--config", "annotune.toml"),
        0,
        "values(2, 4)",
    ),
    Case("config-other-owner", lambda t, m: other_owner(m), 2, "to use it anyway"),
]


def invoke(cli, args: list[str]):
    """`cli(*args)` on a daemon thread: a hang fails the case instead of stalling the suite."""
    done = []
    worker = threading.Thread(target=lambda: done.append(cli(*args)), daemon=True)
    worker.start()
    worker.join(HANG_SECONDS)
    if worker.is_alive():
        pytest.fail(f"annotune {' '.join(args)} still runs after {HANG_SECONDS} s")
    return done[0]


def test_the_table_is_large_and_its_names_unique():
    assert len(CASES) >= 45 and len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input(case, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    args = case.setup(tmp_path, monkeypatch)
    result = invoke(cli, args)
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr) < 4000  # a long line is shown cut, never whole
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == case.code, result.stderr[-2000:]
    assert case.expect in (result.stderr if case.code else result.stdout + result.stderr)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_a_tune_of_a_source_whose_name_is_not_utf8(cli, tmp_path, monkeypatch):
    """The name's odd bytes are escaped wherever it is shown or stored: the JSON report, the
    header's name and comment, the database; the files themselves keep their bytes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(os.fsdecode(b"h\xfe.h"), "#define A 3 // @tune values(1, 3)\n")
    source = write(
        os.fsdecode(b"t\xfd.c"),
        b'#include "h\xfe.h"\n#include <stdio.h>\nint main(void) { printf("%d\\n", A); }\n',
    )
    args = ["tune", source, "--json", "--budget", "2", "--recheck", "0", "--repeats", "1"]
    result = invoke(cli, [*args, "--max-repeats", "1", "--warmup", "0"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["header"].endswith("t\\xfd.h")
    header = next((tmp_path / "tuned").rglob("*.h"))
    assert os.fsencode(header.name) == b"t\xfd.h"  # the file: the source's bytes
    assert "Tuned parameters of t\\xfd.c for" in header.read_text(encoding="utf-8")
    with sqlite3.connect(tmp_path / ".annotune" / "results.db") as conn:
        assert conn.execute("SELECT source FROM studies").fetchall() == [("t\\xfd.c",)]
    conn.close()
