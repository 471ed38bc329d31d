"""Running another program (a compiler, its preprocessor, nvidia-smi, rocm-smi) with a time
limit, its failure as data.

One way for every stage: no shell, output captured as text (undecodable bytes replaced), the
program in a session of its own so that a timeout ends it and every process it started (nvcc
runs cicc, ptxas and the host compiler; killing nvcc alone leaves them holding the pipes and
the wait hanging), and a result that says why it did not finish instead of raising.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolRun:
    """How one run of a program ended. `returncode` is None when it did not end by itself:
    it could not be started (`errno` says why) or ran out of time (`timed_out`); negative
    when a signal killed it."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    errno: int | None = None
    strerror: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def why(self) -> str:
        """Why the run failed, in a few words ("" when it exited 0)."""
        if self.timed_out:
            return f"timed out after {self.seconds:.3g} s"
        if self.returncode is None:
            return f"cannot run {self.argv[0]}: {self.strerror}"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return "" if self.ok else f"exited with status {self.returncode}"


def run_tool(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ToolRun:
    """Run `argv` (no shell) for at most `timeout` seconds and say how it ended."""
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except OSError as error:
        return ToolRun(tuple(argv), None, "", "", time.monotonic() - started, error.errno,
                       error.strerror or str(error))  # fmt: skip
    except ValueError as error:  # a NUL byte in an argument
        return ToolRun(tuple(argv), None, "", "", 0.0, None, str(error))
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_session(process)
        stdout, stderr = process.communicate()
        return ToolRun(tuple(argv), None, stdout, stderr, time.monotonic() - started,
                       timed_out=True)  # fmt: skip
    except BaseException:  # Ctrl-C: the program and its children go too
        _end_session(process)
        raise
    return ToolRun(tuple(argv), process.returncode, stdout, stderr, time.monotonic() - started)


def _end_session(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()
    process.wait()


def version_output(executable: str) -> str:
    """All that `<compiler> --version` prints (empty if it cannot be run): the compiler's
    identity for the compile cache's key and a tuned header's provenance alike. Here, not in
    the builder, so that `annotune check` asks it without importing the builder."""
    done = run_tool([executable, "--version"], timeout=30)
    return "" if done.returncode is None else done.output
