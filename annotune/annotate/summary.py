"""The size of a problem's space: exact where it can be enumerated, estimated beyond."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from annotune.annotate import Problem, problem_space
from annotune.core.diagnostics import AnnotuneError

# Spaces up to this many Cartesian configurations are counted exactly (a few seconds).
EXACT_COUNT_LIMIT = 20_000_000
ESTIMATE_SAMPLES = 200_000


@dataclass(frozen=True)
class SpaceSummary:
    cartesian: int
    legal: int | None  # exact count; None when the space is too large to enumerate
    legal_estimate: int | None = None

    def to_json(self) -> dict:
        data: dict = {"cartesian": self.cartesian, "legal": self.legal}
        if self.legal is None:
            data["legal_estimate"] = self.legal_estimate
        return data

    def describe(self) -> str:
        if self.legal is not None:
            return f"space: {self.cartesian:,} configurations, {self.legal:,} legal"
        return (
            f"space: {self.cartesian:,} configurations, about {self.legal_estimate:,} legal "
            f"(estimated from {ESTIMATE_SAMPLES:,} samples; too large to count)"
        )


def summarize_space(problem: Problem, *, seed: int = 0) -> SpaceSummary:
    """Count the legal configurations; a constraint that leaves none is a located error."""
    space = problem_space(problem)
    if space.cartesian_size <= EXACT_COUNT_LIMIT:
        emptying = space.first_emptying_constraint()
        if emptying is not None:
            decl = problem.constraints[emptying]
            raise AnnotuneError("this constraint leaves no legal configuration", decl.location)
        return SpaceSummary(space.cartesian_size, space.count_legal())
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.integers(0, len(p.values), ESTIMATE_SAMPLES) for p in space.params])
    fraction = float(np.mean(space.is_legal(rows)))
    return SpaceSummary(space.cartesian_size, None, round(fraction * space.cartesian_size))
