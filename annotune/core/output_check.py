"""What a program prints when it computed the right thing, for code the user must not edit: a
config's `[file.check]` rules, applied by program mode to every run's output (stdout, then
stderr), the baseline's included.

* `expect`: a regex the output must match (`re.search`, multiline), e.g. "PASS";
* `reject`: a regex it must not match, e.g. "FAIL|error";
* `result`: a regex whose captures (every match's groups, the whole match when it has none)
  are compared with the baseline run's: numbers within `rtol` (0: exact), else as text; a
  different count of captures is a mismatch, and matching nothing is itself a failure.

A run that fails a rule printed the wrong output: a variant that computes less (a block size
whose grid no longer covers the problem) is invalid, never a winner. Each message says which
rule failed and shows the offending line, cut to `LINE_CHARS`. Nothing from the config is ever
evaluated: the rules are regexes, compiled once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

LINE_CHARS = 120
"""How much of an offending line a message shows."""

MAX_CAPTURES = 10_000
"""The most values `result` may capture in one run: they are kept with the baseline's
measurement, and a regex matching every number of a large output is a mistake to narrow."""

RULES = ("expect", "reject", "result")


@dataclass(frozen=True)
class OutputCheck:
    """A config's `[file.check]`; ValueError when a regex does not compile or `rtol` is not a
    finite number >= 0 (the config reader says so first, at the value)."""

    expect: str | None = None
    reject: str | None = None
    result: str | None = None
    rtol: float = 0.0
    _patterns: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.rtol, bool) or not (math.isfinite(self.rtol) and self.rtol >= 0):
            raise ValueError("the check's rtol must be a finite number >= 0")
        patterns = {}
        for rule in RULES:
            regex = getattr(self, rule)
            if regex is not None:
                try:
                    patterns[rule] = re.compile(regex, re.MULTILINE)
                except re.error as error:
                    raise ValueError(f"invalid {rule} regex: {error}") from None
        if not patterns:
            raise ValueError("a check needs expect, reject or result")
        object.__setattr__(self, "_patterns", patterns)

    def to_json(self) -> dict:
        """The rules as written: part of the study key (another rule is another study)."""
        data: dict = {rule: getattr(self, rule) for rule in RULES if getattr(self, rule)}
        if self.result is not None:
            data["rtol"] = self.rtol
        return data

    def described(self) -> str:
        """How the report names the rules: "expect 'PASS', reject 'FAIL'"."""
        said = [f"{rule} {_regex(getattr(self, rule))}" for rule in RULES if getattr(self, rule)]
        if self.result is not None and self.rtol:
            said.append(f"rtol {self.rtol:g}")
        return ", ".join(said)

    def judge(self, output: str) -> tuple[str, tuple[str, ...] | None]:
        """Why `output` fails `expect` or `reject`, or the captures of `result` cannot be
        compared ("" when it passes), and those captures (None without a `result` rule)."""
        expect = self._patterns.get("expect")
        if expect is not None and expect.search(output) is None:
            last = _last_line(output)
            shown = f"its last line: {_shown(last)}" if last else "it printed nothing"
            return f"expect {_regex(self.expect)}: nothing in the output matches ({shown})", None
        reject = self._patterns.get("reject")
        found = reject.search(output) if reject is not None else None
        if found is not None:
            line = _shown(_line_of(output, found))
            return f"reject {_regex(self.reject)} matches line {line}", None
        result = self._patterns.get("result")
        if result is None:
            return "", None
        captures: list[str] = []
        for match in result.finditer(output):
            captures.extend(
                (g or "" for g in match.groups()) if result.groups else (match.group(),)
            )
            if len(captures) > MAX_CAPTURES:
                return (
                    f"result {_regex(self.result)} captures more than {MAX_CAPTURES:,} values: "
                    "narrow the regex to the lines that hold the result",
                    None,
                )
        if not captures:
            last = _last_line(output)
            shown = f"its last line: {_shown(last)}" if last else "it printed nothing"
            return f"result {_regex(self.result)}: nothing in the output matches ({shown})", None
        return "", tuple(captures)

    def compare(self, captures: tuple[str, ...], reference: tuple[str, ...]) -> str:
        """Why `captures` differ from the baseline's `reference` ("" when they agree)."""
        if len(captures) != len(reference):
            return (
                f"result {_regex(self.result)} captured {len(captures)} value(s), the baseline "
                f"{len(reference)}"
            )
        for index, (value, expected) in enumerate(zip(captures, reference, strict=True)):
            if not _same(value, expected, self.rtol):
                within = f" (rtol {self.rtol:g})" if self.rtol else ""
                return (
                    f"result {_regex(self.result)}: capture {index + 1} is {_shown(value)}, the "
                    f"baseline's {_shown(expected)}{within}"
                )
        return ""


def _same(value: str, expected: str, rtol: float) -> bool:
    """Numbers (where both parse as finite floats) within `rtol` of the baseline's, else the
    same text."""
    a, b = _number(value), _number(expected)
    if a is None or b is None:
        return value == expected
    return abs(a - b) <= rtol * abs(b)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _line_of(output: str, match: re.Match) -> str:
    start = output.rfind("\n", 0, match.start()) + 1
    end = output.find("\n", match.start())
    return output[start : end if end >= 0 else len(output)].strip()


def _last_line(output: str) -> str:
    for line in reversed(output.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def _regex(regex: str | None) -> str:
    """A regex as the config writes it (a literal string: backslashes as they are)."""
    return f"'{regex}'"


def _shown(text: str) -> str:
    return repr(text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + "...")
