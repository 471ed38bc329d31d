"""Generated headers: deterministic text that the C preprocessor reads as intended, and
writes that leave an unchanged file alone."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import (
    check_headers_writable,
    render_defaults_header,
    render_header,
    slugify,
    tuned_header_path,
    write_if_changed,
)

TUNED = {"BLOCK_X": 64, "BLOCK_Y": 8, "UNROLL": 1}


@pytest.fixture(scope="module")
def problem():
    return read_problem(Path(__file__).parents[1] / "data" / "stencil" / "stencil.cu")


def tuned(problem, **overrides) -> str:
    arguments = dict(
        device="NVIDIA A100-PCIE-40GB",
        space_size=42,
        measurements=17,
        default_time=2.5,
        best_time=1.25,
        tool_version="9.9.9",
    )
    return render_header(problem, TUNED, **{**arguments, **overrides})


def macros(header: Path, *defines: str) -> dict[str, str]:
    """What the C preprocessor defines after force-including `header`."""
    out = subprocess.run(
        ["cpp", "-dM", "-include", str(header), *defines, "/dev/null"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        parts[1]: parts[2] if len(parts) > 2 else ""
        for parts in (line.split(None, 2) for line in out.splitlines())
    }


def test_header_states_how_it_was_found(problem):
    text = tuned(problem)
    assert text == tuned(problem)  # deterministic: no timestamps
    for expected in (
        "annotune 9.9.9",
        "stencil.cu",
        "NVIDIA A100-PCIE-40GB",
        "42 configurations",
        "measurements:  17",
        "default time:  2.5 ms",
        "best time:     1.25 ms\n",
    ):
        assert expected in text
    assert "x the default" not in text and "speedup" not in text  # never from search times
    checked = tuned(problem, speedup="1.31x the default (95% interval 1.22-1.40)")
    assert "speedup:       1.31x the default (95% interval 1.22-1.40)" in checked
    assert str(problem.source.parent) not in text  # no machine-specific paths
    assert "predicted" in tuned(problem, predicted=True)
    assert "not measured" in tuned(problem, default_time=None, best_time=None)


def test_every_parameter_is_an_overridable_define(problem, tmp_path):
    if shutil.which("cpp") is None:
        pytest.skip("no C preprocessor")
    header = tmp_path / "stencil.h"
    header.write_text(tuned(problem, device="evil */ #define BLOCK_X 1 /*"))
    assert {name: macros(header)[name] for name in TUNED} == {
        "BLOCK_X": "64",
        "BLOCK_Y": "8",
        "UNROLL": "1",
    }
    assert macros(header, "-DBLOCK_X=7")["BLOCK_X"] == "7"
    assert "ANNOTUNE_TUNED_STENCIL_H" in macros(header)


def test_defaults_header_holds_the_source_defaults(problem, tmp_path):
    if shutil.which("cpp") is None:
        pytest.skip("no C preprocessor")
    header = tmp_path / "stencil.h"
    header.write_text(render_defaults_header(problem, device="cpu-x"))
    assert "no tuned header exists for cpu-x" in header.read_text()
    assert {name: macros(header)[name] for name in TUNED} == {
        "BLOCK_X": "32",
        "BLOCK_Y": "4",
        "UNROLL": "3",
    }


def test_values_are_c_literals(problem):
    text = render_header(
        problem,
        {"BLOCK_X": -4, "BLOCK_Y": 0.5, "UNROLL": 3.0},
        device="d",
        space_size=None,
        measurements=0,
        default_time=None,
        best_time=None,
        tool_version="1",
    )
    assert "#define BLOCK_X (-4) " in text
    assert "#define BLOCK_Y 0.5 " in text
    assert "#define UNROLL 3 " in text


def test_params_must_name_exactly_the_parameters(problem):
    with pytest.raises(ValueError, match=r"missing \['UNROLL'\], extra \['OTHER'\]"):
        render_header(
            problem,
            {"BLOCK_X": 64, "BLOCK_Y": 8, "OTHER": 1},
            device="d",
            space_size=1,
            measurements=1,
            default_time=1.0,
            best_time=1.0,
            tool_version="1",
        )


def test_tuned_header_path_uses_the_device_slug():
    source = Path("src/gemm.cu")
    assert tuned_header_path(source, "NVIDIA A100-PCIE-40GB") == Path(
        "src/tuned/nvidia-a100-pcie-40gb/gemm.h"
    )
    assert tuned_header_path(source, "cpu-x", Path("out")) == Path("out/cpu-x/gemm.h")


def test_write_if_changed_leaves_an_unchanged_file_alone(tmp_path):
    path = tmp_path / "new" / "dir" / "gemm.h"
    assert write_if_changed(path, "#define A 1\r\n")
    assert path.read_bytes() == b"#define A 1\r\n"  # newlines exactly as given
    before = os.stat(path)
    assert not write_if_changed(path, "#define A 1\r\n")
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)

    assert write_if_changed(path, "#define A 2\n")
    assert path.read_text() == "#define A 2\n"
    assert os.stat(path).st_ino != before.st_ino  # replaced by rename, not rewritten in place
    assert os.listdir(path.parent) == ["gemm.h"]  # no temporary file left behind


def test_written_files_get_ordinary_permissions(tmp_path):
    path = tmp_path / "gemm.h"
    old = os.umask(0o022)
    try:
        write_if_changed(path, "x\n")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    path.chmod(0o664)
    write_if_changed(path, "y\n")
    assert path.stat().st_mode & 0o777 == 0o664  # a replaced file keeps its mode


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_device_is_a_user_error_and_is_never_read():
    """/dev/full reads endless zeros: comparing by reading it once took all memory."""
    with pytest.raises(AnnotuneError, match="cannot write /dev/full: No space left on device"):
        write_if_changed(Path("/dev/full"), "#define A 1\n")
    assert write_if_changed(Path("/dev/zero"), "#define A 1\n")  # endless too; takes anything


def test_an_unwritable_header_path_is_a_user_error(tmp_path):
    (tmp_path / "file.h").write_text("x")
    reason = r"cannot write .*file\.h/gemm\.h: .*file\.h is not a directory"
    with pytest.raises(AnnotuneError, match=reason):
        write_if_changed(tmp_path / "file.h" / "gemm.h", "x\n")


def test_the_headers_directory_is_checked_before_any_work(tmp_path):
    source = tmp_path / "k.c"
    check_headers_writable(source, None)  # tuned/ can be made
    (tmp_path / "tuned").write_text("not a directory")
    with pytest.raises(AnnotuneError, match="tuned header in .*tuned: is not a directory") as e:
        check_headers_writable(source, None)
    assert "--out-dir" in e.value.hint
    check_headers_writable(source, tmp_path / "elsewhere")
    with pytest.raises(AnnotuneError, match=r"tuned/sub: .*tuned is not a directory"):
        check_headers_writable(source, tmp_path / "tuned" / "sub")


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("NVIDIA A100-PCIE-40GB", "nvidia-a100-pcie-40gb"),
        ("NVIDIA GeForce RTX 3090", "nvidia-geforce-rtx-3090"),
        ("cpu-Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", "cpu-intel-xeon-gold-6230-cpu-2.10ghz"),
        ("cpu-AMD EPYC™ 7763 64-Core Processor", "cpu-amd-epyc-7763-64-core-processor"),
        ("AMD Instinct MI250X/MI250", "amd-instinct-mi250x-mi250"),
        ("../../etc/passwd", "etc-passwd"),
        ("..", "unknown"),
        ("Ünïcode  GPU", "unicode-gpu"),
    ],
)
def test_slugs_are_safe_file_names(name, slug):
    assert slugify(name) == slug
