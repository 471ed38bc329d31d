"""`annotune report FILE` and `tune --plot`: a picture of a tune, on the bundled examples."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path

plt = pytest.importorskip("matplotlib.pyplot")

EXAMPLES = Path(__file__).parents[2] / "examples"


def panels(png: Path) -> int:
    """How many panels of 5.2 inches (520 pixels at 100 dpi) wide the PNG holds."""
    image = plt.imread(io.BytesIO(png.read_bytes()))
    assert image.shape[0] == 440
    return round(image.shape[1] / 520)


@pytest.fixture
def matmul(tmp_path: Path) -> Path:
    target = tmp_path / "matmul"
    shutil.copytree(EXAMPLES / "openacc" / "matmul", target, ignore=shutil.ignore_patterns("tuned"))
    return target / "matmul.c"


def test_tune_plot_draws_every_size_of_the_example(cli, matmul, monkeypatch):
    monkeypatch.chdir(matmul.parent)
    result = cli(
        "tune", "matmul.c", "--sizes", "N=16,32", "--budget", "3", "--repeats", "1",
        "--recheck-rounds", "6", "--plot",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    pictures = list(Path("tuned").glob("*/matmul.tune.png"))
    assert len(pictures) == 1 and f"picture       {pictures[0]}" in result.stderr
    assert panels(pictures[0]) == 4  # progress, by time, knobs, per size
    out = cli.json("report", "matmul.c", "--size", "16", "--json", "-o", "n16.png")
    assert out["title"].endswith("N = 16") and out["measurements"] == 3
    assert [p["size"] for p in out["sizes"]] == [16, 32]
    assert out["default_time"] is not None and panels(Path("n16.png")) == 4


def record(source: Path, device: str = "gpu-a") -> None:
    from annotune.annotate import read_problem

    key = StudyKey.for_problem(read_problem(source), device=device, build={})
    with Database(default_db_path(source)) as db:
        study = db.open_study(key)
        for b in (4, 8, 16):
            db.record(study, Measurement({"B": b}, "ok", time=10.0 / b))
        db.record(study, Measurement({"B": 32}, "runtime_error", error="boom"))


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 8 // @tune values(4, 8, 16, 32)\n#endif\nint x = B;\n")
    record(source)
    return source


def test_report_writes_beside_the_header(cli, kernel):
    result = cli("report", kernel)
    assert result.exit_code == 0, result.stderr
    png = kernel.parent / "tuned" / "gpu-a" / "k.tune.png"
    assert png.is_file() and panels(png) == 3
    assert str(png) in result.stderr


def test_report_html_and_json(cli, kernel, tmp_path):
    out = cli.json("report", kernel, "--html", "--json")
    page = Path(out["output"])
    assert page.name == "k.tune.html" and page.read_text().startswith("<!DOCTYPE html>")
    assert (out["measurements"], out["valid"]) == (4, 3)
    assert out["default"] == {"B": 8} and out["winner"] == {"B": 16}
    assert out["default_time"] == pytest.approx(1.25)


@pytest.mark.parametrize("target", ["source", "database"])
def test_report_never_overwrites_an_input(cli, kernel, target):
    path = kernel if target == "source" else default_db_path(kernel)
    before = path.read_bytes()
    result = cli("report", kernel, "-o", path)
    assert result.exit_code == 2
    assert "annotune writes no output over a file it reads" in result.stderr
    assert path.read_bytes() == before


def test_report_without_measurements(cli, tmp_path):
    source = tmp_path / "k.c"
    source.write_text("#ifndef B\n#define B 8 // @tune values(4, 8)\n#endif\n")
    result = cli("report", source)
    assert result.exit_code == 2 and "no results database" in result.stderr
    assert "run 'annotune tune" in result.stderr
    assert "Traceback" not in result.stderr


def test_plot_with_compile_only_is_refused(cli, kernel):
    result = cli("tune", kernel, "--compile-only", "--plot")
    assert result.exit_code == 2 and "--compile-only measures nothing" in result.stderr
