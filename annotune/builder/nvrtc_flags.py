"""The compile command's flags as NVRTC takes them, in kernel mode.

Kernel mode compiles the kernels with NVRTC, but a program's compile command says how its
device code is compiled: `-D`, `-I`, `-std`, `-maxrregcount`, `--use_fast_math`. Compiled
without them, the kernel tuned is not the program's (another register count, another branch of
an `#ifdef`). So each argument of the command (response files expanded) is one of three:

- **translated**: a flag NVRTC has under its own spelling (`-maxrregcount=32` becomes
  `--maxrregcount=32`, `-isystem DIR` becomes `-I DIR`), in the command's order;
- **host's**: a flag that changes only the host code, the link or the driver (`-O3`,
  `-Xcompiler`, `-o`, `-l`, other sources and objects, the architecture: kernel mode compiles
  for the GPU it measures on), or one that only permits code (`--expt-relaxed-constexpr`,
  `--extended-lambda`, which NVRTC 13 refuses: a variant that needs one fails NVRTC's compile
  and goes to nvcc, with the command's flags), left out and listed, so the user sees what was
  not given;
- **unknown**: any other flag. It may change the device code, so NVRTC is not used: nvcc
  compiles every variant with the command's flags (`cubin_command`), and the reason says which
  flag. Guessing would tune another kernel than the one the program builds.

nvcc's fallback keeps the user's command as written, less its link and output, with `-cubin`
for the GPU: the flags it understands are the program's own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from annotune.builder.compiler import CompilerCommand, cubin_compiler, sm
from annotune.builder.dependencies import command_files
from annotune.core.command import arguments, is_nvcc, resource_report_flags

_INCLUDE_KINDS = ("include_dir", "system_dir", "quote_dir", "after_dir")
_HOST_KINDS = frozenset(
    ("library_dir", "library", "output", "output_dir", "dependency_output", "dependency_target",
     "architecture", "host_compiler", "pass_host", "pass_linker", "pass_nvlink", "language",
     "pass_preprocessor")
)  # fmt: skip
# nvcc's flags NVRTC has under one spelling of its own (the value, when any, kept).
_SAME_MEANING = {
    "-use_fast_math": "--use_fast_math",
    "--use_fast_math": "--use_fast_math",
    "-G": "--device-debug",
    "--device-debug": "--device-debug",
    "-lineinfo": "--generate-line-info",
    "--generate-line-info": "--generate-line-info",
    "-w": "--disable-warnings",
    "--disable-warnings": "--disable-warnings",
}
_WITH_VALUE = {  # name -> NVRTC's name; written NAME=V or NAME V
    "-maxrregcount": "--maxrregcount",
    "--maxrregcount": "--maxrregcount",
    "-ftz": "--ftz",
    "--ftz": "--ftz",
    "-prec-div": "--prec-div",
    "--prec-div": "--prec-div",
    "-prec-sqrt": "--prec-sqrt",
    "--prec-sqrt": "--prec-sqrt",
    "-fmad": "--fmad",
    "--fmad": "--fmad",
    "-std": "-std",
    "--std": "-std",
}
# Flags of the host compile, the driver, the link or the warnings, without a value of their
# own (exact, then by prefix): none changes the device code NVRTC makes.
_HOST_FLAGS = frozenset(
    ("-c", "--compile", "-cubin", "--cubin", "-ptx", "--ptx", "-fatbin", "--fatbin", "-dc",
     "--device-c", "-dw", "-lib", "--lib", "-shared", "--shared", "-link", "--link", "-m64",
     "-m32", "-g", "--debug", "-pg", "-v", "--verbose", "--resource-usage", "-res-usage", "-dlto",
     "--dlink-time-opt", "-MD", "-MMD", "-MP", "-M", "-allow-unsupported-compiler",
     "--allow-unsupported-compiler", "-fopenmp", "-fPIC", "-fpic", "-pthread", "-rdc", "-Xcudafe",
     # only permit code (NVRTC 13 has no such option): what compiles without them is the same
     # program, and a variant that needs them fails NVRTC's compile and goes to nvcc
     "-expt-relaxed-constexpr", "--expt-relaxed-constexpr", "-extended-lambda",
     "--extended-lambda", "-expt-extended-lambda", "--expt-extended-lambda")
)  # fmt: skip
_HOST_PREFIXES = (
    "-O", "--optimize", "-W", "--Werror", "-rdc=", "--rdc=", "--relocatable-device-code=",
    "--default-stream", "-cudart", "--cudart", "--threads", "--cuda-gpu-arch=", "--offload-arch=",
    "--cuda-path=", "-Xcudafe=",
)  # fmt: skip
_HOST_WITH_VALUE = frozenset(
    ("--default-stream", "-cudart", "--cudart", "--threads", "-t", "-Xcudafe", "-rdc")
)


# What nvcc's cubin command leaves out of the user's: the link, the outputs, the architectures
# (the cubin is for the GPU measured on) and the flags that choose another phase.
_NOT_FOR_A_CUBIN = frozenset(
    ("library_dir", "library", "output", "output_dir", "architecture", "dependency_output",
     "dependency_target", "pass_linker", "pass_nvlink")
)  # fmt: skip
_PHASES = frozenset(
    ("-c", "--compile", "-dc", "--device-c", "-lib", "--lib", "-shared", "--shared", "-link",
     "--link", "-ptx", "--ptx", "-fatbin", "--fatbin", "-cubin", "--cubin", "-MD", "-MMD", "-MP")
)  # fmt: skip


@dataclass(frozen=True)
class NvrtcFlags:
    """A compile command read for NVRTC: `options`, NVRTC's spellings in the command's order
    (the include directories apart: `includes`, absolute, in search order); `std` the language
    standard it names ("" for NVRTC's default here); `host`, what was left out as the host's or
    the link's, as written; `unknown`, the first flag that may change the device code and NVRTC
    cannot be given ("" when none: NVRTC can compile as the command would; when not, the rest
    is what nvcc's fallback is given for a command that is not nvcc's)."""

    options: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    std: str = ""
    host: tuple[str, ...] = ()
    unknown: str = ""

    def describe(self) -> str:
        """What the identity line says of the command: the flags given, and those left out."""
        given = [*self.options, *(f"-I{d}" for d in self.includes)]
        given += [f"-std={self.std}"] if self.std else []
        said = ["from the compile command: " + " ".join(given)] if given else []
        said += ["not given to NVRTC: " + " ".join(self.host)] * bool(self.host)
        return "; ".join(said)

    def refusal(self) -> str:
        """Why NVRTC is not used for this command ("" when it can be)."""
        if not self.unknown:
            return ""
        return (
            f"NVRTC cannot be given the compile command's {self.unknown}, which may change the "
            "device code: nvcc compiles every variant with the command's flags"
        )


def nvrtc_flags(argv: Sequence[str]) -> NvrtcFlags:
    """`argv` (a compile command, response files expanded, with its placeholders) read for
    NVRTC; relative include directories are made absolute from the working directory, where
    the builder runs compiles."""
    options: list[str] = []
    includes: list[str] = []
    after: list[str] = []
    host: list[str] = []
    std = ""
    unknown: list[str] = []
    args = list(arguments(argv))
    skip: set[int] = set()
    for position, argument in enumerate(args):
        if position in skip:
            continue
        kind, value, written = argument.kind, argument.value, " ".join(argument.args)
        following = args[position + 1].value if position + 1 < len(args) else None
        if following is not None and ("{" in following or following.startswith("-")):
            following = None  # a placeholder or another flag is no value
        if "{" in value:  # {source}, {output}, {defines}, {includes}: annotune's own
            continue
        if kind == "define":
            options.append(f"-D{value}")
        elif kind == "undefine":
            options.append(f"-U{value}")
        elif kind in _INCLUDE_KINDS:
            path = os.path.join(os.getcwd(), value)
            (after if kind == "after_dir" else includes).append(path)
        elif kind == "forced_include":
            options.append(f"--pre-include={os.path.join(os.getcwd(), value)}")
        elif kind == "pass_ptxas":
            passed = [v for v in value.split(",") if v not in ("-v", "--verbose")]
            options += [f"--ptxas-options={v}" for v in passed]
        elif kind in _HOST_KINDS:
            host.append(written)
        elif kind is not None:  # a kind the table knows that NVRTC has no spelling of
            unknown.append(written)
        elif value.startswith("@"):  # a response file left as written: it cannot be read
            unknown.append(value)
        elif argument.bare:  # another source, an object, a library: the program's link
            host.append(value)
        elif value in _SAME_MEANING:
            options.append(_SAME_MEANING[value])
        elif (name := value.partition("=")[0]) in _WITH_VALUE:
            given = value.partition("=")[2]
            if not given and following is not None and "=" not in value:
                given = following
                skip.add(position + 1)
            if not given:
                unknown.append(value)
                continue
            if _WITH_VALUE[name] == "-std":
                std = given
            else:
                options.append(f"{_WITH_VALUE[name]}={given}")
        elif value in _HOST_WITH_VALUE and following is not None:
            host.append(f"{value} {following}")
            skip.add(position + 1)
        elif value in _HOST_FLAGS or value.startswith(_HOST_PREFIXES):
            host.append(value)
        else:
            unknown.append(value)
    found = (tuple(options), tuple([*includes, *after]), std, tuple(host))
    return NvrtcFlags(*found, unknown=" ".join(unknown[:1]))


NO_FLAGS = NvrtcFlags()
"""A command that gives NVRTC nothing: the preset's, or none."""


def cubin_command(argv: Sequence[str], arch: str | None) -> tuple[str, ...]:
    """An nvcc command (`argv`, response files as written) made to compile the kernel's source
    to a cubin for `arch` ("sm_90"; None: nvcc's default) with ptxas's report: its other
    sources, objects, libraries, outputs and architectures left out, its other flags kept."""
    assert is_nvcc(argv[0])
    kept: list[str] = [argv[0], "-cubin", *([f"-arch={arch}"] if arch else [])]
    kept += resource_report_flags(argv)
    for argument in arguments(argv):
        value = argument.value
        if argument.kind in _NOT_FOR_A_CUBIN or (argument.bare and "{" not in value):
            continue
        if argument.kind is None and value in _PHASES:
            continue
        kept += argument.args
    return (*kept, "-o", "{output}")


def kernel_commands(
    user: CompilerCommand | None, arch: tuple[int, int] | None
) -> tuple[CompilerCommand, NvrtcFlags]:
    """Kernel mode's nvcc cubin command for `arch` and what NVRTC is given, from the user's
    compile command (None, or a preset's name: the preset's cubin command, nothing more).
    Response files are read here, once: their flags are then the command's own, in its key."""
    if user is None or user.preset is not None:
        return cubin_compiler(arch), NO_FLAGS
    expanded = command_files(user.argv).expand(user.argv)
    flags = nvrtc_flags(expanded)
    if is_nvcc(expanded[0]):
        return CompilerCommand(cubin_command(expanded, sm(arch) if arch else None)), flags
    base = cubin_compiler(arch).argv  # another CUDA compiler: nvcc, given what NVRTC is
    at = base.index("{includes}")
    extra = [*flags.options, *(f"-I{d}" for d in flags.includes)]
    extra += [f"-std={flags.std}"] if flags.std else []
    return CompilerCommand((*base[:at], *extra, *base[at:])), flags
