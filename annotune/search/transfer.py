"""Transfer: IterML warm-started from other GPUs' measurements of the same space.

The feature-concatenation model (`annotune.transfer`, Muralidharan et al. §3.1) trained on
the source GPUs (`prior`) and queried with the target's device features (`task_features`)
ranks the whole space before anything is measured. The search then

1. measures the `lead` configurations the transferred model ranks best (the most promising
   first), and
2. continues as IterML on the target's own measurements, with the transferred prediction as
   one more model input (`IterML(extra_features=...)`): the forest can split on it from the
   first fit, so where the GPUs agree it ranks like the sources, and where the target's
   measurements contradict them the other inputs take over.

Without a prior (or when no source shares a configuration with the space) it is IterML, seed
for seed: the fallback when no other GPU's data exists.

The device feature vectors are used as given: choose them first (`annotune.transfer.
select_features`, CV-DFS), as `annotune tune`, `annotune predict` and `annotune bench
--transfer` do; all columns is the paper's full-set baseline.

Measured (`annotune bench --transfer`, leave one GPU out of the shared replay data, 100
seeds, Standard 1 / Standard 2 in measurements, IterML from scratch in brackets, before the
boosted-tree climbs joined its default): convolution
A4000 1 / 1 (74 / 248), MI250X 1 / 1 (82 / 207), W6600 1 / 1 (511 / 915), dedispersion A100
1 / 1 (2 / > 6), A4000 1 / 1 (6 / 19): the lead's first configuration is already within 5%
of the target's optimum. Convolution A100 263 / 386 (155 / 304) is the case it loses: the
other GPUs' best regions reach 0.67 of A100's optimum, which no source ranks within its top
350 (`benchmarks/transfer_ceiling.py`: 373rd at best under any blend of the sources), and
IterML's local moves start around the lead's configurations, the best measured for
a long while. Variants tried on A100 (20 seeds; IterML 164 / 318 on the same seeds):

* a smaller lead, 1 / 3 / 5: 208 / 335, 225 / 359, 219 / 347; no lead at all (the
  transferred prediction only as a model input): 168 / 273;
* without the prediction as a model input: 293 / 453 (with it: 214 / 366, the CV-DFS
  choice of the time); IterML's random first batch 20 instead of 10 after the lead:
  245 / 398;
* a lead spread over the space (each pick differing from the earlier ones in at least 2 or 3
  parameters): 228 / 325 and 237 / 415, while A4000 went from 4 / 23 to 7 / 33 and 38 / 87
  and W6600 from 1 / 1 to 24 / 48;
* hiding the lead's results from IterML (it learns only from its own picks): 183 / 308.
* the lead measured and learned from, but never a centre of IterML's local moves, 30 seeds
  (IterML 154 / 282 on them): 226 / 376; the same without the prediction as an input:
  231 / 318.

Only dropping the lead beats IterML there, and the lead is what takes the other targets to
1 / 1; the rest throw measurements away or lose elsewhere, so the defaults stand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from annotune.core.records import Candidates, Result, TaskData, check_task_features
from annotune.search.base import Strategy
from annotune.search.iterml import IterML
from annotune.transfer import model as _transfer


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
        `annotune.transfer`).
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
        if transfer_target not in _transfer.TARGETS:
            raise ValueError(f"transfer_target must be one of {', '.join(_transfer.TARGETS)}")
        check_task_features(prior, task_features)
        IterML(**iterml_options)  # reject bad IterML options now, not at start
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
        self.sources_: tuple[str, ...] = ()
        sources = _transfer.sources_for(self.prior, candidates) if len(candidates) else []
        if not sources:
            self._inner = IterML(**self.iterml_options)
            self._inner.start(candidates, rng)
            return
        model = _transfer.TransferModel(
            _transfer.encode_space(candidates),
            range(self.task_features.size),
            model=self.transfer_model,
            target=self.transfer_target,
        )
        scores = model.fit(sources, rng).predict(self.task_features)
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
        if self.prior_feature:
            options["extra_features"] = scores[:, None]
        self._inner = IterML(**options)
        self._inner.start(candidates, rng)

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
