"""`annotune.build`: the header written, what it was written from, warnings through the
callback and in the record."""

from __future__ import annotations

import pytest

import annotune


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "k.c"
    path.write_text("#ifndef B\n#define B 8 // @tune values(4, 8, 16)\n#endif\nint x = B;\n")
    return path


def test_build_without_a_tuned_header_writes_the_defaults_and_says_so(source, tmp_path):
    told = []
    out = tmp_path / "build" / "k.h"
    built = annotune.build(source, output=out, device="gpu-x", on_warning=told.append)
    assert isinstance(built, annotune.Build)
    assert built.header is None and built.changed and built.device == "gpu-x"
    assert "#define B 8" in out.read_text()
    assert told and built.warnings == tuple(told) and "gpu-x" in told[0]
    again = annotune.build(source, output=out, device="gpu-x")
    assert not again.changed  # rewritten only when its content changes


def test_build_never_overwrites_its_source(source):
    before = source.read_bytes()
    with pytest.raises(annotune.AnnotuneError, match="is the source"):
        annotune.build(source, output=source)
    assert source.read_bytes() == before


def test_no_such_source(tmp_path):
    with pytest.raises(annotune.AnnotuneError, match="no such file"):
        annotune.build(tmp_path / "none.c", output=tmp_path / "k.h")
