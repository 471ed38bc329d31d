"""`annotune.scan`: the knobs, constraints and space of a source, as `annotune scan` shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from annotune.annotate import Problem, read_problem_and_source
from annotune.annotate.summary import SpaceSummary, scan_warnings, summarize_space
from annotune.api.paths import optional_path
from annotune.core.diagnostics import Location, printable


@dataclass(frozen=True)
class Scan:
    """What a scan found: the checked problem (its `params`, `constraints`, `settings`), the
    space's size (`space`) and the warnings, each at its location."""

    problem: Problem
    space: SpaceSummary
    warnings: tuple[tuple[Location, str], ...]

    def to_json(self) -> dict:
        problem = self.problem
        rules = problem.settings.output_check
        return {
            "file": printable(str(problem.source)),
            "params": [param.to_json() for param in problem.params],
            "constraints": [c.to_json() for c in problem.constraints],
            "space": self.space.to_json(),
            "warnings": [
                {"location": location.to_json(), "message": message}
                for location, message in self.warnings
            ],
            **({} if rules is None else {"output_check": rules.to_json()}),
            **({"rewrites": [r.to_json() for r in problem.rewrites]} if problem.rewrites else {}),
        }


def scan(source: str | Path, *, config: str | Path | None = None) -> Scan:
    """Read `source` (and its config: `config`, else the nearest annotune.toml) as the
    compiler would and return its knobs. Raises AnnotuneError, located, for every mistake."""
    problem, parsed = read_problem_and_source(Path(source), config_path=optional_path(config))
    summary = summarize_space(problem)
    return Scan(problem, summary, tuple(scan_warnings(problem, parsed)))
