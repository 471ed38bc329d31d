"""Transfer: IterML warm-started from other GPUs' measurements of the same space.

The multi-task model (`annotune.search.multitask`, Muralidharan et al. §3.1) fitted on the
source GPUs (`prior`) and queried with the target's device features (`task_features`) ranks
the whole space before anything is measured. The search measures the `lead` configurations it
ranks best, then continues as IterML on the target's own measurements with the transferred
prediction as one more model input (`extra_features`): where the GPUs agree the forest ranks
like the sources, where the target's measurements contradict them the other inputs take over.
Without a prior (or no source sharing a configuration with the space) it is IterML, seed for
seed.

The device feature vectors are used as given: `annotune.transfer.adapt.select_features`
(CV-DFS) chooses them for `annotune tune` and `annotune bench --transfer`. The measurements
behind the defaults, and the variants that lost, are in docs/experiments/transfer.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from annotune.core.records import Candidates, Result, TaskData, check_task_features
from annotune.search.base import Strategy
from annotune.search.iterml import IterML, IterMLSettings
from annotune.search.multitask import TARGETS, encode_space, score_space, sources_for


class Transfer(Strategy):
    """IterML that starts from a model transferred from other GPUs.

    Options (keyword-only):

    prior: the source GPUs' measurements (`TaskData`, `features` = device features).
    task_features: the target GPU's device features, the same columns as every prior's.
    lead: configurations measured first, the transferred model's best ranked.
    prior_feature: give IterML the transferred prediction as an extra model input.
    transfer_model: the regressor of the transfer model (an IterML model name or an
        unfitted scikit-learn regressor).
    transfer_target: "log" (default) or "linear" normalized performance (see
        `annotune.search.multitask`).
    initial_after_lead: IterML's random first batch after the lead (its `initial`, unless
        given): the lead stands in for half of IterML's usual 20.
    Every other option goes to IterML.
    """

    name = "transfer"

    def __init__(
        self,
        *,
        prior: Sequence[TaskData] = (),
        task_features: Sequence[float] = (),
        lead: int = 10,
        prior_feature: bool = True,
        transfer_model: str | BaseEstimator = "rf",
        transfer_target: str = "log",
        initial_after_lead: int = 10,
        **iterml_options: Any,
    ) -> None:
        if lead < 0:
            raise ValueError("lead must be >= 0")
        if initial_after_lead < 1:
            raise ValueError("initial_after_lead must be >= 1")
        if transfer_target not in TARGETS:
            raise ValueError(f"transfer_target must be one of {', '.join(TARGETS)}")
        check_task_features(prior, task_features)
        IterMLSettings(**iterml_options)  # reject bad IterML options now, not at start
        self.prior = tuple(prior)
        self.task_features = np.asarray(task_features, dtype=np.float64)
        self.lead = lead
        self.prior_feature = prior_feature
        self.transfer_model = transfer_model
        self.transfer_target = transfer_target
        self.initial_after_lead = initial_after_lead
        self.iterml_options = iterml_options

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self._lead: list[int] = []
        self._asked: set[int] = set()
        self._candidates = candidates
        self._rng = rng
        self.sources_: tuple[str, ...] = ()
        sources = sources_for(self.prior, candidates) if len(candidates) else []
        if not sources:
            self._inner = IterML(IterMLSettings(**self.iterml_options))
            self._inner.start(candidates, rng)
            return
        scores = self._scores(sources)
        ranked = np.lexsort((rng.random(scores.size), -scores))
        self._lead = [int(i) for i in ranked[: self.lead]]
        self.sources_ = tuple(s.name for s in sources)
        # Off with sources: the climbs' boosted trees would not see the sources' prediction
        # (`extra_features`), and the defaults below were measured without the climbs or the
        # pair-covering random picks.
        options = {
            "initial": self.initial_after_lead,
            "climb_share": 0,
            "cover_values": 0,
            **self.iterml_options,
        }
        extra = scores[:, None] if self.prior_feature else None
        self._inner = IterML(IterMLSettings(**options), extra_features=extra)
        self._inner.start(candidates, rng)

    def learn(
        self, prior: Sequence[TaskData], task_features: Sequence[float], lead: int = 5
    ) -> bool:
        """Take other GPUs' measurements that arrived during the search (GPUs of other kinds
        tuned at the same time): the space is ranked again with them, the ranking becomes
        IterML's extra input (replacing the old one) and the `lead` best-ranked rows not yet
        asked are measured next. The settings IterML started with are kept. False when none of
        `prior` shares a configuration with the space (nothing changes)."""
        check_task_features(prior, task_features)
        sources = sources_for(prior, self._candidates) if len(self._candidates) else []
        if not sources:
            return False
        self.prior = tuple(prior)
        self.task_features = np.asarray(task_features, dtype=np.float64)
        scores = self._scores(sources)
        self.sources_ = tuple(s.name for s in sources)
        if self.prior_feature:
            self._inner.set_extra_features(scores[:, None])
        unasked = self._inner.unasked()
        unasked[list(self._asked)] = False
        ranked = np.lexsort((self._rng.random(scores.size), -scores))
        self._lead = [int(i) for i in ranked[unasked[ranked]][:lead]]
        return True

    def _scores(self, sources: Sequence[TaskData]) -> np.ndarray:
        """The transferred prediction for every candidate, higher is better."""
        return score_space(
            encode_space(self._candidates),
            sources,
            range(self.task_features.size),
            self.task_features,
            self._rng,
            model=self.transfer_model,
            target=self.transfer_target,
        )

    def ask(self, max_count: int) -> list[int]:
        if max_count <= 0:
            return []
        if self._lead:
            chosen, self._lead = self._lead[:max_count], self._lead[max_count:]
        else:
            while True:
                asked = self._inner.ask(max_count)
                chosen = [i for i in asked if i not in self._asked]
                if chosen or not asked:
                    break
        self._asked.update(chosen)
        return chosen

    def tell(self, results: Sequence[Result]) -> None:
        self._inner.tell(results)

    def progress(self) -> dict[str, float]:
        return {**self._inner.progress(), "sources": len(self.sources_)}
