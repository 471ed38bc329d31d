"""The parse in a bounded child process: an address-space and a CPU-time limit
(`PARSE_MEMORY`, `PARSE_SECONDS`), so that a source whose macros expand exponentially is a
located error, not annotune killed for memory. Forked where that is safe, else a fresh
interpreter (`serve_parse`); the outcome comes back pickled, and a limit the machine set (one
annotune inherited, lower than its own) is said to be the machine's, not the source's fault."""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable

import clang.cindex as ci

from annotune.annotate.source.records import ParsedSource
from annotune.core import limits
from annotune.core.diagnostics import AnnotuneError, Location

PARSE_MEMORY = 4 << 30
"""The address space libclang may take beyond what the process holds when it parses, in bytes:
a source whose macros expand exponentially (`#define L1 L0 L0`, 40 levels) would take every
byte of the machine's memory."""
PARSE_SECONDS = 300
"""The CPU seconds libclang may take to parse one source (its wall time: twice that)."""


def bounded(parse: Callable[[], ParsedSource], where: Location) -> ParsedSource:
    """`parse()` in a child process with an address-space and a time limit, its result sent
    back pickled. A parser bomb ends that child, not annotune: a located error. An
    AnnotuneError in the child is raised here as it was; a bug, as a RuntimeError with the
    child's traceback. The child is forked (it inherits libclang, loaded, and costs a few
    milliseconds) when that is safe (`_fork_unsafe`: under Ray, gRPC's fork handlers abort a
    forked child), else a fresh interpreter is spawned (a few tenths of a second)."""
    payload, status = _spawned(parse, where) if _fork_unsafe() else _forked(parse, where)
    try:
        kind, value = pickle.loads(payload)
    except Exception:  # nothing, or half of it: the child died
        kind, value = "died", status
    if kind == "ok":
        return value
    if kind == "error":
        message, location, hint = value
        raise AnnotuneError(message, location, hint=hint)
    if kind == "bug":
        raise RuntimeError(f"the parser failed:\n{value}")
    if value in (signal.SIGXCPU, signal.SIGALRM):
        seconds = _cpu_ceiling()
        if seconds.inherited:
            raise AnnotuneError(
                f"libclang was stopped by the CPU-time limit annotune inherited ({seconds.granted}"
                f" s, less than the {PARSE_SECONDS} s it allows a parse)",
                where,
                hint=_INHERITED_HINT,
            )
        raise AnnotuneError(
            f"libclang took more than {PARSE_SECONDS} s of CPU time parsing this file, and was "
            "stopped",
            where,
            hint=_BOMB_HINT,
        )
    raise _out_of_memory(where)


def load_libclang(where: Location) -> None:
    """Load libclang's shared library (once a process), or say why it cannot be: under a
    small address-space limit (`ulimit -v`) its segments cannot be mapped, which is the
    machine's limit, not the source's fault nor annotune's bug."""
    try:
        ci.conf.lib  # noqa: B018
    except ci.LibclangError as error:
        said = str(error).split(". To provide a path")[0]
        soft = limits.inherited_soft(resource.RLIMIT_AS)
        if soft is not None and "map" in said:
            raise AnnotuneError(
                f"libclang cannot be loaded under the address-space limit annotune inherited "
                f"({soft >> 20} MiB): {said}",
                hint=_INHERITED_HINT,
            ) from None
        raise AnnotuneError(
            f"libclang cannot be loaded: {said}", hint="pip install libclang (annotune needs it)"
        ) from None


def _fork_unsafe() -> bool:
    """Whether gRPC may be running in this process, whose fork handlers abort a forked child:
    Ray's, once it is initialized (the tune of several devices), or the `grpc` package's."""
    ray = sys.modules.get("ray")
    initialized = getattr(ray, "is_initialized", None)
    return "grpc" in sys.modules or (callable(initialized) and bool(initialized()))


def _forked(parse: Callable[[], ParsedSource], where: Location) -> tuple[bytes, int]:
    """The child's pickled outcome and the signal that ended it (0: none), forked."""
    load_libclang(where)  # loaded once, here, rather than in every child
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        raise AnnotuneError(f"cannot start the parser: {error.strerror}", where) from None
    if pid == 0:  # the child: never returns
        os.close(read_end)
        code = 70
        try:
            outcome = _outcome(parse)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(outcome)
            code = 0
        finally:
            os._exit(code)  # nothing of the parent's runs: no atexit handler, no flush twice
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C: the child goes too
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return payload, os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def _spawned(parse: Callable[[], ParsedSource], where: Location) -> tuple[bytes, int]:
    """The same as `_forked`, in a fresh interpreter that reads `parse`, pickled, on its
    standard input and writes the outcome on its standard output (`serve_parse`)."""
    script = "from annotune.annotate.source.bounded import serve_parse as s; s()"
    command = [sys.executable, "-c", script]
    try:
        done = subprocess.run(command, input=pickle.dumps(parse), capture_output=True, check=False)
    except OSError as error:
        raise AnnotuneError(f"cannot start the parser: {error.strerror}", where) from None
    return done.stdout, -done.returncode if done.returncode < 0 else 0


def serve_parse() -> None:
    """A spawned parser's body (`_spawned`)."""
    parse = pickle.loads(sys.stdin.buffer.read())
    try:
        outcome = _outcome(parse)
    except BaseException:
        os._exit(70)
    sys.stdout.buffer.write(outcome)
    sys.stdout.buffer.flush()


def _outcome(parse: Callable[[], ParsedSource]) -> bytes:
    """In the child: limit itself, parse, and the pickled outcome ("ok", "error" or "bug");
    running out of memory raises (the child then dies with nothing sent)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    limits.set_limit(resource.RLIMIT_AS, _memory_ceiling().wanted)
    limits.set_limit(resource.RLIMIT_CPU, PARSE_SECONDS, PARSE_SECONDS + 5)
    signal.alarm(2 * PARSE_SECONDS)
    quiet = os.open(os.devnull, os.O_WRONLY)  # libclang's "LLVM ERROR: out of memory"
    os.dup2(quiet, 2)
    try:
        load_libclang(Location("<libclang>", 1, 1))
        outcome: tuple = ("ok", parse())
    except AnnotuneError as error:
        outcome = ("error", (error.message, error.location, error.hint))
    except MemoryError:
        raise
    except Exception:
        outcome = ("bug", traceback.format_exc())
    return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)


_BOMB_HINT = (
    "a macro whose expansion doubles at each level (#define L1 L0 L0, L2 L1 L1, ...) expands "
    "exponentially: no compiler can preprocess it"
)


_INHERITED_HINT = (
    "the limit is the machine's or the job's (ulimit -v, ulimit -t, a batch system's memory "
    "request), not annotune's: raise it, or run annotune where more is allowed"
)


def _memory_ceiling() -> limits.Ceiling:
    """The address space a parse may use: `PARSE_MEMORY` more than this process holds, or
    less where the limit this process inherited is lower."""
    wanted = limits.held_address_space() + PARSE_MEMORY
    return limits.Ceiling(wanted, limits.clamp(resource.RLIMIT_AS, wanted))


def _cpu_ceiling() -> limits.Ceiling:
    return limits.Ceiling(PARSE_SECONDS, limits.clamp(resource.RLIMIT_CPU, PARSE_SECONDS))


def _out_of_memory(where: Location) -> AnnotuneError:
    """One error whether libclang gave up on its own or its process died: under the limit it
    does either, by where the allocation that failed was. Where the limit in force is the one
    annotune inherited, smaller than its own, the error says so: the file need not be at
    fault."""
    ceiling = _memory_ceiling()
    if ceiling.inherited:
        held = limits.held_address_space()
        return AnnotuneError(
            f"libclang ran out of memory parsing this file under the address-space limit "
            f"annotune inherited ({limits.gib(ceiling.granted)} GiB, of which annotune holds "
            f"{limits.gib(held)} GiB; a parse may take {limits.gib(PARSE_MEMORY)} GiB)",
            where,
            hint=_INHERITED_HINT,
        )
    return AnnotuneError(
        f"libclang ran out of memory or failed parsing this file (its limit: "
        f"{PARSE_MEMORY / (1 << 30):g} GiB more than annotune holds)",
        where,
        hint=_BOMB_HINT,
    )
