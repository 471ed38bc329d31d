"""A tuned header's provenance line: written into the comment, read back exactly, never able
to end the comment, and an older header without it read as having none."""

from __future__ import annotations

import dataclasses

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import render_defaults_header, render_header
from annotune.emit.provenance import (
    MARKER,
    CompilerMark,
    KnobMark,
    Provenance,
    provenance_line,
    read_provenance,
)

RECORD = Provenance(
    device="NVIDIA H100 */ #define WAY 9",
    date="2026-12-04",
    source="src/k.c",
    knobs=(KnobMark("WAY", "values(0, 1)", "0", "ab" * 32),),
    knobs_digest="cd" * 32,
    files={"src/k.c": "ef" * 32, "src/annotune_timing.h": None},
    compiler=CompilerMark("gcc", "/usr/bin/gcc-12", "01" * 32),
    params={"WAY": 1},
    speedup=1.5,
    interval=(1.25, 1.75),
    tool_version="0.1.0",
)


def test_the_record_reads_back_as_written():
    text = f"/*\n * {provenance_line(RECORD)}\n */\n"
    assert read_provenance(text, "k.h") == RECORD


def test_no_value_can_end_the_comment():
    line = provenance_line(RECORD)
    assert "*/" not in line and "\n" not in line and line.isascii()


def test_a_header_without_the_line_has_none(data_dir):
    problem = read_problem(data_dir / "check" / "work.c")
    assert read_provenance(render_defaults_header(problem), "k.h") is None
    tuned = render_header(problem, {"WAY": 1}, device="d", space_size=2, measurements=2,
                          default_time=2.0, best_time=1.0, tool_version="0.1.0")  # fmt: skip
    assert MARKER not in tuned and read_provenance(tuned, "k.h") is None


def test_a_tuned_header_holds_its_provenance(data_dir):
    problem = read_problem(data_dir / "check" / "work.c")
    text = render_header(problem, {"WAY": 1}, device="d", space_size=2, measurements=2,
                         default_time=2.0, best_time=1.0, tool_version="0.1.0",
                         provenance=RECORD)  # fmt: skip
    assert read_provenance(text, "k.h") == RECORD
    assert "#define WAY 1" in text


@pytest.mark.parametrize(
    "body",
    ['{"format": 1', '{"format": 2}', "[1]", '{"format": 1, "device": 3}'],
    ids=["cut short", "newer format", "not an object", "missing keys"],
)
def test_a_garbled_record_is_an_error_at_its_line(body):
    with pytest.raises(AnnotuneError) as raised:
        read_provenance(f"/*\n * {MARKER} {body}\n */\n", "k.h")
    assert raised.value.location.line == 2
    assert "provenance" in raised.value.message


def test_a_record_without_a_claim_reads_back():
    plain = dataclasses.replace(RECORD, speedup=None, interval=None, params={})
    assert read_provenance(f" * {provenance_line(plain)}\n", "k.h") == plain
