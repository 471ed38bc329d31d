"""Resource limits annotune sets on its own children, clamped to what it inherited.

A process may lower its limits but never raise one above the hard limit it was given: on a
login node or in a batch job (`ulimit -v 4194304`) asking for more fails, and the failure must
not read as the input's fault. So each limit is the smaller of what annotune wants and what the
machine allows, and the caller learns which one won (`Ceiling.inherited`), to say so when the
child then runs out.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ceiling:
    """One limit as set: what annotune wanted and what it got (both soft limits)."""

    wanted: int
    granted: int

    @property
    def inherited(self) -> bool:
        """Whether the limit the process inherited, not annotune's own, is the one in force."""
        return self.granted < self.wanted


def inherited_hard(kind: int) -> int | None:
    """The hard limit of `kind` (`resource.RLIMIT_*`) this process holds; None: unlimited."""
    hard = resource.getrlimit(kind)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def inherited_soft(kind: int) -> int | None:
    """The soft limit of `kind` in force for this process (what `ulimit -v` sets for
    RLIMIT_AS); None: unlimited."""
    soft = resource.getrlimit(kind)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def clamp(kind: int, wanted: int) -> int:
    """`wanted`, or the inherited hard limit of `kind` when that is smaller."""
    hard = inherited_hard(kind)
    return wanted if hard is None else min(wanted, hard)


def set_limit(kind: int, soft: int, hard: int | None = None) -> Ceiling:
    """Set `kind` to `soft` (and `hard`, by default the same), each clamped to the inherited
    hard limit, in this process: call it in a child, before it does the bounded work."""
    granted = clamp(kind, soft)
    resource.setrlimit(kind, (granted, max(granted, clamp(kind, soft if hard is None else hard))))
    return Ceiling(soft, granted)


def held_address_space() -> int:
    """The bytes of address space this process holds now (its virtual size)."""
    pages = int(Path("/proc/self/statm").read_text().split()[0])
    return os.sysconf("SC_PAGE_SIZE") * pages


def gib(size: int) -> str:
    """`size` bytes in GiB, as a message shows it: "4", "1.5"."""
    return f"{size / (1 << 30):.3g}"
