"""`annotune lift`: a diff without --write, the rewrite with it, JSON, and located errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def stencil(data_dir, tmp_path) -> Path:
    shutil.copytree(data_dir / "stencil", tmp_path / "stencil")
    return tmp_path / "stencil" / "stencil.cu"


def _contents(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_without_write_prints_the_diff_and_touches_nothing(cli, stencil):
    before = _contents(stencil.parent)
    result = cli("lift", stencil)
    assert result.exit_code == 0, result.stderr
    assert _contents(stencil.parent) == before
    diff = result.stdout
    assert f"--- a/{stencil}\n+++ b/{stencil}\n" in diff
    assert f"--- a/{stencil.with_suffix('.cuh')}\n" in diff
    assert "-#pragma unroll 3 // @tune(UNROLL) values(1, 3)\n" in diff
    assert (
        "+#define UNROLL 3 // @tune values(1, 3)\n+#endif\n+ANNOTUNE_PRAGMA(unroll UNROLL)\n"
        in diff
    )
    assert "+#ifndef BLOCK_Y\n #define BLOCK_Y 4" in diff
    assert "rerun with --write" in result.stderr


def test_write_applies_the_diff_and_a_second_run_has_nothing_to_do(cli, stencil):
    shown = cli("lift", stencil).stdout
    result = cli("lift", stencil, "--write")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == shown
    assert "ANNOTUNE_PRAGMA(unroll UNROLL)" in stencil.read_text()
    assert "wrote" in result.stderr

    again = cli("lift", stencil, "--write")
    assert again.exit_code == 0, again.stderr
    assert again.stdout == ""
    assert "nothing to lift" in again.stderr
    params = {p["name"]: p for p in cli.json("scan", stencil, "--json")["params"]}
    assert {name: p["guarded"] for name, p in params.items()} == {
        "BLOCK_X": True,
        "BLOCK_Y": True,
        "UNROLL": True,
    }
    assert params["UNROLL"]["origin"] == "define"


def test_json_lists_files_and_lifted_tunables(cli, stencil):
    report = cli.json("lift", stencil, "--json")
    assert report == {
        "files": [
            {"file": str(stencil), "changed": True},
            {"file": str(stencil.with_suffix(".cuh")), "changed": True},
        ],
        "lifted": [
            {"name": "BLOCK_Y", "action": "guarded"},
            {"name": "UNROLL", "action": "literal"},
        ],
    }
    cli("lift", stencil, "--write")
    after = cli.json("lift", stencil, "--json")
    assert after["lifted"] == []
    assert {f["changed"] for f in after["files"]} == {False}


def test_a_missing_file_is_a_located_error(cli, tmp_path):
    missing = tmp_path / "nope.cu"
    result = cli("lift", missing, "--write")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{missing}:1:1: error: no such file")
    assert result.stdout == ""


def test_an_annotation_mistake_is_a_located_error_and_nothing_is_written(cli, tmp_path):
    source = tmp_path / "k.cu"
    text = "#define B 3 // @tune values(4, 8)\n"
    source.write_text(text)
    result = cli("lift", source, "--write")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{source}:1:11: error: default value 3")
    assert source.read_text() == text
