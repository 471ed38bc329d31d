"""Claims: how several tunes of one study share the work. A tune claims a configuration before
measuring it (`take`), and the others wait for its measurement instead of taking their own. A
claim lapses when its owner's process is gone (on this host) or its lifetime has passed
(`stands`); recording the configuration, or releasing it, ends it."""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from annotune.results.conversions import checked_row, finite, shown
from annotune.results.keys import now


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: one tune (`token`), in a process on a host. `started` is the
    process's start time as the OS gives it ("" where it does not), so that a reused pid is
    not mistaken for the tune that died."""

    token: str
    host: str
    pid: int
    started: str

    @classmethod
    def here(cls) -> Owner:
        """A new owner: a tune in this process."""
        pid = os.getpid()
        return cls(secrets.token_hex(8), socket.gethostname(), pid, _process_started(pid))


def take(
    conn: sqlite3.Connection,
    path: Path,
    study_id: int,
    key: str,
    owner: Owner,
    expires: float,
    current: float,
) -> bool:
    """Claim configuration `key` of the study for `owner` until `expires` (a `time.time()`),
    in the transaction `conn` holds; False when it is measured already or another tune's claim
    on it stands at `current`."""
    measured = conn.execute(
        "SELECT 1 FROM measurements WHERE study_id = ? AND config_key = ?", (study_id, key)
    ).fetchone()
    if measured is not None:
        return False
    holder = conn.execute(
        "SELECT token, host, pid, pid_started, expires FROM claims"
        " WHERE study_id = ? AND config_key = ?",
        (study_id, key),
    ).fetchone()
    if holder is not None:
        with checked_row(path, "claims", f"of configuration {key}"):
            check_claim(holder)
    if holder is not None and stands(holder, owner, current):
        return False
    conn.execute(
        "INSERT OR REPLACE INTO claims (study_id, config_key, token, host, pid,"
        " pid_started, claimed, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            study_id,
            key,
            owner.token,
            owner.host,
            owner.pid,
            owner.started,
            now(),
            expires,
        ),
    )
    return True


def check_claim(holder: tuple) -> None:
    """A stored claim's (token, host, pid, pid_started, expires), every column checked."""
    token, host, pid, started, expires = holder
    for name, value in (("token", token), ("host", host), ("pid_started", started)):
        if not isinstance(value, str):
            raise ValueError(f"'{name}' is {shown(value)}, not text")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
        raise ValueError(f"'pid' is {shown(pid)}, not a process id")
    finite(expires, "expires")


def stands(holder: tuple, owner: Owner, current: float) -> bool:
    """Whether another tune's claim (token, host, pid, pid_started, expires) still holds at
    `current` (a `time.time()`): not `owner`'s own, not past its lifetime, and its process
    alive. A claim of another tune of this very process was left by one that ended (annotune
    runs one tune at a time)."""
    token, host, pid, started, expires = holder
    if token == owner.token or expires <= current:
        return False
    if host != owner.host:
        return True  # its process cannot be asked from here: the lifetime decides
    return pid != owner.pid and _running(pid, started)


def _running(pid: int, started: str) -> bool:
    """Whether process `pid` (POSIX), started at `started` when that is known, still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    now_started = _process_started(pid)
    return not (started and now_started) or now_started == started


def _process_started(pid: int) -> str:
    """When process `pid` started, in clock ticks since boot (Linux's /proc), "" elsewhere:
    with the pid it names one process, even after the pid is reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 else ""
