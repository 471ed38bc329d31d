"""Paths as a script gives them: a `str` or a `Path`, or None for "not given"."""

from __future__ import annotations

from pathlib import Path


def optional_path(value: str | Path | None) -> Path | None:
    """`value` as a Path; None stays None (the command's default applies)."""
    return None if value is None else Path(value)
