"""What `scan` reports beside the parameters: the size of the space (exact where it can be
enumerated, estimated beyond) and the warnings about what annotune cannot see or tune; and the
parameters that reach the program only through its environment (`env_only_params`), which
scan, the builder (no `-D` for them) and the tuned header (`environment_at`) must agree on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from annotune.annotate import Problem, problem_space
from annotune.annotate.problem import kernel_only_params
from annotune.annotate.source import ParsedSource
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import fill_placeholders, placeholders
from annotune.core.records import Number
from annotune.space import Space

# Spaces up to this many Cartesian configurations are counted exactly (a few seconds).
EXACT_COUNT_LIMIT = 20_000_000
ESTIMATE_SAMPLES = 200_000
ESTIMATE_CELLS = 1 << 24  # sampled values held at once while estimating (128 MiB of int64)


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
    space = require_legal(problem)
    if space.cartesian_size <= EXACT_COUNT_LIMIT:
        return SpaceSummary(space.cartesian_size, space.count_legal())
    rng = np.random.default_rng(seed)
    batch = max(1, min(ESTIMATE_SAMPLES, ESTIMATE_CELLS // max(1, len(space.params))))
    legal = drawn = 0
    while drawn < ESTIMATE_SAMPLES:  # in batches: thousands of parameters fit in memory too
        count = min(batch, ESTIMATE_SAMPLES - drawn)
        rows = np.empty((count, len(space.params)), np.int64)
        for j, param in enumerate(space.params):
            rows[:, j] = rng.integers(0, len(param.values), count)
        legal += int(np.count_nonzero(space.is_legal(rows)))
        drawn += count
    estimate = (legal * space.cartesian_size + ESTIMATE_SAMPLES // 2) // ESTIMATE_SAMPLES
    return SpaceSummary(space.cartesian_size, None, estimate)  # integers: 2**3000 is no float


def require_legal(problem: Problem) -> Space:
    """The problem's space, once some configuration is known to be legal: a constraint that
    leaves none (`1 / (B - B)` divides by zero everywhere) is an error at its location, before
    anything is compiled. A space too large to enumerate is not decided here."""
    space = problem_space(problem)
    if space.cartesian_size <= EXACT_COUNT_LIMIT:
        emptying = space.first_emptying_constraint()
        if emptying is not None:
            decl = problem.constraints[emptying]
            raise AnnotuneError("this constraint leaves no legal configuration", decl.location)
    return space


def scan_warnings(problem: Problem, parsed: ParsedSource) -> list[tuple[Location, str]]:
    """Local headers that were not found (their tunables are not seen), and tunables that no
    active code uses: every use is in an `#if` branch the compiler skips under the flags in
    use, or there is none, so every value measures the same program."""
    warnings = [
        (
            location,
            f"local header '{header}' not found; tunables in it are not seen "
            "(add its directory to include = [...] in annotune.toml)",
        )
        for location, header in problem.missing_includes
    ]
    for param in problem.params:
        for location, what in param.couplings:
            warnings.append(
                (
                    location,
                    f"'{param.name}' is {param.literal(param.default)} at "
                    f"{param.location.file}:{param.location.line}, and {what} here is written "
                    "with the same number, which no variant changes: a variant may do other "
                    "work than the default's; check the output ([file.check] in the config)",
                )
            )
    elsewhere = env_only_params(problem) | kernel_only_params(problem)
    for param in problem.params:
        if param.name in elsewhere or any(parsed.is_active(u.location) for u in param.uses):
            continue
        why = "every use is in an #if branch the preprocessor skips" if param.uses else "no use"
        warnings.append(
            (
                param.location,
                f"'{param.name}' is not used in active code ({why} under the flags in use): "
                "its values would all measure the same program",
            )
        )
    return warnings


def env_only_params(problem: Problem) -> frozenset[str]:
    """The parameters that reach the program only when it runs: declared in the config, with
    no `#define` and no use in the user's files, and named as `{NAME}` in some `[file.env]`
    value (`THREADS` behind `OMP_NUM_THREADS = "{THREADS}"`) or program argument
    (`args = ["-wg", "{WG}"]`). A `-D` for one would change no program but split the compile
    cache: one binary serves every value."""
    named = {name for s in problem.settings.env for name in placeholders(s.value)}
    named |= {name for arg in problem.settings.args for name in placeholders(arg)}
    return frozenset(p.name for p in problem.params if p.name in named and p.unread)


def environment_at(problem: Problem, params: Mapping[str, Number]) -> dict[str, str]:
    """The config's `[file.env]` with `params`' values written in for each `{NAME}`: what a
    run of this configuration is given, and what a job script must set to run it again."""
    return {s.name: fill_placeholders(s.value, params) for s in problem.settings.env}


def arguments_at(problem: Problem, params: Mapping[str, Number]) -> list[str] | None:
    """The program's arguments (the config's `args`) with `params`' values for each `{NAME}`;
    None when no argument names a parameter (the arguments are then no part of the tune)."""
    args = problem.settings.args
    names = {p.name for p in problem.params}
    if not any(name in names for arg in args for name in placeholders(arg)):
        return None
    return [fill_placeholders(arg, params) for arg in args]


def require_checked(problem: Problem) -> None:
    """AnnotuneError, before anything is built, for a knob whose number is written again where
    no variant rewrites it (`TunableParam.couplings`: the grid's `(n + 255) / 256` of a block
    of 256) when nothing checks the program's output: a variant would launch other work,
    likely faster and wrong, and be measured as a speedup. A `[file.check]` catches it; the
    config's `independent = true` is the user's word that the number stands alone."""
    if problem.settings.output_check is not None:
        return
    for param in problem.params:
        if not param.couplings:
            continue
        where, what = param.couplings[0]
        more = f" (and {len(param.couplings) - 1} more)" if len(param.couplings) > 1 else ""
        raise AnnotuneError(
            f"{param.name} is {param.literal(param.default)} here, and {what} at "
            f"{where.file}:{where.line} is written with the same number{more}, which no "
            "variant changes: a variant would do other work than the default's, and nothing "
            "checks the program's output",
            param.location,
            hint='check what the program prints when it is right ([file.check] expect = "PASS" '
            "or result = '...' in the config), or, when that number is no part of the knob, "
            "say independent = true on it",
        )
