"""Size-aware headers: the tuned values of a source for several problem sizes, one header.

ISAAC's point (input-aware tuning, ../shared/papers) is that the best parameters change with
the input shape; a header tuned for one size leaves that on the table. `annotune tune --sizes
N=512,1024,4096` tunes each size and writes one header that selects per size:

- at compile time, an `#if` chain on the size macro: the values of the tuned (or predicted)
  size nearest to it in log2, so 700 takes 512's values and 800 takes 1024's (the boundary is
  the geometric mean, compared exactly as `N * N < a * b`; a tie goes to the larger size);
  a size macro not defined before the header means the source's default size;
- at run time, for a size known only then (a program argument), a generated `static inline`
  function that returns every parameter's value for a size, by the same rule.

The entries are also written into the header's comment as one JSON line, so `annotune predict
--size ... --write` can add a predicted size to a committed header without the database.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from annotune.core.diagnostics import AnnotuneError
from annotune.emit import PREDICTED, _define, _guard, _ms, _template

if TYPE_CHECKING:
    from annotune.annotate.problem import Problem
    from annotune.core.records import Number

SIZE_TEMPLATE = "size_header.h.j2"
MARKER = "annotune-sizes:"
_ENTRIES_LINE = re.compile(r"^ \* " + re.escape(MARKER) + r" (\{.*\})$", re.MULTILINE)
_INT32 = 2**31 - 1


@dataclass(frozen=True)
class SizeEntry:
    """One problem size's values: measured by a tune (its figures), or `predicted` by the
    model over parameters x size (`annotune predict --size`), never measured."""

    size: int
    params: Mapping[str, Number]
    predicted: bool = False
    measurements: int = 0
    default_time: float | None = None
    best_time: float | None = None
    speedup: str = ""
    environment: str = ""  # what its best ran under, when that differs between sizes

    def to_json(self) -> dict:
        extra = {"environment": self.environment} if self.environment else {}
        return {
            **extra,
            "size": self.size,
            "params": dict(self.params),
            "predicted": self.predicted,
            "measurements": self.measurements,
            "default_time": _rounded(self.default_time),
            "best_time": _rounded(self.best_time),
            "speedup": self.speedup,
        }


@dataclass(frozen=True)
class SizeTable:
    """What a size-aware header holds: the size's name, the size a compile without it gets
    (`default_size`; why, in `default_reason`), and one entry per size, smallest first."""

    name: str
    default_size: int
    default_reason: str
    entries: tuple[SizeEntry, ...] = field(default_factory=tuple)
    environment: str = ""  # what the measured entries ran under: "OMP_NUM_THREADS=4, ..."

    def __post_init__(self) -> None:
        sizes = [e.size for e in self.entries]
        if not sizes:
            raise ValueError("a size table needs at least one entry")
        if sizes != sorted(set(sizes)):
            raise ValueError(f"sizes must be distinct and increasing: {sizes}")

    def nearest(self, size: float) -> SizeEntry:
        """The entry whose size is nearest to `size` in log2; a tie goes to the larger."""
        chosen = self.entries[0]
        for lower, upper in zip(self.entries, self.entries[1:], strict=False):
            chosen = upper if size * size >= lower.size * upper.size else lower
            if chosen is lower:
                break
        return chosen

    def with_entry(self, entry: SizeEntry) -> SizeTable:
        """This table with `entry` added, or replacing the entry of its size."""
        kept = [e for e in self.entries if e.size != entry.size]
        entries = tuple(sorted([*kept, entry], key=lambda e: e.size))
        return dataclasses.replace(self, entries=entries)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "default_size": self.default_size,
            "default_reason": self.default_reason,
            "entries": [e.to_json() for e in self.entries],
            "environment": self.environment,
        }


def render_size_header(
    problem: Problem,
    table: SizeTable,
    *,
    device: str,
    space_size: int | None,
    tool_version: str,
) -> str:
    """The size-aware header of `problem` (read with its size fixed or not: the size
    parameter itself is never defined by the header). ValueError when an entry does not give
    a value for exactly the tuned parameters."""
    tuned = [p for p in problem.params if p.origin != "size"]
    names = [p.name for p in tuned]
    for entry in table.entries:
        if set(entry.params) != set(names):
            raise ValueError(
                f"the entry for {table.name} = {entry.size} must name every parameter "
                f"{names}, not {sorted(entry.params)}"
            )
    guard = _guard(problem.source)
    stem = guard.removeprefix("ANNOTUNE_TUNED_").removesuffix("_H").lower()
    branches = []
    for index, entry in enumerate(table.entries):
        upper = table.entries[index + 1].size if index + 1 < len(table.entries) else None
        branches.append(
            {
                "size": entry.size,
                "below": None if upper is None else entry.size * upper,
                "predicted": entry.predicted,
                "defines": [_define(p, entry.params[p.name], problem.source.name) for p in tuned],
                "values": [p.literal(entry.params[p.name]) for p in tuned],
            }
        )
    return (
        _template()
        .environment.get_template(SIZE_TEMPLATE)
        .render(
            source=problem.source.name,
            device=device,
            tool_version=tool_version,
            space_size="unknown" if space_size is None else f"{space_size}",
            environment=table.environment,
            name=table.name,
            table=table,
            summaries=[_summary(table.name, e) for e in table.entries],
            marker=MARKER,
            entries_json=json.dumps(table.to_json(), sort_keys=True),
            guard=guard,
            size_macro=f"ANNOTUNE_{stem.upper()}_SIZE",
            struct=f"annotune_{stem}_params",
            function=f"annotune_{stem}_params_for",
            fields=[
                (field, _c_type([e.params[p.name] for e in table.entries]))
                for field, p in zip(_field_names(names), tuned, strict=True)
            ],
            branches=branches,
        )
    )


def read_size_table(text: str, origin: str) -> SizeTable | None:
    """The table a size-aware header holds; None when `text` is not one (a header for one
    size). AnnotuneError naming `origin` when its table line cannot be read."""
    match = _ENTRIES_LINE.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1))
        entries = tuple(
            SizeEntry(
                size=int(e["size"]),
                params={str(k): v for k, v in e["params"].items()},
                predicted=bool(e["predicted"]),
                measurements=int(e["measurements"]),
                default_time=e["default_time"],
                best_time=e["best_time"],
                speedup=str(e["speedup"]),
                environment=str(e.get("environment", "")),
            )
            for e in data["entries"]
        )
        return SizeTable(
            str(data["name"]),
            int(data["default_size"]),
            str(data["default_reason"]),
            entries,
            str(data.get("environment", "")),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AnnotuneError(
            f"{origin}: the size table in this header cannot be read ({error})",
            hint="regenerate it with `annotune tune --sizes`",
        ) from None


def _rounded(time: float | None) -> float | None:
    """A time to the 6 significant digits the header shows (no float noise in a committed
    file)."""
    return None if time is None else float(f"{time:.6g}")


def _summary(name: str, entry: SizeEntry) -> str:
    if entry.predicted:
        return f"{name} = {entry.size}: {PREDICTED} (annotune predict)"
    text = (
        f"{name} = {entry.size}: {entry.measurements} measurements, default "
        f"{_ms(entry.default_time)}, best {_ms(entry.best_time)}"
    )
    text += f"; speedup {entry.speedup}" if entry.speedup else ""
    return text + (f"; environment {entry.environment}" if entry.environment else "")


def _field_names(names: Sequence[str]) -> list[str]:
    """The struct's field for each parameter: its name in lower case (the name itself is a
    macro, which would expand inside the struct), `value_NAME` where that is taken too."""
    lowered = [name.lower() for name in names]
    clashes = {n for n in lowered if lowered.count(n) > 1 or n in names}
    return [
        f"value_{name}" if low in clashes else low for name, low in zip(names, lowered, strict=True)
    ]


def _c_type(values: Sequence[Number]) -> str:
    """The narrowest of int, long long and double that holds every value."""
    if any(not float(v).is_integer() for v in values):
        return "double"
    return "int" if all(abs(int(v)) <= _INT32 for v in values) else "long long"


def parse_sizes(text: str, option: str = "--sizes") -> tuple[str, tuple[int, ...]]:
    """`--sizes N=512,1024,4096` as the size's name and its values, increasing. AnnotuneError
    for anything else: a name that is no C identifier, a value that is not a positive integer,
    a size given twice."""
    name, equals, values = text.partition("=")
    name = name.strip()
    example = f"e.g. {option} N=512,1024,4096"
    if not equals or not name.isidentifier() or not name.isascii():
        raise AnnotuneError(f"{option} {text!r}: expected NAME=SIZE,SIZE,...", hint=example)
    sizes = []
    for part in values.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or int(part) < 1:
            raise AnnotuneError(
                f"{option} {text!r}: {part!r} is not a positive integer size", hint=example
            )
        size = int(part)
        if size > _INT32:
            raise AnnotuneError(f"{option} {text!r}: {part} is larger than {_INT32}")
        if size in sizes:
            raise AnnotuneError(f"{option} {text!r}: {size} is given twice")
        sizes.append(size)
    return name, tuple(sorted(sizes))


def log2_size(size: float) -> float:
    """The task feature a size is learned by (sizes matter by ratio, not difference)."""
    return math.log2(size)
