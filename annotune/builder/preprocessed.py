"""The program a configuration compiles to, as the compiler's preprocessor reads it.

Two configurations can be the same program: a tunable used only in an inactive `#if` branch,
or one that matters only for some values of another (a tile size when tiling is off). Their
preprocessed sources are then byte for byte the same, and measuring both would spend a
measurement on noise. So each compiled variant's source is run preprocess-only with its own
command, and the text is hashed without what differs between identical programs: line
markers and the variant's scratch directory (where `__FILE__` of a rewritten copy points).
Every source the command compiles is read, not only the tuned one: a `-D` value used only in
another file of the command (`{source} utils/lib.c`) still makes another program.

nvcc preprocesses a `.cu` once per side: device code as the command's first architecture sees
it (`__CUDA_ARCH__` defined), host code without it. Both are hashed, and the device side again
for each other architecture the command names, so a value used only on one side, or only for
one architecture, still tells two programs apart.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from annotune.builder.compiler import run_compiler
from annotune.builder.verify import preprocess_command, source_inputs
from annotune.core.command import architectures, is_nvcc

_HOST_SIDE = ("-Xcompiler", "-U__CUDA_ARCH__,-U__CUDA_ARCH_LIST__")
_LINE_MARKER = re.compile(rb"^[ \t]*#(?:[ \t]*line)?[ \t]+\d+.*$\n?", re.MULTILINE)


def _device_side(arch: str) -> tuple[str, str]:
    """nvcc's device pass preprocessed for another architecture of the command."""
    return ("-Xcompiler", f"-U__CUDA_ARCH__,-D__CUDA_ARCH__={arch}0")


def program_digest(
    argv: Sequence[str], source: str, output: Path, scratch: Path, timeout: float
) -> tuple[str, float]:
    """A hash of what the compiler reads when `argv` (a compile of `source` whose `{output}`
    is rendered as `output`) runs, and the seconds it took; "" when the preprocessor failed,
    which makes the variant its own program."""
    inputs = dict.fromkeys([source, *source_inputs(argv)])
    commands = [preprocess_command(argv, path) for path in inputs]
    if is_nvcc(argv[0]):
        archs = architectures(argv)
        if archs is None:  # `-arch=all`, `native`: which device passes there are is unknown
            return "", 0.0
        commands = [
            [*command, *side]
            for command in commands
            for side in ((), _HOST_SIDE, *(_device_side(arch) for arch in archs[1:]))
        ]
    h = hashlib.sha256()
    seconds = 0.0
    scratch_bytes = os.fsencode(os.path.abspath(scratch))
    for command in commands:
        done = run_compiler(command, timeout)
        seconds += done.seconds
        try:
            text = output.read_bytes() if done.ok else None
        except OSError:
            text = None
        finally:
            output.unlink(missing_ok=True)
        if text is None:
            return "", seconds
        text = _LINE_MARKER.sub(b"", text).replace(scratch_bytes, b"<variant>")
        h.update(hashlib.sha256(text).digest())
    return h.hexdigest(), seconds
