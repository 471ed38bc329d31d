"""An annotune search strategy as a Kernel Tuner custom strategy.

`autotuning-methodology` runs every optimizer through Kernel Tuner's simulation mode; an
outside optimizer enters through Kernel Tuner's custom-strategy hook: the experiments file
names this file (`custom_search_method_path`) and the class (`search_method`), Kernel Tuner
builds the class with the experiments file's hyperparameters and calls it with its cost
function and search space. So annotune's strategy is charged exactly as Kernel Tuner's own
are: each configuration its recorded compile, verification and benchmark time, and the
strategy the wall time it spends between evaluations (Kernel Tuner's strategy timer).

The search itself is annotune's one driver loop (`annotune.search.run_search`) over the
space's legal configurations as `Candidates`; the budget is Kernel Tuner's, which stops the
loop by raising `StopCriterionReached` out of the cost function.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.search import Budget, create, run_search


class AnnotuneStrategy:
    """Kernel Tuner's `OptAlg` protocol around `annotune.search.create(strategy, **options)`.

    `options_file`: a pickle of the strategy's options (the transfer strategy's prior),
    written by `judge.py`; "" for none. Each instance is one repeat of the experiment: its
    seed is drawn from NumPy's global generator, which `judge.py` seeds once per space and
    strategy, so the repeats differ from each other and the whole run is reproducible.
    """

    # Kernel Tuner's CostFunc options: take configurations as given (no scaling, no
    # snapping); every configuration asked for is a row of the legal space already.
    costfunc_kwargs = {"scaling": False, "snap": False}
    constraint_aware = False

    def __init__(self, strategy: str, options_file: str = "") -> None:
        self.strategy = strategy
        self.options: dict[str, Any] = {}
        if options_file:
            with Path(options_file).open("rb") as stream:
                self.options = pickle.load(stream)
        self.seed = int(np.random.randint(2**31 - 1))

    def __call__(self, func: Any, searchspace: Any) -> None:
        """Search until Kernel Tuner's budget stops the cost function (or the space ends)."""
        configs: Sequence[tuple] = searchspace.list
        try:
            values = np.array(configs, dtype=np.float64)
        except ValueError:
            raise ValueError(
                "annotune's adapter encodes numeric parameters only; this space has others"
            ) from None
        candidates = Candidates(values, tuple(searchspace.tune_params))

        def measure(rows: Sequence[int]) -> list[Result]:
            costs = func.eval_all([configs[i] for i in rows])
            measured = func.results[-len(rows) :]
            return [
                _result(row, cost, record)
                for row, cost, record in zip(rows, costs, measured, strict=True)
            ]

        run_search(
            create(self.strategy, **self.options),
            candidates,
            measure,
            budget=Budget(),
            rng=np.random.default_rng(self.seed),
        )


def _result(row: int, cost: float, record: dict) -> Result:
    """Kernel Tuner's cost (float max when the configuration failed) as annotune's Result."""
    if "__error__" in record:
        return Result(row, None, type(record["__error__"]).__name__)
    if cost >= sys.float_info.max:
        return Result(row, None, "invalid")
    return Result(row, float(cost))
