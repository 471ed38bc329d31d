"""Running another program with a time limit, its failure as data (`core.tools`)."""

from __future__ import annotations

import errno
import shutil
import sys
import time

from annotune.core.tools import run_tool


def test_output_and_status_are_kept():
    done = run_tool([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30)
    assert done.returncode == 3 and done.stdout == "out\n" and not done.ok
    assert done.why == "exited with status 3"


def test_a_missing_program_is_data_not_an_exception():
    done = run_tool(["annotune-no-such-tool"], timeout=5)
    assert done.returncode is None and done.errno == errno.ENOENT
    assert done.why.startswith("cannot run annotune-no-such-tool:")


def test_a_timeout_ends_the_program_and_every_process_it_started(tmp_path):
    """A compiler driver's children (nvcc's cicc and ptxas) hold the output pipes: killing the
    driver alone would leave the wait hanging until they finish."""
    sleep = shutil.which("sleep")
    script = f"import subprocess; subprocess.Popen([{sleep!r}, '60']); import time; time.sleep(60)"
    start = time.monotonic()
    done = run_tool([sys.executable, "-c", script], timeout=0.5)
    assert done.timed_out and done.returncode is None and "timed out" in done.why
    assert time.monotonic() - start < 10


def test_a_nul_in_an_argument_is_data():
    done = run_tool(["echo", "a\0b"], timeout=5)
    assert done.returncode is None and not done.ok
