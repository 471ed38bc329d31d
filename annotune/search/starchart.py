"""Iterative Starchart (Jia et al., Algorithm 2) as a search: box the best, search the tree.

The paper's Algorithm 2 samples I configurations uniformly at random (S_I), takes the top t%
of them by performance, draws the bounding box of their parameter values, samples A more
configurations inside the box, and builds a partition tree (Algorithm 1,
`annotune.search.partition`) on all of them. As a search this runs in rounds of A measurements
until the budget ends; each round rebuilds the tree on everything measured and redraws the
box. Performance is best time / time, invalid = 0: an invalid configuration is the worst,
never in the top set, and never best.

A round of A is split three ways:

* `guided` (half): the tree at work. The paper predicts a design by its leaf (§7.1) and
  notes that the tree "can at least identify the partition that contains the 'best' design
  in the sample set ... likely to also contain the 'best' design in the whole space and
  often small enough to be exhaustively searched" (§7.3). So every unmeasured row is ranked
  by the best performance measured in its leaf (then by the leaf's mean), and rows are taken
  from the best partition, at random within it, then from the next.
* `explore` (a fifth): uniform over the whole space. These samples join S_I, so the box is
  drawn from an unbiased sample that keeps growing, as the paper's S_I keeps the tree's
  global coverage (§5.1).
* the rest: uniform inside the box of the top t% of S_I (Algorithm 2, lines 2-4).

Where this departs from the paper, and why (replay data, Standard 1 / Standard 2 in
measurements over 20 seeds; random search in brackets: pnpoly 80 / 335, convolution A4000
267 / 1,039, convolution RTX 3090 210 / 861):

* The paper draws one box once; a search needs more than one round. A box redrawn around the
  top t% of *everything* measured collapses onto the first good region (it only ever
  shrinks, since later samples come from inside it): with all of a round in that box, pnpoly
  203 / never and A4000 520 / never on 10 seeds, worse than random. Drawing the box from S_I
  only and exploring a fifth of each round fixes that.
* The paper's tree-based pruning is applied to the whole space, not only inside the box:
  guided picks inside the box gave pnpoly 73 / 301, A4000 185 / 529, RTX 3090 63 / 333,
  against 43 / 175, 115 / 534, 53 / 103 over the whole space. Leaves are ranked by their
  best measurement rather than their mean (§8.5 allows other per-partition summaries): over
  40 seeds, by the mean, A4000 267 / 832, W6600 415 / 969, gemm 184 / 507, against 180 /
  577, 436 / 808, 134 / 275 by the best (summary below: 0.386 against 0.320).
* The stopping rule is the paper's threshold 0 with two limits that keep a rebuild to tens
  of milliseconds at 3,000 samples instead of hundreds: at least `min_leaf` = 2 samples per
  side and a gain of at least `min_gain` = 1e-4 of the root's error (splits among poor
  configurations). Over 40 seeds and seven datasets neither changed results beyond noise
  (geometric mean of mean-measurements-to-0.95 / random's Standard 1: 0.327 with
  min_gain 0, 0.320 with 1e-4, 0.334 with 1e-3; min_leaf 1: 0.361, 4: 0.378 on 20 seeds).
* When the box holds no unmeasured row it is widened (the top set doubled) until one does;
  when even the box of every valid sample of S_I is used up, the round samples uniformly:
  `ask` returns [] only when the space is exhausted.

Defaults, from those experiments (the summary is the geometric mean, over pnpoly and
convolution A4000 / RTX 3090 / W6600 / MI250X / A100 and gemm, of the mean measurements to
0.95 divided by random search's Standard 1; lower is better; 40 seeds unless said): I = 30
(20: 0.36 on 20 seeds; 50: 0.351 against 0.327), t = 15% as in the paper (§7.5; 30%: 0.318,
within noise and worse on pnpoly's Standard 2; 10%: 0.34 on 20 seeds, where the default gave
0.32), A = 10 (5: 0.32 on 20 seeds at twice the rebuilds; 20: 0.37), guided 0.5 / explore
0.2 (0.7 / 0.1: 0.319; 0.7 / 0: 0.356, A4000's Standard 2 never reached; on 20 seeds 0.6 /
0.2: 0.34, 0.4 / 0.3: 0.33, 0.3 / 0.2: 0.39).

`annotune bench` over all replay datasets, 100 seeds (random search's exact values in
brackets): convolution A100 186 / 396 (2,181 / 4,144), A4000 240 / 597 (267 / 1,039),
MI250X 139 / 475 (324 / 1,234), RTX 3090 56 / 105 (210 / 861), W6600 373 / 823 (694 /
2,299), gemm 134 / 339 (1,959 / 7,057), pnpoly 49 / 205 (80 / 335), dedispersion A4000 6 /
19 (5 / 20), dedispersion A100 2 / more than 6 (2 / 6: its cap is random's Standard 2, and
the first 30 picks are random).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from annotune.core.records import Candidates, Result, normalized_performance
from annotune.search.base import Strategy
from annotune.search.partition import StopRule, build_tree


class StarchartStrategy(Strategy):
    """Iterative bounding-box sampling guided by a Starchart partition tree.

    Options (keyword-only, validated here):

    initial: I, configurations sampled uniformly before the first box.
    top: t as a fraction: the best share of the uniform samples that spans the box.
    batch: A, configurations per round (one box and one tree per round).
    guided: fraction of each round taken from the leaves of the tree that hold the best
        measurements (anywhere in the space).
    explore: fraction of each round sampled uniformly from the whole space; these samples
        join the uniform set that the box is drawn from. The rest of the round is uniform
        inside the box.
    min_leaf: fewest samples on each side of a tree split.
    """

    name = "starchart"

    def __init__(
        self,
        *,
        initial: int = 30,
        top: float = 0.15,
        batch: int = 10,
        guided: float = 0.5,
        explore: float = 0.2,
        min_leaf: int = 2,
        min_gain: float = 1e-4,
    ) -> None:
        if initial < 1 or batch < 1:
            raise ValueError("initial and batch must be >= 1")
        if not 0.0 < top <= 1.0:
            raise ValueError("top must be a fraction in (0, 1]")
        if not (0.0 <= guided <= 1.0 and 0.0 <= explore <= 1.0 and guided + explore <= 1.0):
            raise ValueError("guided and explore must be fractions with guided + explore <= 1")
        self.initial = initial
        self.top = top
        self.batch = batch
        self.guided = guided
        self.explore = explore
        self.rule = StopRule(min_leaf=min_leaf, min_gain=min_gain)

    # -- Strategy interface ---------------------------------------------------------------

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self._rng = rng
        self._values = candidates.values
        self._names = candidates.names
        self._free = np.ones(len(candidates), dtype=bool)  # neither asked nor told
        self._uniform = np.zeros(len(candidates), dtype=bool)  # S_I: sampled uniformly
        self._told: list[int] = []
        self._times: list[float] = []  # parallel to _told; nan when invalid
        self._rounds = 0

    def ask(self, max_count: int) -> list[int]:
        free = np.flatnonzero(self._free)
        if max_count <= 0 or free.size == 0:
            return []
        asked = self._free.size - free.size
        if asked < self.initial or not np.isfinite(self._times).any():
            count = min(max_count, max(self.initial - asked, 1))
            chosen = self._take_uniform(free, count)
        else:
            chosen = self._round(min(max_count, self.batch))
            self._rounds += 1
        return [int(i) for i in chosen]

    def tell(self, results: Sequence[Result]) -> None:
        for result in results:
            self._free[result.index] = False
            self._told.append(result.index)
            time = result.time
            valid = time is not None and math.isfinite(time)
            # A (clamped) zero time stays valid: the best, not a division by zero.
            self._times.append(max(time, 1e-12) if valid else math.nan)  # type: ignore[arg-type,type-var]

    def progress(self) -> dict[str, float]:
        return {"round": self._rounds, "measured": len(self._told)}

    # -- internals --------------------------------------------------------------------------

    def _take(self, rows: np.ndarray) -> np.ndarray:
        self._free[rows] = False
        return rows

    def _take_uniform(self, rows: np.ndarray, count: int) -> np.ndarray:
        """`count` of `rows` (all free) at random; they join the uniform set S_I."""
        chosen = self._rng.choice(rows, size=min(count, rows.size), replace=False)
        self._uniform[chosen] = True
        return self._take(chosen)

    def _round(self, count: int) -> np.ndarray:
        """One round: `explore` uniform, `guided` from the best leaves, the rest in the box."""
        told = np.asarray(self._told)
        performance = normalized_performance(np.asarray(self._times))
        explore = self._take_uniform(np.flatnonzero(self._free), round(self.explore * count))
        guided = self._take(self._best_leaves(told, performance, round(self.guided * count)))
        box = self._box_rows(told, performance)
        rest = count - explore.size - guided.size
        inside = self._rng.choice(box, size=min(rest, box.size), replace=False)
        return np.concatenate([explore, guided, self._take(inside)]).astype(np.intp)

    def _best_leaves(self, told: np.ndarray, performance: np.ndarray, count: int) -> np.ndarray:
        """`count` free rows from the partitions holding the best measurements (§7.3).

        The tree (Algorithm 1 on everything measured) ranks every free row by the best
        performance measured in its leaf, then by the leaf's mean; rows of one leaf are
        taken in random order, so the best partition is searched through.
        """
        free = np.flatnonzero(self._free)
        if count <= 0 or free.size == 0:
            return np.zeros(0, dtype=np.intp)
        tree = build_tree(self._values[told], performance, self._names, self.rule)
        leaves = tree.leaves()
        best = np.zeros(len(leaves))
        np.maximum.at(best, tree.leaf_of(self._values[told]), performance)
        rank = np.empty(len(leaves))
        rank[np.lexsort(([-leaf.mean for leaf in leaves], -best))] = np.arange(len(leaves))
        # A leaf's rank plus a random fraction: leaves in order, rows within one at random.
        key = rank[tree.leaf_of(self._values[free])] + self._rng.random(free.size)
        count = min(count, free.size)
        return free[np.argpartition(key, count - 1)[:count]]

    def _box_rows(self, told: np.ndarray, performance: np.ndarray) -> np.ndarray:
        """Free rows inside the bounding box of the top t% of the uniform samples (Alg. 2,
        lines 2-4), widened (a larger top set) while it holds none; every free row once even
        the box of all valid uniform samples is used up (or none is valid)."""
        uniform = self._uniform[told] & (performance > 0)
        ranked = told[uniform][np.argsort(-performance[uniform], kind="stable")]
        top = max(1, math.ceil(self.top * np.count_nonzero(self._uniform[told])))
        rows = np.zeros(0, dtype=np.intp)
        while ranked.size and not rows.size:
            best = self._values[ranked[:top]]
            low, high = best.min(axis=0), best.max(axis=0)
            inside = np.all((self._values >= low) & (self._values <= high), axis=1)
            rows = np.flatnonzero(inside & self._free)
            if top >= ranked.size:
                break
            top *= 2
        return rows if rows.size else np.flatnonzero(self._free)
