"""`annotune build`: copies the device's tuned header or writes the defaults, rewrites OUT only
when it changes, and stays correct when make runs many at once."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
import typer.main

from annotune.annotate import read_problem
from annotune.cli.app import COMMANDS, app
from annotune.emit import render_defaults_header
from annotune.run.device import DEVICE_ENV

ROOT = Path(__file__).resolve().parents[2]
DEVICE = "NVIDIA A100-PCIE-40GB"
TUNED_TEXT = "/* tuned for the A100 */\r\n#ifndef BLOCK_X\r\n#define BLOCK_X 64\r\n#endif\r\n"
HEAVY = {"sklearn", "scipy", "clang", "numpy", "jinja2", "rich"}
"""What a no-op `make` must not import: the first five took a second of every `annotune build`,
rich a sixth of what was left."""


@pytest.fixture
def project(tmp_path, data_dir, monkeypatch) -> Path:
    """A copy of the stencil example with a tuned header for DEVICE; DEVICE is this machine."""
    shutil.copytree(data_dir / "stencil", tmp_path / "src")
    header = tmp_path / "src" / "tuned" / "nvidia-a100-pcie-40gb" / "stencil.h"
    header.parent.mkdir(parents=True)
    header.write_bytes(TUNED_TEXT.encode())
    monkeypatch.setenv(DEVICE_ENV, DEVICE)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "src" / "stencil.cu"


def test_copies_the_tuned_header_without_parsing_the_source(cli, project, tmp_path):
    project.write_text("this is not C; parsing it would fail\n")
    out = tmp_path / "build" / "stencil.tuned.h"
    result = cli("build", project, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == TUNED_TEXT.encode()  # byte for byte, CRLF kept
    assert result.stderr == "" and result.stdout == ""


def test_a_second_run_leaves_out_untouched(cli, project, tmp_path):
    out = tmp_path / "build" / "stencil.tuned.h"
    first = cli.json("build", project, "-o", out, "--json")
    assert first["changed"] is True
    assert first["device"] == DEVICE
    assert first["header"] == str(project.parent / "tuned" / "nvidia-a100-pcie-40gb" / "stencil.h")
    before = os.stat(out).st_mtime_ns

    assert cli.json("build", project, "-o", out, "--json")["changed"] is False
    assert os.stat(out).st_mtime_ns == before

    header = Path(first["header"])
    header.write_text("#define BLOCK_X 128\n")  # re-tuned: now OUT must follow
    assert cli.json("build", project, "-o", out, "--json")["changed"] is True
    assert out.read_text() == "#define BLOCK_X 128\n"


def test_device_and_out_dir_options_pick_the_header(cli, project, tmp_path, monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "some other gpu")
    elsewhere = tmp_path / "headers" / "nvidia-h100" / "stencil.h"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("#define BLOCK_X 256\n")
    out = tmp_path / "out.h"
    result = cli("build", project, "-o", out, "--device", DEVICE)
    assert result.exit_code == 0 and out.read_bytes() == TUNED_TEXT.encode()
    result = cli("build", project, "-o", out, "--device", "NVIDIA H100", "--out-dir", "headers")
    assert result.exit_code == 0
    assert out.read_text() == "#define BLOCK_X 256\n"


def test_a_device_without_a_header_gets_the_defaults_and_one_warning(cli, project, tmp_path):
    out = tmp_path / "out.h"
    result = cli("build", project, "-o", out, "--device", "NVIDIA H100 80GB HBM3")
    assert result.exit_code == 0, result.stderr
    expected = render_defaults_header(read_problem(project), device="NVIDIA H100 80GB HBM3")
    assert out.read_text() == expected
    assert "#define BLOCK_X 32" in expected
    (line,) = result.stderr.splitlines()
    assert line.startswith("annotune: warning: no tuned header for device 'NVIDIA H100 80GB HBM3'")
    assert "nvidia-h100-80gb-hbm3" in line


def test_a_missing_source_is_a_located_error(cli, tmp_path):
    result = cli("build", tmp_path / "nope.cu", "-o", tmp_path / "out.h")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{tmp_path / 'nope.cu'}:1:1: error: no such file"
    assert not (tmp_path / "out.h").exists()


def test_an_unwritable_output_is_a_user_error(cli, project, tmp_path):
    (tmp_path / "out.h").mkdir()
    result = cli("build", project, "-o", tmp_path / "out.h")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"annotune: error: cannot write {tmp_path / 'out.h'}:")


@pytest.mark.parametrize("device", [DEVICE, "a device with no tuned header"])
def test_eight_concurrent_runs_leave_a_complete_file(project, tmp_path, device):
    """What `make -j8` does when eight targets share one generated header."""
    out = tmp_path / "build" / "stencil.tuned.h"
    env = {**_checkout_env(), DEVICE_ENV: device}
    command = [sys.executable, "-m", "annotune", "build", str(project), "-o", str(out)]
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(8)
    ]
    for run in runs:
        _, err = run.communicate()
        assert run.returncode == 0, err.decode()
    if device == DEVICE:
        assert out.read_bytes() == TUNED_TEXT.encode()
    else:
        assert out.read_text() == render_defaults_header(read_problem(project), device=device)
    assert os.listdir(out.parent) == [out.name]  # no temporary file left behind


def test_copying_a_tuned_header_imports_no_heavy_package(project, tmp_path):
    """The path every `make` takes; the defaults path, which parses the source, may import them."""
    out = tmp_path / "out.h"
    fast = _imports("build", project, "-o", out)
    assert out.read_bytes() == TUNED_TEXT.encode()
    assert "annotune.cli.build" in fast  # the list is real, not empty
    assert not {name.split(".")[0] for name in fast} & HEAVY

    slow = _imports("build", project, "-o", out, "--device", "a device with no tuned header")
    assert {"clang.cindex", "jinja2"} <= slow


def test_help_lists_every_command_without_importing_one(cli):
    assert not _imports("--help") & {entry.module for entry in COMMANDS.values()}
    listed = re.findall(r"^\W+(\w+) {2,}\w", cli("--help").stdout, re.MULTILINE)
    assert listed == list(COMMANDS)


def test_every_command_is_in_the_table_with_its_docstring():
    """`annotune --help` lists `COMMANDS` without importing them, so the table must match what
    the modules register: the same names, in order, and each docstring's first paragraph."""
    for entry in COMMANDS.values():
        import_module(entry.module)
    commands = typer.main.get_command(app).commands
    assert list(commands) == list(COMMANDS)
    for name, entry in COMMANDS.items():
        command = commands[name]
        assert command.callback is not None, f"{entry.module} registers no command {name!r}"
        first_paragraph = inspect.cleandoc(command.help).split("\n\n")[0]
        assert entry.help == " ".join(first_paragraph.split()), name


def _checkout_env() -> dict[str, str]:
    """This process's environment, with this checkout importable whether installed or not."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _imports(*args: object) -> set[str]:
    """The modules `annotune ARGS` has imported when it exits 0 in a fresh process (read from
    sys.modules: `-X importtime` does not report what importlib.import_module loads)."""
    probe = (
        "import sys\n"
        "from annotune.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(*sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *map(str, args)],
        env=_checkout_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stderr.splitlines()[-1].split())
