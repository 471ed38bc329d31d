"""`[file.check]`: what the program prints when it computed the right thing, for code the user
must not edit (`annotune.core.output_check`): `expect`, `reject` and `result` regexes and the
`rtol` of `result`'s numbers, each checked where it is written; nothing is evaluated."""

from __future__ import annotations

import math
import re

from annotune.annotate.config.values import table_value
from annotune.core.diagnostics import AnnotuneError
from annotune.core.output_check import RULES, OutputCheck
from annotune.core.toml import Positions

CHECK_KEYS = {*RULES, "rtol"}

_EXAMPLES = {"expect": "'PASS'", "reject": "'FAIL'", "result": "'checksum = (\\S+)'"}


def output_check(entry: dict, where: Positions, at: tuple) -> OutputCheck | None:
    """The entry's `[file.check]` (its keys already known to annotune), or None without one."""
    if "check" not in entry:
        return None
    table = table_value(entry, "check", where, at)
    here = (*at, "check")
    regexes: dict[str, str] = {}
    for rule in RULES:
        value = table.get(rule)
        if value is None:
            continue
        location = where.value((*here, rule))
        if not isinstance(value, str) or not value:
            raise AnnotuneError(
                f"'{rule}' must be a regex in a non-empty string, e.g. {rule} = {_EXAMPLES[rule]}",
                location,
            )
        try:
            re.compile(value, re.MULTILINE)
        except re.error as error:
            raise AnnotuneError(f"invalid {rule} regex: {error}", location) from None
        regexes[rule] = value
    if not regexes:
        raise AnnotuneError(
            "[file.check] needs expect, reject or result: what a correct run prints",
            where.key(here),
            hint="e.g. expect = 'PASS' or result = 'checksum = (\\S+)'",
        )
    rtol = table.get("rtol")
    if rtol is not None:
        location = where.value((*here, "rtol"))
        if isinstance(rtol, bool) or not isinstance(rtol, int | float):
            raise AnnotuneError(f"'rtol' must be a number, not {rtol!r}", location)
        if not (math.isfinite(rtol) and rtol >= 0):
            raise AnnotuneError(f"'rtol' must be a finite number >= 0, not {rtol!r}", location)
        if "result" not in regexes:
            raise AnnotuneError(
                "'rtol' is how far `result`'s numbers may be from the baseline's: give result "
                "too, e.g. result = 'checksum = (\\S+)'",
                where.key((*here, "rtol")),
            )
    return OutputCheck(**regexes, rtol=float(rtol or 0.0))
