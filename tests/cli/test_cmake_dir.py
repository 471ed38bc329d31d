"""`annotune --cmake-dir`: where the CMake package is, for `-Dannotune_DIR`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import annotune
from annotune.cli.app import COMMANDS

ROOT = Path(__file__).parents[2]


def test_it_prints_the_directory_of_the_cmake_package(cli):
    done = cli("--cmake-dir")
    assert done.exit_code == 0, done.stderr
    directory = Path(done.stdout.strip())
    assert directory == Path(annotune.__file__).resolve().parent / "cmake"
    assert (directory / "annotuneConfig.cmake").is_file()
    assert (directory / "annotuneConfigVersion.cmake").is_file()


def test_it_is_listed_in_the_help(cli):
    assert "--cmake-dir" in cli("--help").stdout


def test_the_command_prints_only_the_path_and_imports_no_command():
    """What `$(annotune --cmake-dir)` captures in a shell: the path alone; and, like `--help`,
    no command's module (`annotune build` and `--cmake-dir` run on every configure)."""
    probe = (
        "import sys\n"
        "sys.argv = ['annotune', '--cmake-dir']\n"
        "from annotune.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == f"{Path(annotune.__file__).resolve().parent / 'cmake'}\n"
    imported = set(done.stderr.split())
    assert "annotune.cli.app" in imported
    assert not imported & {entry.module for entry in COMMANDS.values()}
