"""The front end on hostile sources: character columns, headers clang would hang on, odd names."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from annotune.annotate import read_problem, read_problem_and_source
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError


def error_at(source: Path) -> tuple[int, int, str]:
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    where = caught.value.location
    assert where.file == str(source)
    return where.line, where.column, caught.value.message


@pytest.mark.parametrize(
    ("data", "where"),
    [
        # A grammar error after two CJK characters and an é: columns count characters.
        (b"#define A 3 /* " + "日本é".encode() + b" */ // @tune values(1 2)\n", (1, 41)),
        # A truncated character (two bytes of 日) is one column, as the caret's line shows it.
        (b"#define A 3 /* \xe6\x97 */ // @tune values(1 2)\n", (1, 39)),
        # A byte order mark is no column.
        (b"\xef\xbb\xbf#define A 3 // @tune values(1 2)\n", (1, 31)),
    ],
)
def test_errors_are_located_at_character_columns(tmp_path, data, where):
    source = tmp_path / "k.c"
    source.write_bytes(data)
    assert error_at(source)[:2] == where


def test_locations_and_offsets_are_inverses_in_a_non_ascii_file(tmp_path):
    source = tmp_path / "k.c"
    source.write_bytes("/* é 日本 ".encode() + b"\xff */ int ab = 1; int cd = ab;\n")
    main = parse_source(source).main
    identifiers = [t for t in main.tokens if t.kind == "identifier"]
    columns = [main.location(t.start).column for t in identifiers]
    assert columns == [18, 30, 35]
    assert [main.offset(main.location(t.start)) for t in identifiers] == [
        t.start for t in identifiers
    ]


def test_a_missing_header_is_located_in_characters(tmp_path):
    source = tmp_path / "k.c"
    source.write_text('/* é */ #include "gone.h"\n#define A 1 // @tune bool\nint x = A;\n')
    ((where, name),) = read_problem(source).missing_includes
    assert (name, where.line, where.column) == ("gone.h", 1, 9)


def test_a_byte_order_mark_does_not_hide_the_first_directive(tmp_path):
    source = tmp_path / "k.c"
    source.write_bytes(b"\xef\xbb\xbf#define A 3 // @tune values(1, 3)\nint x = A;\n")
    (a,) = read_problem(source).params
    assert (a.name, a.default, a.location.column) == ("A", 3, 9)


@pytest.mark.parametrize("header", ["fifo.h", "/dev/zero"])
def test_a_header_clang_would_hang_on_is_refused_before_parsing(tmp_path, header):
    if header == "fifo.h":
        os.mkfifo(tmp_path / header)
    source = tmp_path / "k.c"
    source.write_text(f'#define A 1 // @tune bool\n  # include "{header}"\n')
    line, column, message = error_at(source)
    assert (line, column) == (2, 14)
    assert message.startswith(f"header '{header}' is a ") and "not a regular file" in message


def test_a_header_through_another_header_is_checked_too(tmp_path):
    """`deep.h` is looked up as clang does: the directory of that name is passed over."""
    for folder in ("dirs", "inc"):
        (tmp_path / folder).mkdir()
    (tmp_path / "dirs" / "deep.h").mkdir()
    os.mkfifo(tmp_path / "inc" / "deep.h")
    (tmp_path / "inc" / "top.h").write_text("#include <deep.h>\n")
    source = tmp_path / "k.c"
    source.write_text('#include "inc/top.h"\n#define A 1 // @tune bool\n')
    search = [str(tmp_path / "dirs"), str(tmp_path / "inc")]
    with pytest.raises(AnnotuneError, match="'deep.h' is a FIFO") as caught:
        parse_source(source, include_dirs=search)
    assert caught.value.location.file == str(tmp_path / "inc" / "top.h")


def test_a_source_named_like_an_option_is_parsed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("-x.c").write_text("#define A 3 // @tune values(1, 3)\nint y = A;\n")
    problem, parsed = read_problem_and_source(Path("-x.c"))
    assert [p.name for p in problem.params] == ["A"]
    assert parsed.main.path == "-x.c"


def test_libclang_parses_in_a_child_whose_bug_is_reported_with_its_traceback(tmp_path, monkeypatch):
    """The parse runs in a forked child (a parser bomb ends it, not annotune): the child's
    located errors come back as they were, and a bug in it as its traceback, not a silent
    death; the parent's own state is untouched by the child."""
    from annotune.annotate.source import parse

    source = tmp_path / "k.c"
    source.write_text('#include "gone.h"\nint f(void) { return 1; }\n')
    parsed = parse_source(source)
    assert [f.name for f in parsed.functions] == ["f"]
    assert parsed.missing_local_includes[0][0].line == 1
    parents = os.getpid()

    def broken(tu, display):
        assert os.getpid() != parents  # runs in the child
        raise ValueError("a bug in the front end")

    monkeypatch.setattr(parse, "_functions", broken)
    with pytest.raises(RuntimeError, match=r"(?s)the parser failed:.*ValueError: a bug in the"):
        parse_source(source)


def test_where_a_fork_is_unsafe_a_fresh_interpreter_parses(tmp_path, monkeypatch):
    """Under Ray, gRPC's fork handlers abort a forked child (every parse then failed as
    "out of memory or crashed"): with gRPC loaded, the parser is a spawned interpreter, with
    the same results and the same located errors."""
    import sys
    import types

    from annotune.annotate.source import bounded

    assert not bounded._fork_unsafe()
    monkeypatch.setitem(sys.modules, "grpc", types.ModuleType("grpc"))
    assert bounded._fork_unsafe()
    source = tmp_path / "k.c"
    source.write_text(
        '#include "gone.h"\n#define A 3 // @tune values(1, 3)\nint f(void) { return A; }\n'
    )
    parsed = parse_source(source)
    assert [f.name for f in parsed.functions] == ["f"]
    assert parsed.missing_local_includes[0][0].line == 1
    problem, _ = read_problem_and_source(source)
    assert problem.param("A").default == 3


def _scan_under(address_space: int, source: Path) -> subprocess.CompletedProcess:
    """`annotune scan source` in a process that inherits an address-space limit, as a login
    node's or a batch job's `ulimit -v` gives it."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run(
        [sys.executable, "-m", "annotune", "scan", str(source)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
        timeout=120,
    )


def test_a_source_parses_under_a_4_gib_address_space_limit(tmp_path):
    """The parser's child once asked for more than the limit it inherited, failed, and blamed
    the source."""
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 4 // @tune values(1, 2, 4)\n#endif\nint b = B;\n")
    done = _scan_under(4 << 30, source)
    assert done.returncode == 0, done.stderr
    assert "1 tunable parameters" in done.stdout


def _under(address_space: int, *args: str) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    command = [sys.executable, "-m", "annotune", *args]
    return subprocess.run(
        command, capture_output=True, text=True, preexec_fn=limit, check=False, timeout=120
    )


def test_a_limit_too_small_for_any_work_is_the_machines_never_a_bug(tmp_path):
    """Far below what annotune needs: libclang's library cannot be mapped, a tune's numeric
    stack not loaded (OpenBLAS's start spun without end at 250 MiB). Each is said as the
    limit, exit 1 or 2, never 'internal error', never a hang."""
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 4 // @tune values(1, 2, 4)\n#endif\nint b = B;\n")
    done = _under(120 << 20, "scan", str(source))  # OpenBLAS stopped it with its own line
    assert done.returncode == 1 and "needs an address space of at least 256 MiB" in done.stderr
    done = _under(260 << 20, "scan", str(source))  # enough for scan
    assert done.returncode == 0, done.stderr
    done = _under(250 << 20, "tune", str(source), "--budget", "2")  # OpenBLAS spun
    assert done.returncode == 1 and "needs an address space of at least 512 MiB" in done.stderr


def test_running_out_under_an_inherited_limit_says_whose_limit_it_is(tmp_path):
    levels = "".join(f"#define L{i} L{i - 1} L{i - 1}\n" for i in range(1, 41))
    source = tmp_path / "k.c"
    source.write_text("#define L0 x\n" + levels + "int f(void) { L40; }\n")
    done = _scan_under(900 << 20, source)
    assert done.returncode == 2, done.stderr
    assert "under the address-space limit annotune inherited (0.879 GiB" in done.stderr
    assert "ulimit -v" in done.stderr
    assert "Traceback" not in done.stderr
