"""Search strategies behind one ask/tell interface, created by name.

`create("iterml", cut=0.3)` returns a fresh strategy (IterML's options become an
`IterMLSettings`); `STRATEGY_NAMES` lists the names the command line accepts. `iterml-paper`
is the plain Algorithm 1 of Cui & Feng, kept so the default can be compared with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from annotune.core.records import Candidates, Result, TaskData
from annotune.search.base import Budget, Measure, SearchOutcome, Strategy, run_search
from annotune.search.exhaustive import Exhaustive
from annotune.search.iterml import IterML, IterMLSettings
from annotune.search.predictive import PredictiveStrategy
from annotune.search.random_search import RandomSearch
from annotune.search.starchart import StarchartStrategy
from annotune.search.transfer import Transfer

_FACTORIES: dict[str, Callable[..., Strategy]] = {
    "iterml": lambda **options: IterML(IterMLSettings(**options)),
    # The paper's setting: 20 random picks per iteration, half the remaining space cut.
    "iterml-paper": lambda **options: IterML(
        IterMLSettings(**{"paper": True, "pick": 20, "initial": None, "cut": 0.5, **options})
    ),
    "predictive": PredictiveStrategy,
    "random": RandomSearch,
    "starchart": StarchartStrategy,
    "transfer": Transfer,
    "exhaustive": Exhaustive,
}

STRATEGY_NAMES = tuple(_FACTORIES)


def create(name: str, **options: Any) -> Strategy:
    """A new strategy by name; `options` go to its constructor (IterML's: `IterMLSettings`)."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGY_NAMES)}"
        ) from None
    return factory(**options)


__all__ = [
    "STRATEGY_NAMES",
    "Budget",
    "Candidates",
    "Exhaustive",
    "IterML",
    "IterMLSettings",
    "Measure",
    "RandomSearch",
    "Result",
    "SearchOutcome",
    "Strategy",
    "TaskData",
    "create",
    "run_search",
]
