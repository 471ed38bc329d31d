"""`annotune check --measure`: does the header's configuration still pay? It and the default
are built from the code as it is now and re-measured interleaved, round by round, with the
final check's statistics (`session.recheck`: the median of the per-round ratios, its
order-statistic interval, the sequential looks): the header holds while that interval lies
above 1 plus the stability target, as the tune required of it. It fails when the tuned
configuration is no longer faster with that confidence, and says so more sharply when its
interval lies wholly below 1 (it is now slower than the default).

What the tune measured with is reused: the mode and objective the provenance records, the
config's run settings, the compile command (`--compiler`, else the config's, else the
language's default) and program arguments (`--arg`, else the config's). The default is
measured first as in a tune, and its output is the reference the tuned configuration's must
match: a tuned configuration that now fails or computes something else fails the check.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate import read_problem
from annotune.annotate.problem import Problem
from annotune.annotate.summary import env_only_params
from annotune.builder import Builder
from annotune.builder.verify import macro_number
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Number, objective_value
from annotune.emit.shadow import header_values
from annotune.emit.sizes import read_size_table
from annotune.results.database import config_key
from annotune.results.workspace import workspace
from annotune.session.measurers import open_measurer
from annotune.session.measuring import build_iter
from annotune.session.options import TuneArguments, tune_options
from annotune.session.recheck import Verdict, recheck
from annotune.session.study import energy_error


@dataclass(frozen=True)
class Remeasure:
    """What the re-measurement found: both configurations, each one's median over the rounds
    (ms, or J for an energy objective), the speedup (default / tuned, per round's median) and
    its interval, the rounds run, and the verdict. `error` says why nothing could be compared
    (a build or run failed); `same` that the header holds the defaults (nothing to compare)."""

    tuned: dict[str, Number]
    default: dict[str, Number]
    objective: str
    tuned_value: float | None = None
    default_value: float | None = None
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    rounds: int = 0
    min_speedup: float = 1.0
    faster: bool = False
    slower: bool = False
    same: bool = False
    error: str = ""

    @property
    def holds(self) -> bool:
        return self.same or (self.faster and not self.error)

    def to_json(self) -> dict:
        return {
            "tuned": self.tuned,
            "default": self.default,
            "objective": self.objective,
            "tuned_value": self.tuned_value,
            "default_value": self.default_value,
            "speedup": self.speedup,
            "speedup_interval": list(self.interval) if self.interval else None,
            "rounds": self.rounds,
            "min_speedup": self.min_speedup,
            "faster": self.faster,
            "slower": self.slower,
            "same": self.same,
            "holds": self.holds,
            "error": self.error,
        }


def remeasure(
    source: Path,
    header: Path,
    *,
    mode: str,
    objective: str,
    config: Path | None = None,
    compiler: str | None = None,
    args: tuple[str, ...] = (),
    run_dir: Path | None = None,
    rounds: int = 30,
) -> Remeasure:
    """Re-measure the configuration of `header` against the default of `source`, as the
    module docstring says. AnnotuneError for a header whose values cannot be measured so (one
    per problem size) or a source that does not read."""
    try:
        text = header.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AnnotuneError(f"cannot read the tuned header {header}: {error}") from None
    if read_size_table(text, str(header)) is not None:
        raise AnnotuneError(
            f"{header} selects its values per problem size: --measure re-measures one "
            "configuration",
            hint="check each size's header, tuned without --sizes",
        )
    problem = read_problem(source, config_path=config, args=args or None)
    given = TuneArguments(
        mode=mode, objective=objective, compiler=compiler, args=args, run_dir=run_dir
    )
    options = tune_options(problem, given)
    default = {p.name: p.default for p in problem.params}
    tuned = {**default, **_values(problem, text)}
    within = options.run.stable_within
    if tuned == default:
        return Remeasure(tuned, default, objective, same=True, min_speedup=1.0 + within)
    with ExitStack() as resources:
        measurer, compile_with, nvrtc_arch = open_measurer(problem, options.measuring(), resources)
        builder = resources.enter_context(
            Builder(
                problem,
                compiler=compile_with,
                cache_dir=workspace(problem.source).cache_dir,
                jobs=2,
                timeout=options.compile_timeout,
                nvrtc_arch=nvrtc_arch,
            )
        )
        configs = [default, tuned]
        builds = {
            config_key(configs[i]): build
            for i, build in build_iter(builder, env_only_params(problem), configs)
        }
        for params, what in ((default, "the default"), (tuned, "the tuned configuration")):
            build = builds[config_key(params)]
            if not build.ok:
                return Remeasure(
                    tuned, default, objective, error=f"{what} does not build: {build.error}"
                )
        first = measurer.measure(builds[config_key(default)])
        if first.status != "ok":
            return Remeasure(
                tuned, default, objective, error=f"the default fails: {first.status}: {first.error}"
            )
        measurer.adopt_baseline(first, lambda: builds[config_key(default)])
        samples: dict[str, list[float]] = {config_key(default): [], config_key(tuned): []}

        def sample(params: Mapping[str, Number]) -> float | str:
            taken = measurer.sample(builds[config_key(params)])
            if taken.status != "ok":
                return f"{taken.status}: {taken.error}"
            value = objective_value(taken, objective)
            if value is None:
                return f"no energy: {energy_error(taken)}"
            samples[config_key(params)].append(value)
            return value

        verdict = recheck(default, [tuned], sample, rounds=rounds, min_speedup=1.0 + within)
    return _result(verdict, tuned, default, objective, samples, 1.0 + within)


def _result(
    verdict: Verdict,
    tuned: dict[str, Number],
    default: dict[str, Number],
    objective: str,
    samples: Mapping[str, list[float]],
    min_speedup: float,
) -> Remeasure:
    (contender,) = verdict.contenders or (None,)
    error = verdict.baseline_error and f"the default failed: {verdict.baseline_error}"
    if contender is not None and contender.error:
        error = f"the tuned configuration failed: {contender.error}"
    interval = contender.interval if contender is not None else None
    return Remeasure(
        tuned,
        default,
        objective,
        tuned_value=_median(samples[config_key(tuned)]),
        default_value=_median(samples[config_key(default)]),
        speedup=contender.speedup if contender is not None else None,
        interval=interval,
        rounds=verdict.rounds,
        min_speedup=min_speedup,
        faster=contender is not None and contender.significant,
        slower=interval is not None and interval[1] < 1.0,
        error=error,
    )


def _values(problem: Problem, text: str) -> dict[str, Number]:
    """The header's value of each knob the source declares now (a knob it no longer has is
    not measured: the static check says it is gone)."""
    names = {p.name for p in problem.params}
    found = {}
    for name, (written, _) in header_values(text).items():
        number = macro_number(written)
        if name in names and number is not None:
            found[name] = number
    return found


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
