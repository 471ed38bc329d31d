"""`annotune build`: copies the device's tuned header or writes the defaults, rewrites OUT only
when it changes, never writes a header whose values the compiler would ignore (tuned copies in
`--shadow-dir` instead), and stays correct when make runs many at once."""

from __future__ import annotations

import inspect
import os
import re
import shlex
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


def test_copies_the_tuned_header_and_checks_it_again_when_a_file_it_depends_on_changes(
    cli, project, tmp_path
):
    """A vendored header changed after OUT was written must not slip through because OUT is
    up to date: the check is keyed by the bytes of the files it read, not by OUT."""
    out = tmp_path / "build" / "stencil.tuned.h"
    result = cli("build", project, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == TUNED_TEXT.encode()  # byte for byte, CRLF kept
    assert result.stderr == "" and result.stdout == ""
    assert cli("build", project, "-o", out).exit_code == 0

    vendored = project.parent / "stencil.cuh"
    vendored.write_text(
        vendored.read_text().replace("#ifndef BLOCK_X", "#define BLOCK_X 16\n#if 0")
    )
    again = cli("build", project, "-o", out)
    assert again.exit_code == 2
    assert again.stderr.startswith(f"{vendored}:4:9: error: BLOCK_X is tuned to 64")


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
    assert result.stderr == (
        "annotune: error: Invalid value for '--output' / '-o': "
        f"cannot write '{tmp_path / 'out.h'}': is a directory\n"
    )


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


def test_a_build_on_unchanged_files_imports_no_heavy_package(project, tmp_path):
    """The path every `make` takes (the files it read are unchanged, whether the header is a
    tuned one or the defaults); the first build, which parses the source, may import them."""
    out = tmp_path / "out.h"
    first = _imports("build", project, "-o", out)
    assert out.read_bytes() == TUNED_TEXT.encode()
    assert "clang.cindex" in first  # a header that changes OUT is checked against the source
    fast = _imports("build", project, "-o", out)
    assert "annotune.cli.build" in fast  # the list is real, not empty
    assert not {name.split(".")[0] for name in fast} & HEAVY

    other = ("--device", "a device with no tuned header")
    slow = _imports("build", project, "-o", out, *other)
    assert {"clang.cindex", "jinja2"} <= slow
    cached = _imports("build", project, "-o", out, *other)  # the defaults header, from the cache
    assert "annotune.results.build_cache" in cached
    assert not {name.split(".")[0] for name in cached} & HEAVY


@pytest.mark.parametrize(
    ("tuned", "line", "said"),
    [
        ("BLOCK_Y 8", "stencil.cuh:8:9", "BLOCK_Y is tuned to 8 ({header}), but the compiler "
         "uses this unguarded #define, 4: a header included with -include cannot override it"),
        ("UNROLL 1", "stencil.cu:12:16", "UNROLL is tuned to 1 ({header}), but the compiler "
         "uses this pragma literal, 3: a header included with -include cannot override it"),
    ],
)  # fmt: skip
def test_a_tuned_value_the_compiler_would_ignore_is_an_error_at_what_wins(
    cli, project, tmp_path, tuned, line, said
):
    header = project.parent / "tuned" / "nvidia-a100-pcie-40gb" / "stencil.h"
    header.write_text(f"#ifndef {tuned.split()[0]}\n#define {tuned} /* tuned */\n#endif\n")
    out = tmp_path / "out.h"
    result = cli("build", project, "-o", out)
    assert result.exit_code == 2
    first, *_, note = result.stderr.splitlines()
    assert first == f"{project.parent / line}: error: {said.format(header=header)}"
    assert note.startswith(f"note: for code you own, `annotune lift {project} --write`")
    assert "--shadow-dir DIR" in note
    assert not out.exists()  # never a header the compiler ignores

    header.write_text("#define BLOCK_Y 4\n#define UNROLL 3\n")  # the source's own values
    assert cli("build", project, "-o", out).exit_code == 0


@pytest.fixture
def vendored(tmp_path, monkeypatch) -> Path:
    """A third-party program we must not edit: its block size is an unguarded #define in a
    header of another folder; annotune.toml declares it; a tuned header sets it to 64."""
    (tmp_path / "third" / "include").mkdir(parents=True)
    (tmp_path / "third" / "src").mkdir()
    (tmp_path / "third" / "include" / "conf.h").write_text(
        "/* vendored */\n#ifndef CONF_H\n#define CONF_H\n#define DIM_THREAD_BLOCK_X 32\n#endif\n"
    )
    source = tmp_path / "third" / "src" / "k.c"
    source.write_text(
        '#include <stdio.h>\n#include "conf.h"\n'
        'int main(void) { printf("%d\\n", DIM_THREAD_BLOCK_X); return 0; }\n'
    )
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "third/src/k.c"\ninclude = ["third/include"]\n'
        '[file.params]\nDIM_THREAD_BLOCK_X = "pow2(8, 256)"\n'
    )
    header = tmp_path / "third" / "src" / "tuned" / "nvidia-a100-pcie-40gb" / "k.h"
    header.parent.mkdir(parents=True)
    header.write_text("#ifndef DIM_THREAD_BLOCK_X\n#define DIM_THREAD_BLOCK_X 64\n#endif\n")
    monkeypatch.setenv(DEVICE_ENV, DEVICE)
    monkeypatch.chdir(tmp_path)
    return Path("third/src/k.c")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_shadow_copies_make_the_tuned_value_reach_code_we_must_not_edit(cli, vendored, tmp_path):
    vendored_header = "third/include/conf.h"
    plain = cli("build", vendored, "-o", "build/k.h")
    assert plain.exit_code == 2
    assert plain.stderr.startswith(
        f"{tmp_path / vendored_header}:4:9: error: DIM_THREAD_BLOCK_X is tuned to 64"
    )
    original = (tmp_path / vendored_header).read_bytes()

    result = cli("build", vendored, "-o", "build/k.h", "--shadow-dir", "build/shadow")
    assert result.exit_code == 0, result.stderr
    args = shlex.split(result.stdout)
    assert args == [
        "-Ibuild/shadow/src", "-Ibuild/shadow/include", "-Ithird/src", "build/shadow/src/k.c"
    ]  # fmt: skip
    assert (tmp_path / vendored_header).read_bytes() == original  # the user's file untouched
    assert b"#define DIM_THREAD_BLOCK_X 64" in Path("build/shadow/include/conf.h").read_bytes()

    # The project's own compile, its -I after ours: the program has the tuned value.
    command = ["gcc", "-include", "build/k.h", *args, "-Ithird/include"]
    macros = subprocess.run(
        [*command, "-E", "-dM"], capture_output=True, text=True, check=True
    ).stdout
    assert "#define DIM_THREAD_BLOCK_X 64" in macros.splitlines()
    subprocess.run([*command, "-o", "k"], check=True)
    assert subprocess.run(["./k"], capture_output=True, text=True).stdout == "64\n"

    again = cli.json("build", vendored, "-o", "build/k.h", "--shadow-dir", "build/shadow", "--json")
    assert again["changed"] is False and again["shadow"] == args
    (tmp_path / vendored_header).write_bytes(original.replace(b"vendored", b"vendored v2"))
    cli("build", vendored, "-o", "build/k.h", "--shadow-dir", "build/shadow")
    assert b"vendored v2" in Path("build/shadow/include/conf.h").read_bytes()  # kept current


def test_a_shadow_no_op_reads_the_manifest_not_the_source(vendored, tmp_path):
    command = ("build", vendored, "-o", "build/k.h", "--shadow-dir", "build/shadow")
    _imports(*command)
    assert not {name.split(".")[0] for name in _imports(*command)} & HEAVY


def test_a_shadow_directory_never_overwrites_the_originals(cli, vendored, tmp_path):
    result = cli("build", vendored, "-o", "build/k.h", "--shadow-dir", "third")
    assert result.exit_code == 2
    assert "would overwrite the original" in result.stderr
    assert b"#define DIM_THREAD_BLOCK_X 32" in (tmp_path / "third/include/conf.h").read_bytes()


def test_help_lists_every_command_without_importing_one(cli):
    assert not _imports("--help") & {entry.module for entry in COMMANDS.values()}
    commands = cli("--help").stdout.split("Commands", 1)[1]  # the panel after the options
    listed = re.findall(r"^\W+(\w+) {2,}\w", commands, re.MULTILINE)
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


def test_a_device_without_a_header_gets_that_of_the_nearest_gpu_of_its_architecture(
    cli, project, tmp_path
):
    out = tmp_path / "out.h"
    result = cli("build", project, "-o", out, "--device", "NVIDIA A30")  # sm_80, as the A100
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == TUNED_TEXT.encode()
    (line,) = result.stderr.splitlines()
    assert "no tuned header for device 'NVIDIA A30'" in line and DEVICE in line
    # A board only the user's table knows, of the same architecture: the A100's header too.
    gpus = tmp_path / "gpus.toml"
    gpus.write_text('[[gpu]]\nname = "Lab Board 1"\narchitecture = "Ampere (sm_80)"\n')
    unknown = cli("build", project, "-o", out, "--device", "Lab Board 1", "--gpus", gpus)
    assert unknown.exit_code == 0 and DEVICE in unknown.stderr
    gpus.write_text('[[gpu]]\nname = "Lab Board 1"\narchitecture = 80\n')
    bad = cli("build", project, "-o", out, "--device", "Lab Board 1", "--gpus", gpus)
    assert bad.exit_code == 2 and f"{gpus}:3:16: error: architecture must be a string" in bad.stderr


def test_the_defaults_header_is_worked_out_again_when_a_file_it_comes_from_changes(
    cli, project, tmp_path
):
    """The cached defaults header holds while the source, every header it includes and the
    config are unchanged; a change to any of them (a config that appears too) rebuilds it."""
    out = tmp_path / "out.h"
    device = ("--device", "NVIDIA H100 80GB HBM3")

    def built() -> str:
        result = cli("build", project, "-o", out, *device)
        assert result.exit_code == 0, result.stderr
        assert "wrote the defaults" in result.stderr  # said from the cache too
        return out.read_text()

    assert "#define BLOCK_X 32" in built() and "#define BLOCK_X 32" in built()
    included = project.parent / "stencil.cuh"
    included.write_text(included.read_text().replace("BLOCK_X 32", "BLOCK_X 64"))
    assert "#define BLOCK_X 64" in built()
    project.write_text(project.read_text().replace("unroll 3", "unroll 1"))
    assert "#define UNROLL 1" in built()
    (project.parent / "annotune.toml").write_text(
        '[[file]]\npath = "stencil.cu"\n[file.params]\nEXTRA = { domain = "values(1, 2)", '
        'default = 2 }\n[file.env]\nEXTRA_ENV = "{EXTRA}"\n'
    )
    assert "#define EXTRA 2" in built()
    assert built() == render_defaults_header(read_problem(project), device=device[1])


def test_a_device_name_holding_an_osc_sequence_is_shown_escaped(
    cli, project, tmp_path, monkeypatch
):
    """`ANNOTUNE_DEVICE` may hold anything (`--device` must be printable text): the warning
    that names it must not retitle the terminal."""
    monkeypatch.setenv(DEVICE_ENV, "gpu\x1b]0;x\x07")
    result = cli("build", project, "-o", tmp_path / "out.h")
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "no tuned header for device 'gpu\\x1b]0;x\\x07'" in result.stderr
