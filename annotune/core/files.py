"""Writing the user's files safely: never a half-written file, whoever reads it and when."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file unique to this call beside `path`, then rename it over
    `path`: readers see the old file or the new one, even with many writers (`make -j`).

    The new file keeps the old one's permissions, else gets what `open()` would give (0666
    less the umask): mkstemp alone would leave it readable by its owner only.
    """
    mode = _file_mode(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask
