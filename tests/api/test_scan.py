"""`annotune.scan`: the record `annotune scan --json` prints."""

from __future__ import annotations

import pytest

import annotune


def test_scan_returns_what_the_cli_prints(cli, tmp_path):
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 8 // @tune values(4, 8, 16)\n#endif\nint x = B;\n")
    found = annotune.scan(source)
    assert isinstance(found, annotune.Scan)
    assert [(p.name, p.default, p.values) for p in found.problem.params] == [("B", 8, (4, 8, 16))]
    assert found.space.legal == 3
    assert found.to_json() == cli.json("scan", source, "--json")


def test_a_mistake_is_located(tmp_path):
    source = tmp_path / "k.c"
    source.write_text("#define B 8 // @tune values(4, 8,\n")
    with pytest.raises(annotune.AnnotuneError) as raised:
        annotune.scan(source)
    assert raised.value.location is not None and raised.value.location.line == 1
