"""`annotune predict`: the zero-shot best configuration for a GPU with no measurements."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.records import Measurement
from annotune.emit import PREDICTED
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.transfer.features import lookup

SOURCE_GPU = "NVIDIA A100-PCIE-40GB"
TARGET_GPU = "NVIDIA RTX A4000"


@pytest.fixture
def workdir(tmp_path, data_dir):
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return tmp_path


def record_other_gpu(source, db_path=None):
    """A study of synthetic.c on the A100 whose best configuration is X=7, Y=3."""
    problem = read_problem(source)
    key = StudyKey.for_problem(problem, device=SOURCE_GPU, build={"from": "test"})
    with Database(db_path or default_db_path(source)) as db:
        study = db.open_study(key, device_features=lookup(SOURCE_GPU).to_json())
        for x in range(1, 10):
            for y in (1, 2, 3):
                if x + y != 12:
                    time = 1.0 + abs(x - 7) + 0.1 * abs(y - 3)
                    db.record(study, Measurement({"X": x, "Y": y}, "ok", time))
    return study


def test_predicts_from_the_other_gpu_and_prints_it(cli, workdir):
    record_other_gpu(workdir / "synthetic.c")
    out = cli.json("predict", workdir / "synthetic.c", "--device", TARGET_GPU, "--json")
    assert out["device"] == TARGET_GPU
    assert out["sources"] == [SOURCE_GPU] and out["method"] == "none"
    assert out["params"]["X"] == 7
    assert 0.0 < out["predicted_performance"] <= 1.0 and out["header"] is None
    text = cli("predict", workdir / "synthetic.c", "--device", TARGET_GPU)
    assert text.exit_code == 0
    assert "learned from  NVIDIA A100-PCIE-40GB" in text.stdout and "'X': 7" in text.stdout


def test_write_marks_the_header_and_never_replaces_a_measured_one(cli, workdir):
    record_other_gpu(workdir / "synthetic.c")
    args = ("predict", workdir / "synthetic.c", "--device", TARGET_GPU, "--write")
    out = cli.json(*args, "--json")
    header = workdir / "tuned" / "nvidia-rtx-a4000" / "synthetic.h"
    assert out["header"] == str(header)
    text = header.read_text()
    assert PREDICTED in text and "#define X 7" in text
    assert cli(*args).exit_code == 0  # a predicted header may be predicted again
    header.write_text("/* measured by annotune tune */\n#define X 3\n")
    refused = cli(*args)
    assert refused.exit_code == 2 and "measured header" in refused.stderr
    assert header.read_text().startswith("/* measured")
    assert cli(*args, "--force").exit_code == 0 and PREDICTED in header.read_text()


def test_results_files_teach_without_a_database(cli, workdir, tmp_path):
    study = record_other_gpu(workdir / "synthetic.c", tmp_path / "elsewhere.db")
    exported = tmp_path / "a100.json"
    with Database(tmp_path / "elsewhere.db") as db:
        db.export_t4(study, exported)
    out = cli.json(
        "predict",
        workdir / "synthetic.c",
        "--device",
        TARGET_GPU,
        "--transfer-from",
        exported,
        "--json",
    )
    assert out["sources"] == [SOURCE_GPU] and out["params"]["X"] == 7
    wrong = tmp_path / "wrong.json"
    data = json.loads(exported.read_text())
    for record in data["results"]:
        record["configuration"] = {"Z": record["configuration"]["X"]}
    wrong.write_text(json.dumps(data))
    bad = cli("predict", workdir / "synthetic.c", "--device", TARGET_GPU, "--transfer-from", wrong)
    assert bad.exit_code == 2 and "are not the source's" in bad.stderr


def test_errors_exit_2_with_a_hint(cli, workdir):
    nothing = cli("predict", workdir / "synthetic.c", "--device", TARGET_GPU)
    assert nothing.exit_code == 2
    assert "no other GPU's results" in nothing.stderr and "--transfer-from" in nothing.stderr
    bad = workdir / "gpus.toml"
    bad.write_text('[[gpu]]\nname = "Imaginary GPU 9000"\ncorez = 3\n')
    args = ("predict", workdir / "synthetic.c", "--device", TARGET_GPU, "--gpus", bad)
    malformed = cli(*args)
    assert malformed.exit_code == 2 and f"{bad}:3:1: error: unknown field 'corez'" in (
        malformed.stderr
    )
    assert "Traceback" not in malformed.stderr


def test_a_gpu_known_nowhere_is_predicted_for_with_a_warning(cli, workdir):
    record_other_gpu(workdir / "synthetic.c")
    source = workdir / "synthetic.c"
    unknown = cli("predict", source, "--device", "NVIDIA RTX A5500")
    assert unknown.exit_code == 0, unknown.stderr
    assert "annotune: warning: no device features known for 'NVIDIA RTX A5500'" in unknown.stderr
    assert "NVIDIA Ampere" in unknown.stderr and "'X': 7" in unknown.stdout
    nameless = cli("predict", source, "--device", "Imaginary GPU 9000")
    assert nameless.exit_code == 0 and "vendor is not in its name" in nameless.stderr
    # Described in a --gpus file, it is known: no warning.
    values = "\n".join(f"{n} = {v:g}" for n, v in lookup("A4000").values.items())
    gpus = workdir / "gpus.toml"
    gpus.write_text(f'[[gpu]]\nname = "Imaginary GPU 9000"\narchitecture = "Y"\n{values}\n')
    described = cli("predict", source, "--device", "Imaginary GPU 9000", "--gpus", gpus)
    assert described.exit_code == 0 and described.stderr == ""


ROOT = Path(__file__).parents[2]


def guide_commands(prefix: str) -> list[list[str]]:
    lines = (ROOT / "docs/guide/transfer.md").read_text().splitlines()
    return [shlex.split(line, comments=True)[1:] for line in lines if line.startswith(prefix)]


@pytest.mark.slow
@pytest.mark.usefixtures("replay_dir")
def test_the_guide_predict_example_runs_as_written(cli, monkeypatch, tmp_path):
    """From the repository root, as the guide says; the header written under a scratch
    `--out-dir`, not into the checkout."""
    (command,) = [c for c in guide_commands("annotune predict ") if "--transfer-from" in c]
    monkeypatch.chdir(ROOT)
    done = cli(*command)
    assert done.exit_code == 0, done.stderr
    assert "NVIDIA A100-PCIE-40GB, NVIDIA RTX A4000" in done.stdout
    written = cli.json(*command, "--write", "--out-dir", tmp_path, "--json")
    header = Path(written["header"])
    assert header.parent.parent == tmp_path and PREDICTED in header.read_text()
    assert f"#define block_size_x {written['params']['block_size_x']}" in header.read_text()
