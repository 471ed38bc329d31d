"""A program run as the leader of its own process group, killed whole when it ends, its output
read from files, bounded (`OUTPUT_LIMIT`: its start and its end)."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

OUTPUT_LIMIT = 64 << 20
"""The most bytes of a run's stdout (and of its stderr) read: the first and the last half of
it, so that a program printing gigabytes exhausts no memory, and its last lines (`PASS`, a
checksum) are still read."""


def run_in_own_group(
    argv: list[str], cwd: Path | None, timeout: float, env: Mapping[str, str]
) -> tuple[int, str, str, float] | None:
    """Run `argv` as the leader of a new process group; None if it outlived `timeout`.

    Whatever the program started is killed with it, on a timeout and after a normal exit
    alike: a forked helper would otherwise keep running (and loading the machine) after the
    tune. Output goes to files, not pipes, so a child that inherits them cannot keep the
    run waiting for their end.

    The wait blocks until the program ends, and a timer kills it at `timeout`: a wait with a
    timeout (`Popen.wait(timeout=...)`) polls, sleeping up to 50 ms between looks, so every
    wall time past 63 ms came out as 63 + 50k ms (a 100 ms program read 114 ms, or 165), and
    two configurations could differ by a whole step of it.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _signal_group(process)

        timer = threading.Timer(timeout, expire) if math.isfinite(timeout) else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            returncode = process.wait()
        finally:
            wall_ms = (time.perf_counter() - started) * 1e3
            if timer is not None:
                timer.cancel()
            _kill_group(process)
        if expired.is_set():
            return None
        return returncode, _read(out), _read(err), wall_ms


def _signal_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _kill_group(process: subprocess.Popen) -> None:
    _signal_group(process)
    process.wait()


def _read(file) -> str:
    """What the run wrote to `file`, at most `OUTPUT_LIMIT` bytes of it: its start and its end
    when it wrote more."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    if size <= OUTPUT_LIMIT:
        return file.read().decode(errors="replace")
    head = file.read(OUTPUT_LIMIT // 2)
    file.seek(size - OUTPUT_LIMIT // 2)
    tail = file.read()
    skipped = f"\n[annotune: {size - len(head) - len(tail):,} bytes of output not read]\n"
    return head.decode(errors="replace") + skipped + tail.decode(errors="replace")
