"""The device code of a CUDA program as a record: per user file, the spans NVRTC must not see,
and the prelude it is compiled with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from annotune.annotate.device_code.preludes import GLIBC_PRELUDE, NVRTC_PRELUDE

Span = tuple[int, int, int, int]
"""(start_line, start_column, end_line, end_column), 1-based, the end excluded. Columns count
bytes, as libclang's do."""


@dataclass(frozen=True)
class DeviceCode:
    """Per user file (the absolute paths of Problem.files): the spans NVRTC must not see.

    Every user file has an entry, sorted spans that do not overlap, empty when NVRTC may see
    all of it.
    """

    spans: Mapping[str, tuple[Span, ...]]
    libcuxx: bool = True  # a user file includes a header that includes libcu++'s <cstdint>

    @property
    def prelude(self) -> str:
        """What NVRTC is to pre-include for this code: glibc's 64-bit types unless libcu++,
        which declares them otherwise, is included."""
        return NVRTC_PRELUDE if self.libcuxx else GLIBC_PRELUDE

    def slice(self, file: str, text: bytes) -> bytes:
        """`text` (the file's bytes, or a variant's whose `#define` values were rewritten) with
        each span overwritten by spaces, line ends kept. A span's first and last lines are
        code, never a rewritten directive, so its columns hold; a line inside it goes whole.
        A file without spans comes back unchanged."""
        spans = self.spans.get(os.path.abspath(file))
        if not spans:
            return text
        lines = text.split(b"\n")
        for first, start, last, end in spans:
            for number in range(first, min(last, len(lines)) + 1):
                row = lines[number - 1]
                lines[number - 1] = _blanked(
                    row,
                    start - 1 if number == first else 0,
                    end - 1 if number == last else len(row),
                )
        return b"\n".join(lines)


def _blanked(row: bytes, start: int, end: int) -> bytes:
    end = min(end, len(row) - row.endswith(b"\r"))
    if start >= end:
        return row
    return row[:start] + b" " * (end - start) + row[end:]
