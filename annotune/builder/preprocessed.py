"""The program a configuration compiles to, as the compiler's preprocessor reads it.

Two configurations can be the same program: a tunable used only in an inactive `#if` branch,
or one that matters only for some values of another (a tile size when tiling is off). Their
preprocessed sources are then byte for byte the same, and measuring both would spend a
measurement on noise. So each compiled variant's source is run preprocess-only with its own
command, and the text is hashed without what differs between identical programs: line
markers and the variant's scratch directory (where `__FILE__` of a rewritten copy points).

nvcc preprocesses a `.cu` once per side: device code as the command's architecture sees it
(`__CUDA_ARCH__` defined), host code without it. Both are hashed, so a value used only on one
side still tells two programs apart.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from annotune.builder.compiler import run_compiler
from annotune.builder.verify import preprocess_command

_NVCC = re.compile(r"nvcc(?:-[\d.]+)?")
_HOST_SIDE = ("-Xcompiler", "-U__CUDA_ARCH__,-U__CUDA_ARCH_LIST__")
_LINE_MARKER = re.compile(rb"^[ \t]*#(?:[ \t]*line)?[ \t]+\d+.*$\n?", re.MULTILINE)


def program_digest(
    argv: Sequence[str], source: str, output: Path, scratch: Path, timeout: float
) -> tuple[str, float]:
    """A hash of what the compiler reads when `argv` (a compile of `source` whose `{output}`
    is rendered as `output`) runs, and the seconds it took; "" when the preprocessor failed,
    which makes the variant its own program."""
    commands = [preprocess_command(argv, source)]
    if _NVCC.fullmatch(os.path.basename(argv[0])):
        commands.append([*commands[0], *_HOST_SIDE])
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
