"""Search strategies behind one ask/tell interface, created by name.

`create("iterml", cut=0.3)` returns a fresh strategy (IterML's options become an
`IterMLSettings`); `STRATEGY_NAMES` lists the names the command line accepts. `iterml-paper`
is the plain Algorithm 1 of Cui & Feng, kept so the default can be compared with it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from annotune.core.records import Candidates, Result, TaskData
from annotune.search.base import Budget, Measure, SearchOutcome, Strategy, run_search

# Each strategy's module is imported when it is created, not with this package: the models
# (scikit-learn, scipy) take a second or two to import, which `--compile-only` and every
# command that only names a strategy never pay.
_CLASSES = {
    "Exhaustive": "annotune.search.exhaustive",
    "IterML": "annotune.search.iterml",
    "IterMLSettings": "annotune.search.iterml",
    "PredictiveStrategy": "annotune.search.predictive",
    "RandomSearch": "annotune.search.random_search",
    "StarchartStrategy": "annotune.search.starchart",
    "Transfer": "annotune.search.transfer",
}


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(import_module(_CLASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _iterml(**options: Any) -> Strategy:
    from annotune.search.iterml import IterML, IterMLSettings

    return IterML(IterMLSettings(**options))


def _named(class_name: str) -> Callable[..., Strategy]:
    return lambda **options: __getattr__(class_name)(**options)


_FACTORIES: dict[str, Callable[..., Strategy]] = {
    "iterml": _iterml,
    # The paper's setting: 20 random picks per iteration, half the remaining space cut.
    "iterml-paper": lambda **options: _iterml(
        **{"paper": True, "pick": 20, "initial": None, "cut": 0.5, **options}
    ),
    "predictive": _named("PredictiveStrategy"),
    "random": _named("RandomSearch"),
    "starchart": _named("StarchartStrategy"),
    "transfer": _named("Transfer"),
    "exhaustive": _named("Exhaustive"),
}

STRATEGY_NAMES = tuple(_FACTORIES)

TRANSFER_STRATEGIES = ("iterml", "transfer")
"""The strategies that `tune` warm-starts from other GPUs' results (others run as asked)."""


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
    "TRANSFER_STRATEGIES",
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
