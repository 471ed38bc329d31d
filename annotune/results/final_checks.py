"""Final checks kept with their study, so that a rerun that measures nothing again does not
check again either.

A final check's verdict follows from the study's measurements (which contenders, which
baseline) and from how it was asked for (the rounds allowed, the smallest speedup claimed, the
objective): `check_key` is a digest of all of them. A rerun whose every measurement is reused
asks for the same key and reads the verdict back; any new measurement, another `--recheck` or
`--recheck-rounds`, and the key differs. Starting a study over, or forgetting its failures,
forgets its final checks too.

What is stored is the verdict's JSON, read back bounded and checked by the caller
(`session.recheck.Verdict.from_json`): a row that is not a verdict is a miss, never an error,
since the check can always be run again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

TABLE = """
CREATE TABLE final_checks (
    study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
    check_key TEXT NOT NULL,
    verdict_json TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (study_id, check_key)
)
"""

_LARGEST = 1 << 20  # a verdict is a few hundred bytes: a larger row is no verdict of ours


def check_key(
    baseline: str, contenders: Sequence[str], *, rounds: int, min_speedup: float, objective: str
) -> str:
    """The digest a final check is stored under: the configuration keys of the baseline and
    the contenders (in order) and how the check was asked for."""
    asked = [baseline, list(contenders), rounds, repr(float(min_speedup)), objective]
    return hashlib.sha256(json.dumps(asked).encode()).hexdigest()


def stored(conn: sqlite3.Connection, study_id: int, key: str) -> tuple[dict, str] | None:
    """The verdict stored under `key` and when it was stored; None when there is none, the
    row is not a JSON object, or the file has no such table (an older read-only database)."""
    try:
        row = conn.execute(
            "SELECT verdict_json, created FROM final_checks WHERE study_id = ? AND check_key = ?",
            (study_id, key),
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or not isinstance(row[0], str) or len(row[0]) > _LARGEST:
        return None
    try:
        data = json.loads(row[0])
    except (ValueError, RecursionError):
        return None
    return (data, str(row[1])) if isinstance(data, dict) else None


def store(conn: sqlite3.Connection, study_id: int, key: str, verdict: Mapping[str, Any]) -> None:
    """Keep `verdict` under `key`, replacing one stored before, in the transaction `conn`
    holds."""
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    conn.execute(
        "INSERT OR REPLACE INTO final_checks (study_id, check_key, verdict_json, created)"
        " VALUES (?, ?, ?, ?)",
        (study_id, key, json.dumps(dict(verdict), sort_keys=True), created),
    )


def forget(conn: sqlite3.Connection, study_id: int) -> None:
    """Drop the study's final checks (its measurements start over, or lose their failures)."""
    conn.execute("DELETE FROM final_checks WHERE study_id = ?", (study_id,))
