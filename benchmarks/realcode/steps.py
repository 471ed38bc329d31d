"""Steps of the real-code harness that know nothing of annotune: running a command with a time
limit, reading annotune's JSON out of its output, and saying why an untouched program fails.

Kept apart from the harness so that a failure's reason (the program's or the tool's) is read
by one set of rules, whichever step it came from.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path


def annotune_cmd() -> list[str]:
    """annotune on PATH, else this interpreter's `python -m annotune` (a checkout on
    PYTHONPATH is then the one that runs)."""
    found = shutil.which("annotune")
    return [found] if found else [sys.executable, "-m", "annotune"]


def run(argv: list[str], cwd: Path, timeout: float, env: dict | None = None) -> dict:
    """One command's exit code, output and time, as data: a time-out is exit code 124."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        err += f"\n[harness] timed out after {timeout:.0f} s"
    return {
        "argv": argv,
        "cwd": str(cwd),
        "rc": rc,
        "stdout": out,
        "stderr": err,
        "seconds": round(time.monotonic() - start, 2),
    }


def parse_json(text: str) -> dict | None:
    """The JSON object annotune printed (after any progress lines), or None."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        start = text.find("{", start + 1)
    return None


def first_error(text: str, limit: int = 220) -> str:
    """The line of a compiler's or annotune's output that says what went wrong."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (
        r"internal error",
        r"internal compiler error",
        r"fatal error",
        r"\berror\b",
        r"Traceback|Exception",
        r"timed out",
        r"warning",
    ):
        for line in lines:
            if re.search(pattern, line, re.IGNORECASE):
                return line[:limit]
    return (lines[-1] if lines else "(no output)")[:limit]


# Why a plain build or run of the untouched program fails: the program's own reasons.
BUILD_REASONS = [
    (r"gsl/|cublasLt\.h|cublas|cudnn|cusparse|No such file or directory", "a missing library"),
    (r"Unsupported gpu architecture|not supported|was removed", "something the toolkit removed"),
    (r"internal compiler error", "the compiler crashes on it"),
    (r"\berror\b", "does not compile with this toolchain"),
]
RUN_REASONS = [
    (r"no CUDA-capable|no GPU|nvidia-smi", "needs a GPU to run"),
    (
        r"Error Reading|failed to open|cannot open|No such file|Bad file|File open fails|"
        r"Could not find a sub-directory",
        "its input is not in the checkout",
    ),
    (r"timed out", "too slow on this host at its smallest input"),
    (r"(?m)^\s*FAIL", "its own check fails on the host (its OpenMP target code run on the host)"),
    (r"", "crashes on the host (its OpenMP target code run on the host)"),
]


def program_reason(text: str, reasons: list[tuple[str, str]]) -> str:
    for pattern, reason in reasons:
        if re.search(pattern, text, re.IGNORECASE):
            return reason
    return "fails on its own"


def plain_command(compile_cmd: str, source: str, output: Path, arch: str | None) -> list[str]:
    """The toml's compile command as the Makefile runs it: no annotune placeholders."""
    argv = []
    for arg in shlex.split(compile_cmd):
        if arg in ("{defines}", "{includes}"):
            continue
        argv.append(arg.replace("{source}", source).replace("{output}", str(output)))
    if arch and Path(argv[0]).name == "nvcc":
        argv.insert(1, f"-arch={arch}")
    return argv


def defaults_of(config: dict) -> dict[str, str]:
    return {
        name: str(spec["default"])
        for name, spec in config.get("params", {}).items()
        if isinstance(spec, dict) and "default" in spec
    }


def with_defaults(text: str, defaults: dict[str, str]) -> str:
    """`{NAME}` replaced by its knob's default (`{{` is a literal brace), as a plain run has it."""
    text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", lambda m: defaults.get(m.group(1), m.group(0)), text)
    return text.replace("{{", "{").replace("}}", "}")


def plain_env(config: dict) -> dict:
    """The environment of a plain run: the toml's env, each {NAME} its parameter's default."""
    defaults = defaults_of(config)
    env = dict(os.environ)
    for name, value in config.get("env", {}).items():
        env[name] = with_defaults(value, defaults)
    return env


def plain_args(config: dict) -> list[str]:
    """The arguments of a plain run: the toml's args, each {NAME} its parameter's default."""
    defaults = defaults_of(config)
    return [with_defaults(arg, defaults) for arg in config.get("args", [])]


def lines_of(step: dict) -> str:
    return step["stdout"] + "\n" + step["stderr"]
