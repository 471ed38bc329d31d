"""Compiler commands: templates run without a shell, with a timeout, and nvcc's resource usage.

A command is a list of argument templates. Placeholders, each a whole argument:
`{source}`, `{output}`, `{defines}` (expands to the `-DNAME=V` flags) and `{includes}` (the
`-I` flags annotune needs: its timing header and the source's own directory). Without
`{defines}` or `{includes}`, they are inserted before `{source}`.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from annotune.core.command import (
    arguments,
    is_nvcc,
    knows_options,
    last_output_only,
    template_mistake,
)
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import argument_path
from annotune.core.records import TRANSIENT_ERRNOS, KernelResources
from annotune.core.tools import run_tool

PRESETS: dict[str, tuple[str, ...]] = {
    "nvcc": (
        "nvcc",
        "-O3",
        "-Xptxas",
        "-v",
        "{includes}",
        "{defines}",
        "{source}",
        "-o",
        "{output}",
    ),
    "gcc": ("gcc", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}", "-lm"),
    "g++": ("g++", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}"),
    "nvc": ("nvc", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}"),
    "nvc++": ("nvc++", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}"),
    "cc": ("cc", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}", "-lm"),
    "c++": ("c++", "-O2", "{includes}", "{defines}", "{source}", "-o", "{output}"),
}

_GNU_MODELS = {"omp": ("-fopenmp",), "acc": ("-fopenacc",)}
_NVHPC_MODELS = {"omp": ("-mp",), "acc": ("-acc",)}
MODEL_FLAGS: dict[str, dict[str, tuple[str, ...]]] = {
    "nvcc": {"omp": ("-Xcompiler", "-fopenmp")},  # host code only; nvcc has no OpenACC
    "gcc": _GNU_MODELS,
    "g++": _GNU_MODELS,
    "nvc": _NVHPC_MODELS,
    "nvc++": _NVHPC_MODELS,
    "cc": {"omp": ("-fopenmp",)},  # gcc or clang: both know -fopenmp, not both -fopenacc
    "c++": {"omp": ("-fopenmp",)},
}
"""Per preset, the flags that switch on each directive family ("omp", "acc") a source uses:
without them the compiler ignores the pragmas (an OpenMP program runs on one thread)."""


def preset_argv(name: str, pragmas: Iterable[str] = ()) -> tuple[str, ...]:
    """The preset's template with the flags of `pragmas`, after the optimisation level."""
    template = PRESETS[name]
    flags = [flag for family in sorted(set(pragmas)) for flag in MODEL_FLAGS[name].get(family, ())]
    return template[:2] + tuple(flags) + template[2:]


@dataclass(frozen=True)
class CompilerCommand:
    """A compile command template; `argv` is what `describe()` shows and what keys the cache.

    `preset` names the preset it came from: a preset's flags for OpenMP and OpenACC follow the
    source (`for_pragmas`), a command the user wrote out is run as written.
    """

    argv: tuple[str, ...]
    preset: str | None = None

    def __post_init__(self) -> None:
        if not self.argv:
            raise AnnotuneError("the compile command is empty")
        mistake = template_mistake(self.argv)  # a config's is located when it is read
        if mistake is not None:
            raise AnnotuneError(mistake[1])

    @classmethod
    def parse(cls, text: str) -> CompilerCommand:
        """A preset name (`nvcc`, `gcc`, ...) or a command line split like a shell would."""
        if text in PRESETS:
            return cls(PRESETS[text], preset=text)
        try:
            argv = tuple(shlex.split(text))
        except ValueError as error:
            raise AnnotuneError(f"cannot split the compile command: {error}") from None
        return cls(_with_defaults(argv))

    @classmethod
    def from_config(cls, argv: Sequence[str]) -> CompilerCommand:
        """A config's `compile` as `RunSettings` holds it: one item is a preset name or a
        whole template, as on the command line; more are the argv."""
        return cls.parse(argv[0] if len(argv) == 1 else shlex.join(argv))

    def render(
        self, source: Path, output: Path, defines: list[str], includes: list[str]
    ) -> list[str]:
        """The command that compiles `source` to `output`. Of several `-o`, a compiler that
        takes gcc's or nvcc's options is given the last alone, the one it would keep
        (`last_output_only`): annotune adds `-MD` and runs it with `-E`, which refuse more."""
        expanded: list[str] = []
        for arg in self.argv:
            if arg == "{defines}":
                expanded.extend(defines)
            elif arg == "{includes}":
                expanded.extend(f"-I{d}" for d in includes)
            else:
                expanded.append(
                    arg.replace("{source}", argument_path(source)).replace(
                        "{output}", argument_path(output)
                    )
                )
        return last_output_only(expanded) if knows_options(expanded[0]) else expanded

    def describe(self) -> str:
        return shlex.join(self.argv)

    def for_pragmas(self, pragmas: Iterable[str]) -> CompilerCommand:
        """This command for a source using these directive families (`Problem.pragmas`)."""
        if self.preset is None:
            return self
        return CompilerCommand(preset_argv(self.preset, pragmas), preset=self.preset)


def _with_defaults(argv: tuple[str, ...]) -> tuple[str, ...]:
    if "{source}" not in argv:
        return argv
    at = argv.index("{source}")
    extra = tuple(p for p in ("{includes}", "{defines}") if p not in argv)
    return argv[:at] + extra + argv[at:]


def default_compiler(language: str, pragmas: Iterable[str] = ()) -> CompilerCommand:
    """nvcc for CUDA; for C and C++ nvc/nvc++ where installed, else gcc/g++ (on the host).

    `pragmas` are the directive families the source uses ("omp", "acc"): each gets its flag
    (`MODEL_FLAGS`), so that an OpenMP program runs on its threads, not on one.
    """
    if language == "cuda":
        return CompilerCommand.parse("nvcc").for_pragmas(pragmas)
    preferred = ("nvc", "gcc", "cc") if language == "c" else ("nvc++", "g++", "c++")
    chosen = next((name for name in preferred if shutil.which(name)), preferred[1])
    return CompilerCommand.parse(chosen).for_pragmas(pragmas)


_MACHINE_FAILURES = ("No space left on device", "Cannot allocate memory", "out of memory")


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    seconds: float
    error: str = ""
    resources: dict[str, KernelResources] = field(default_factory=dict)
    transient: bool = False
    symbols: dict[str, str] = field(default_factory=dict)  # a template kernel's, by kernel


def run_compiler(argv: list[str], timeout: float) -> CompileResult:
    """Run one compile; failure (exit code, timeout, missing compiler) is data, not an exception.

    A failure that is the machine's rather than the source's (the compiler killed by a signal,
    out of disk or memory, a timeout under load) is `transient`: it is not cached.
    """
    done = run_tool(argv, timeout=timeout)
    seconds = done.seconds
    if done.timed_out:
        return CompileResult(False, seconds, f"compile timed out after {timeout:g} s", {}, True)
    if done.returncode is None:
        said = f"cannot run {argv[0]}: {done.strerror}"
        return CompileResult(False, seconds, said, {}, done.errno in TRANSIENT_ERRNOS)
    log = done.output
    if done.returncode < 0:
        said = f"the compiler was killed by signal {-done.returncode}"
        return CompileResult(False, seconds, said, {}, True)
    if done.returncode != 0:
        transient = any(sign in log for sign in _MACHINE_FAILURES)
        return CompileResult(False, seconds, "compile failed: " + _first_error(log), {}, transient)
    return CompileResult(True, seconds, resources=parse_ptxas(log))


def _first_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line[:500]
    return (lines[-1] if lines else "no output")[:500]


_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Per-kernel registers, shared memory and spills from `-Xptxas -v` output."""
    found: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        if (match := _ENTRY.search(line)) or (match := _PROPERTIES.search(line)):
            current = match.group(1)
            found.setdefault(current, {})
        elif current and (match := _FRAME.search(line)):
            found[current].update(
                stack_bytes=int(match.group(1)),
                spill_stores=int(match.group(2)),
                spill_loads=int(match.group(3)),
            )
        elif current and (match := _USED.search(line)):
            found[current]["registers"] = int(match.group(1))
            smem = _SMEM.search(match.group(2))
            found[current]["shared_bytes"] = int(smem.group(1)) if smem else 0
    return {name: KernelResources(**values) for name, values in found.items()}


def cubin_compiler(compute_capability: tuple[int, int] | None) -> CompilerCommand:
    """nvcc making a cubin for a GPU of this compute capability, with ptxas's resource report.

    A cubin runs only on its own architecture (and later minor versions of it), so the command
    is made from the device the runner measures on: `backend.compute_capability()`. None gives
    nvcc's default architecture: `--compile-only` with none named, where nothing runs the cubin.
    """
    nvcc, *rest = PRESETS["nvcc"]
    arch = () if compute_capability is None else (f"-arch={sm(compute_capability)}",)
    return CompilerCommand((nvcc, "-cubin", *arch, *rest))


def with_arch(command: CompilerCommand, compute_capability: tuple[int, int]) -> CompilerCommand:
    """`command` compiling for one GPU architecture (`-arch=sm_XY` after the compiler's name):
    how `--compile-only` checks variants for a GPU this machine lacks. The result is run as
    written (no preset), so give it a command that `for_pragmas` has already completed.

    AnnotuneError when the command is not nvcc, or already names an architecture (nvcc would
    refuse the second, or the user's would be silently overridden).
    """
    arch = sm(compute_capability)
    compiler, *rest = command.argv
    if not is_nvcc(compiler):
        raise AnnotuneError(f"cannot compile for {arch}: the compile command runs {compiler}")
    named = [a.args for a in arguments(command.argv) if a.kind == "architecture"]
    if named:
        raise AnnotuneError(
            f"cannot compile for {arch}: the compile command already names an architecture "
            f"({' '.join(named[0])})",
            hint="drop one of the two",
        )
    return CompilerCommand((compiler, f"-arch={arch}", *rest))


def sm(compute_capability: tuple[int, int]) -> str:
    """The architecture name nvcc knows a compute capability by: (9, 0) is "sm_90"."""
    major, minor = compute_capability
    return f"sm_{major}{minor}"
