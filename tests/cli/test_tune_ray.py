"""`annotune tune --ray` and `--replay` from the command line: the guide's example as written,
and every bad option an error with exit 2 before a cluster starts."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # Ray's start-up, and several whole tunes

ROOT = Path(__file__).parents[2]
CONVOLUTION = "examples/cuda/convolution/convolution.cu"

pytest.importorskip("ray")


def guide_ray_command() -> list[str]:
    (line,) = [
        line
        for line in (ROOT / "docs/guide/several-gpus.md").read_text().splitlines()
        if line.startswith("annotune tune ") and "--ray" in line
    ]
    return shlex.split(line)[1:]


@pytest.mark.usefixtures("replay_dir")
def test_the_guide_ray_example_runs_as_written(cli, monkeypatch, tmp_path):
    command = guide_ray_command()
    out_dir = Path(command[command.index("--out-dir") + 1])
    monkeypatch.chdir(ROOT)
    # The database goes to a scratch directory, the rest is the guide's line.
    done = cli(*command, "--db", tmp_path / "results.db", "--json")
    assert done.exit_code == 0, done.stderr
    (report,) = json.loads(done.stdout)["tunes"]
    assert report["device"] == "NVIDIA A100-PCIE-40GB" and report["evaluations"] == 60
    assert len(report["devices"]) == 4 and all(d["measured"] > 0 for d in report["devices"])
    assert sum(d["measured"] for d in report["devices"]) >= 59  # the baseline's on one
    assert Path(report["header"]).is_relative_to(out_dir)
    assert Path(report["header"]).read_text().count("#define block_size_x") == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--devices", "0", "--ray"], "must be a count from 1 or 'all'"),
        (["--devices", "two", "--ray"], "must be a count from 1 or 'all'"),
        (["--ray-address", "auto"], "--ray-address needs --ray"),
        (["--devices", "2"], "--devices needs --ray"),
        (["--sync", "--replay", "x.json"], "--sync is how several devices share the search"),
        (["--replay-delay", "-1", "--replay", "x.json"], "must be seconds from 0"),
        (["--replay", "a.json", "--replay", "b.json"], "add --ray"),
        (["--ray", "--compile-only"], "--compile-only compiles here"),
        (["--replay", "missing.json"], "missing.json"),
        (["--objective", "energy", "--replay", "x.json"], "a recording holds times only"),
    ],
)
def test_bad_ray_and_replay_options_exit_2_before_anything_runs(cli, tmp_path, args, message):
    source = ROOT / CONVOLUTION
    done = cli("tune", source, *args, "--db", tmp_path / "r.db", "--out-dir", tmp_path)
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_recording_of_another_space_is_refused(cli, tmp_path):
    (tmp_path / "other.json").write_text(
        json.dumps({"tune_params_keys": ["Q"], "cache": {"1": {"Q": 1, "time": 1.0}}})
    )
    source = ROOT / CONVOLUTION
    done = cli("tune", source, "--replay", tmp_path / "other.json", "--db", tmp_path / "r.db")
    assert done.exit_code == 2 and "are not the source's" in done.stderr


def test_tune_learns_for_a_gpu_known_nowhere_described_by_gpus(cli, tmp_path, replay_dir):
    """A GPU no table knows still learns from other GPUs (with a warning naming its stand-in),
    and one described by --gpus does so without a warning, its features the user's."""
    from annotune.transfer.features import lookup

    base = [
        "tune", ROOT / CONVOLUTION, "--replay", replay_dir / "convolution_A4000.json.gz",
        "--replay-delay", "0", "--budget", "12", "--recheck", "0",
        "--transfer-from", replay_dir / "convolution_A100.json.gz", "--out-dir", tmp_path, "--json",
    ]  # fmt: skip
    unknown = cli(*base, "--device", "NVIDIA RTX A5500", "--db", tmp_path / "a.db")
    assert unknown.exit_code == 0, unknown.stderr
    report = json.loads(unknown.stdout)
    assert report["transfer"]["sources"] == ["NVIDIA A100-PCIE-40GB"]
    assert any("no device features known for 'NVIDIA RTX A5500'" in w for w in report["warnings"])
    values = "\n".join(f"{n} = {v:g}" for n, v in lookup("A4000").values.items())
    gpus = tmp_path / "gpus.toml"
    gpus.write_text(f'[[gpu]]\nname = "Imaginary GPU 9000"\narchitecture = "Y"\n{values}\n')
    described = cli(
        *base, "--device", "Imaginary GPU 9000", "--gpus", gpus, "--db", tmp_path / "b.db"
    )
    assert described.exit_code == 0, described.stderr
    report = json.loads(described.stdout)
    assert report["transfer"]["sources"] == ["NVIDIA A100-PCIE-40GB"]
    assert not any("Imaginary GPU 9000" in w for w in report["warnings"])
