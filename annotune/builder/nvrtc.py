"""NVRTC: kernel-mode variants compiled by NVIDIA's runtime compiler in a pool of processes.

`nvcc -cubin` starts a driver, a host compiler and ptxas for every variant (about a second);
NVRTC compiles the same device code to the same cubin in tens of milliseconds. It is a library,
so compiles run in worker processes (`NvrtcPool`, one per core): a compile that hangs or
crashes takes down its worker, not the session, and the pool is started again. Workers are
started by a fork server, never forked from the session, which has threads; like every such
pool, they import the session's main module, so a script that builds with NVRTC keeps its
work under `if __name__ == "__main__":` (the `annotune` command and `python -m annotune` do).

NVRTC reads device code only: the builder hands it the user's files sliced by
`annotate.device_code` (host code and system headers blanked, lines kept) as copies in the
variant's scratch directory, the main one named by its copy's path, so that every quoted
include, relative spellings included, resolves to a sliced copy exactly as the preprocessor
resolves the original (`Builder` puts the copies' directories first on the include path too).

Compiles ask for `--minimal` (NVRTC leaves out the texture, surface and runtime API
declarations it otherwise parses for every program: conv2d's compile takes 34 ms of CPU, not 41); a
program that needs them fails under it and is compiled again without, in the same worker, so
the outcome depends on the request alone and is cached as such. Its limit: the runtime API's
macros are gone too (`CUDART_CB`; `CUDART_VERSION` stays), so device code that tests one with
`#ifdef` takes the other branch under `--minimal`, unnoticed when that branch compiles.

What NVRTC cannot check is done in the source itself: `value_checks` appends, for each tuned
macro, a check that fails the compile unless the macro has the tuned value at the end of the
translation unit, which is where `verify` reads it with nvcc. A failure of any kind sends the
variant to nvcc, which says why.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from annotune.builder.compiler import CompileResult, _first_error, parse_ptxas, sm
from annotune.builder.nvrtc_flags import NO_FLAGS, NvrtcFlags
from annotune.builder.verify import Tuned

TEST_EXIT_MARKER = "annotune test hook: end the NVRTC worker"
"""Test hook: a worker given a source that contains this text exits at once (os._exit), as a
worker that NVRTC crashed would."""

_TEST_EXIT_STATUS = 70
MINIMAL = "--minimal"
"""NVRTC's option that omits texture, surface and runtime-API declarations; see the module."""
_INSTALL = "pip install cuda-bindings nvidia-cuda-nvrtc"

_nvrtc: ModuleType | None = None  # each worker's NVRTC bindings, imported once
_started: dict[int, ProcessPoolExecutor] = {}  # `start_pool`'s executors, by width
_started_lock = threading.Lock()


@dataclass(frozen=True)
class NvrtcRequest:
    """One compile, as a worker gets it: the main source's `name` (its sliced copy's path:
    quoted includes resolve from its directory, messages name it) and `text` (with the value
    checks), the options, where the cubin goes and how long the compile may take. `instances`:
    template kernels' instances (`ns::k<float, 256>`) NVRTC is to instantiate, and lower to the
    symbols the cubin holds them by."""

    name: str
    text: bytes
    options: tuple[str, ...]
    output: str
    timeout: float
    instances: tuple[str, ...] = ()


@dataclass(frozen=True)
class NvrtcOutcome:
    """What a worker sends back: the log (ptxas's report included), the cubin's sha256 when it
    compiled ("" when not), and each instance asked for with its lowered name."""

    ok: bool
    log: str
    seconds: float
    program: str = ""
    transient: bool = False
    lowered: tuple[tuple[str, str], ...] = ()


def nvrtc_unavailable(arch: tuple[int, int] | None = None) -> str:
    """Why NVRTC cannot compile here (for `arch`, when given); "" when it can."""
    try:
        nvrtc = _bindings()
        error, major, minor = nvrtc.nvrtcVersion()
        if error != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return f"NVRTC cannot be loaded ({error.name}): kernels compile with nvcc"
        error, archs = nvrtc.nvrtcGetSupportedArchs()
    except Exception as error:  # noqa: BLE001 - the package and its library loader say why
        return f"NVRTC is not usable ({error}; {_INSTALL}): kernels compile with nvcc"
    if arch is not None and arch[0] * 10 + arch[1] not in archs:
        return (
            f"NVRTC {major}.{minor} cannot compile for {sm(arch)} (it knows "
            f"sm_{min(archs)} to sm_{max(archs)}): kernels compile with nvcc"
        )
    return ""


def nvrtc_version() -> str:
    """NVRTC's version as people read it: "13.5 (nvidia-cuda-nvrtc 13.5.37)"."""
    error, major, minor = _bindings().nvrtcVersion()
    try:
        package = f" (nvidia-cuda-nvrtc {importlib.metadata.version('nvidia-cuda-nvrtc')})"
    except importlib.metadata.PackageNotFoundError:  # a library from a toolkit install
        package = ""
    return f"{major}.{minor}{package}"


def nvrtc_fingerprint() -> str:
    """What makes this NVRTC this compiler, for cache keys: its version, and the path, size
    and time of the library loaded (a patch release keeps the version NVRTC reports)."""
    from cuda.pathfinder import load_nvidia_dynamic_lib

    path = load_nvidia_dynamic_lib("nvrtc").abs_path or ""
    try:
        status = os.stat(path)
        stamp = f"{status.st_size}:{status.st_mtime_ns}"
    except OSError:
        stamp = ""
    return f"{nvrtc_version()}\0{path}\0{stamp}"


def toolkit_include_dirs() -> list[str]:
    """The CUDA toolkit's header directories (cuda_fp16.h, cuda/std/...), which NVRTC does not
    search by itself; none when no toolkit is found."""
    from cuda.pathfinder import find_nvidia_header_directory

    found = [find_nvidia_header_directory(name) for name in ("cudart", "cccl")]
    return list(dict.fromkeys(d for d in found if d))


HOST_SYSTEM = ("-D__linux__=1", "-D__linux=1", "-D__gnu_linux__=1", "-D__unix__=1", "-D__unix=1")
"""The host system's macros, which nvcc's device pass has (they are its host compiler's) and
NVRTC, compiling for no host, has not: a `#ifdef __linux__` in device-visible code takes the
branch nvcc (and libclang's parse) takes. Linux only; the host architecture's (`__x86_64__`)
are left out, as libcu++ under NVRTC may read them as its own."""


def nvrtc_options(
    arch: tuple[int, int],
    defines: Sequence[str],
    includes: Sequence[str],
    prelude: str,
    command: NvrtcFlags = NO_FLAGS,
) -> list[str]:
    """The options of one variant's compile; `includes` are `-I` flags, in search order;
    `command`: what the compile command gives NVRTC, before the variant's `-D` (which win, as
    `{defines}` after the command's own do), its pre-includes after annotune's prelude."""
    host = HOST_SYSTEM if sys.platform.startswith("linux") else ()
    return [
        f"--gpu-architecture={sm(arch)}",
        MINIMAL,
        f"-std={command.std or 'c++17'}",
        *host,
        f"--pre-include={prelude}",
        *command.options,
        *defines,
        *includes,
        "-Xptxas",
        "-v",
    ]


def value_checks(tuned: Sequence[Tuned]) -> str:
    """Source that fails the compile unless each tuned macro has its value where it ends (the
    end of the translation unit): `#if` for integers, `static_assert` for other numbers, which
    the preprocessor cannot compare."""
    lines = [""]
    for macro in tuned:
        name, value = macro.name, repr(macro.value)
        said = f"annotune: {name} is not the tuned {value} at the end of the translation unit"
        lines += [f"#if !defined({name})", f'#error "{said}"']
        if isinstance(macro.value, int):
            lines += [f"#elif ({name}) != ({value})", f'#error "{said}"']
        else:
            lines += ["#else", f'static_assert(({name}) == ({value}), "{said}");']
        lines.append("#endif")
    return "\n".join(lines) + "\n"


def compile_request(request: NvrtcRequest) -> NvrtcOutcome:
    """Compile one request in a worker: the cubin written to `request.output`. The timeout is
    SIGALRM, whose default action ends the worker even inside NVRTC's C code."""
    if TEST_EXIT_MARKER.encode() in request.text:
        os._exit(_TEST_EXIT_STATUS)
    nvrtc = _nvrtc or _bindings()
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, request.timeout)
    try:
        outcome = _compile(nvrtc, request)
        if not outcome[0] and not outcome[3] and MINIMAL in request.options:
            full = tuple(option for option in request.options if option != MINIMAL)
            outcome = _compile(nvrtc, replace(request, options=full))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return NvrtcOutcome(outcome[0], outcome[1], time.monotonic() - started, *outcome[2:])


def _compile(
    nvrtc: ModuleType, request: NvrtcRequest
) -> tuple[bool, str, str, bool, tuple[tuple[str, str], ...]]:
    """(ok, log, program, transient, lowered) of one NVRTC compile."""
    success = nvrtc.nvrtcResult.NVRTC_SUCCESS
    error, program = nvrtc.nvrtcCreateProgram(request.text, request.name.encode(), 0, [], [])
    if error != success:
        return False, f"NVRTC cannot create the program: {error.name}", "", True, ()
    try:
        for instance in request.instances:
            (error,) = nvrtc.nvrtcAddNameExpression(program, f"&{instance}".encode())
            if error != success:
                return False, f"NVRTC refuses the name {instance}: {error.name}", "", False, ()
        options = [option.encode() for option in request.options]
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        error, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = bytearray(size)  # written into: never `b" " * size`, the shared b" " for 1
        nvrtc.nvrtcGetProgramLog(program, log)
        text = bytes(log).replace(b"\0", b"").decode(errors="replace")  # ptxas's joins with NUL
        if result != success:
            memory = result == nvrtc.nvrtcResult.NVRTC_ERROR_OUT_OF_MEMORY
            return False, text or result.name, "", memory, ()
        error, size = nvrtc.nvrtcGetCUBINSize(program)
        cubin = bytearray(size)
        (error,) = nvrtc.nvrtcGetCUBIN(program, cubin)
        cubin = bytes(cubin)
        if error != success or not size:
            return False, f"NVRTC made no cubin: {error.name}", "", False, ()
        lowered = []
        for instance in request.instances:
            error, name = nvrtc.nvrtcGetLoweredName(program, f"&{instance}".encode())
            if error != success:
                return False, f"NVRTC cannot lower {instance}: {error.name}", "", False, ()
            lowered.append((instance, name.decode()))
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    Path(request.output).write_bytes(cubin)
    return True, text, hashlib.sha256(cubin).hexdigest(), False, tuple(lowered)


def _bindings() -> ModuleType:
    from cuda.bindings import nvrtc

    return nvrtc


def _start_worker() -> None:
    """Load NVRTC once per worker; leave Ctrl-C to the session, which closes the pool; make
    SIGALRM end the worker (the compile timeout)."""
    global _nvrtc
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    _nvrtc = _bindings()


def start_pool(jobs: int) -> None:
    """Start `jobs` NVRTC workers now, in the background, for the next `NvrtcPool` of that
    width to take: a command that will compile kernels calls it before libclang parses the
    source, so that the workers' start (a fork server, a process each, NVRTC loaded in each:
    about a second) is done by the time the first variant is ready. Workers no pool takes end
    with the process."""
    with _started_lock:
        if jobs in _started:
            return
        executor = _executor(jobs)
        _started[jobs] = executor
    for _ in range(jobs):  # each submit while none is idle starts a worker
        executor.submit(int)


def _executor(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("forkserver"),
        initializer=_start_worker,
    )


class NvrtcPool:
    """Worker processes that compile `NvrtcRequest`s, `jobs` at a time; thread-safe.

    A worker that dies (a timeout's SIGALRM, a crash in NVRTC) breaks the whole executor: each
    compile it was running or holding is a `transient` failure (the machine's, not the
    variant's: never cached, retried by the session), and the next compile starts a new one.
    """

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def compile(self, request: NvrtcRequest) -> tuple[CompileResult, str]:
        """The compile's result, as `run_compiler` gives one (ptxas's resources parsed from
        the log), and its program: the cubin's sha256 ("" unless it compiled)."""
        executor = self._current()
        started = time.monotonic()
        try:
            outcome = executor.submit(compile_request, request).result()
        except BrokenProcessPool:
            self._discard(executor)
            seconds = time.monotonic() - started
            said = (
                f"compile timed out after {request.timeout:g} s"
                if seconds >= request.timeout
                else "the NVRTC worker process died"
            )
            return CompileResult(False, seconds, said, {}, True), ""
        if not outcome.ok:
            said = "compile failed: " + _first_error(outcome.log)
            return CompileResult(False, outcome.seconds, said, {}, outcome.transient), ""
        resources = parse_ptxas(outcome.log)
        symbols = dict(outcome.lowered)
        return CompileResult(True, outcome.seconds, resources=resources, symbols=symbols), (
            outcome.program
        )

    def close(self) -> None:
        """Stop the workers: compiles not started are cancelled, those running finish."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                with _started_lock:
                    started = _started.pop(self.jobs, None)
                self._executor = started or _executor(self.jobs)
            return self._executor

    def _discard(self, broken: ProcessPoolExecutor) -> None:
        """Forget a broken executor, once, however many compiles saw it break."""
        with self._lock:
            if self._executor is not broken:
                return
            self._executor = None
        broken.shutdown(wait=False, cancel_futures=True)
