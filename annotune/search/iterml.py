"""IterML (Cui & Feng, Algorithm 1): measure, fit, predict the rest, prune the worst; repeat.

The paper's loop, per iteration: pick a constant number of configurations at random from the
remaining space, measure them, fit a regression model on everything measured so far, predict
the remaining space, and prune the `cut` fraction with the worst predictions. Pruning is
irreversible, and that is where it breaks on real spaces: a run that prunes the optimum early
never recovers (on the shared replay data the 5th percentile of best-found performance stalls
at 0.87-0.93, and at 0.22 on convolution MI250X). `IterML(paper=True)` (strategy
`iterml-paper`) is that algorithm, kept for comparison.

The default keeps the loop (fit on everything measured, predict everything left, prune by
prediction) and changes what the replay measurements said to change:

* The model learns log(time) of a richer encoding (`annotune.search.models.encode_features`): run
  times span orders of magnitude, and power-of-two alignment of block sizes is what
  separates the fast configurations on the convolution kernels.
* Pruning is soft and adaptive: the pool is recomputed from the current model every
  iteration, the best `(1 - cut) ** depth` of the unmeasured space (at least `min_keep`),
  where `depth` grows by one after a batch that improved the best time and shrinks by one
  after a batch that did not. A configuration pruned by an early, poor model comes back, and
  a stalled search widens its pool again.
* Each batch is a mix (fractions `local`, `exploit`, rest random):
  - `local`: a best-first local search. Going down the measured configurations from the
    best, each pick expands one not yet expanded parameter of a centre (drawn at random) to
    the value the model predicts best; every (centre, parameter) pair is expanded once per
    run, so when the best few are done the search moves to the next ones. This fine-tunes
    the best regions, where a forest is too coarse to rank the top configurations. The value
    is the best under one tree of the forest drawn per batch (`local_sample`), not under the
    forest's mean: centres on a plateau then try different values instead of the same one.
  - `exploit`: Thompson sampling, the minimum of a different random tree of the forest for
    each pick, over the whole unmeasured space: the trees disagree where data is scarce,
    which spreads the picks over every region that might hold the optimum.
  - the rest: random picks inside the pool, the paper's move, which keeps the model honest.
* Once 50 configurations are measured (`climb_after`), two batches of every three
  (`climb_share`) are chosen by a second model instead: hill climbs on boosted trees from
  random starts and from the best (the `predictive` strategy, told every result, without
  its random share: the forest's batches hold that). All the
  forest's moves start from what it ranks best, so they wait on a plateau when the better
  region needs several parameters changed at once; the climbs' model is biased differently
  and their random starts end elsewhere. Each model learns from the other's measurements.
  The first two picks of each climbs batch (`incumbent_checks`) check the best measured
  configuration: unmeasured neighbours of it along parameters of at most 4 values
  (`incumbent_values`), the method switches and small tiles. The local moves expand each
  (centre, parameter) pair once, to the value the model ranks best, so without this a
  near-best configuration keeps a wrong switch (pnpoly: between_method 2 at 0.949 of the
  optimum, beside between_method 0 at 1.0).
* The random picks (the first batch and the pool's share) are not uniform: each covers the
  most (value, value) pairs of two parameters not measured yet, among 256 random candidates
  (`annotune.search.covering`, a greedy pairwise covering design; `cover_values`: only
  parameters with at most 12 values). What both models miss on a plateau is usually a pair of
  values (pnpoly: tile size 18-20 with use_method 0); a design that covers pairs measures one
  early.
* Invalid configurations (failed compile, crash, wrong output) are learned as a bad time,
  `invalid_factor` times the worst valid time so far, so the model steers away from their
  region; the driver never reports them as best.

How the defaults were chosen (replay data, 20-40 seeds per setting unless said otherwise,
Standard 1 / Standard 2 in measurements; random search in brackets):

* paper algorithm, 100 seeds: 90 / never on pnpoly (80 / 335), never / never on convolution
  A4000 (267 / 1,039); the pruned-away optimum does not come back.
* Thompson and mean exploitation inside the shrinking pool alone: convolution A4000 1,004 /
  never; Thompson over the whole space: 219 / 510.
* adding local moves that ranked all neighbours together: pnpoly runs got stuck (2-3 of 20
  never reached 0.95) because the picks went to its 31 near-equivalent block sizes; drawing
  the parameter first fixed that (pnpoly 52 / 85, A4000 101 / 251).
* local 0.5-0.6 / exploit 0.2-0.3 / random 0.2 beat more exploitation (exploit 0.4-0.7:
  A4000 Standard 1 134-173 against 74-91). Between local 0.6 / exploit 0.2 and the default
  local 0.5 / exploit 0.3 (100 seeds each): pnpoly 51 / 251 vs 51 / 122, convolution 3090
  64 / 124 vs 61 / 103, gemm 121 / 225 vs 115 / 201, A4000 82 / 181 vs 91 / 191, W6600
  471 / 875 vs 567 / 931; the default trades some of W6600 for pnpoly's tail.
* the adaptive pool (instead of narrowing every iteration) removed the pnpoly runs that
  never got there; pool floor 50 and cut 0.2 vs 0.1/0.3/0.4 were within noise.
* expanding every (centre, parameter) once instead of always the best few centres took
  convolution W6600, a 4-configuration needle beside a broad 0.83 plateau, from 501 / 953
  to 124 / 791 (694 / 2,299); two or three moves per centre were worse there.
* batches of 5 instead of 10 and a first random batch of 10 instead of 20 changed results
  within noise for up to twice the model fits; a forest with max_features 0.5 or leaves of
  1 was worse on pnpoly.
* local moves by one tree's sample instead of the forest's mean (`local_sample` 1 vs 0),
  100 seeds, all datasets (`benchmarks/replay_table.py --strategy iterml --repeats 100`):
  W6600 471 / 911 vs 567 / 931, pnpoly 45 / 133 vs 51 / 122, MI250X 94 / 224 vs 88 / 194,
  A4000 91 / 228 vs 91 / 191, convolution 3090 61 / 106 vs 61 / 103, A100 148 / 316 vs
  154 / 306, gemm 116 / 221 vs 115 / 201. It is the default because it takes W6600 under
  40% of random search for Standard 2 and its Standard 1 from 82% to 68%, and pnpoly's
  Standard 1 from 64% to 56%, keeping every other target; the price is a longer tail (Standard
  2) on MI250X, A4000, pnpoly and gemm, still far inside the targets but further from Kernel
  Tuner's best on MI250X (161) and pnpoly (101). Half the local moves by sample
  (`local_sample` 0.6): W6600 563 / 911, pnpoly 45 / 181, MI250X 73 / 187, A4000 80 / 211,
  convolution 3090 61 / 116; with local 0.6 / exploit 0.2: W6600 500 / 844, pnpoly 45 / 125,
  MI250X 102 / 268, A4000 77 / 232, 3090 64 / 118, A100 171 / 316, gemm 117 / 211.
* also tried, with mean-valued local moves unless said, not adopted (pnpoly 100 seeds,
  W6600 40): moves of two parameters at once for a fifth of each batch, pnpoly 43 / 151,
  W6600 521 / 891; one pick per batch of the model's best mean, pnpoly 52 / 204 (with
  two-parameter moves 48 / 203); batches of 5, pnpoly 44 / 118 but W6600 601 / 976, and
  with sampled local moves pnpoly 40 / 141; batches of 3-6, a first batch of 10 or 30,
  local 0.4, mean acquisition, extra trees: pnpoly Standard 1 42-55, Standard 2 118 to
  never. Standard 2 on pnpoly is the 5th percentile of 100 runs and moves by 30-100
  measurements between settings that differ little; pnpoly's Standard 1 (<= 40) and
  W6600's (<= 347) stay open.
* tried in a later round, not adopted (pnpoly 100 seeds against the default's 45 / 133;
  W6600 the first 40 seeds, where the default gives 302 / 933):
  - a validity classifier (a forest classifier; the prediction is P(valid) * predicted
    time + P(invalid) * the penalty) instead of imputing invalid times: pnpoly 56 / 151;
  - picks by a main-effects model (ridge regression on one-hot values, one fit per pick on
    a bootstrap of the valid measurements): 10% of a batch, pnpoly 51 / 284; 20% with
    exploit 0.2, 51 / 221;
  - local moves around "niche leaders" (the best measured for each value of each
    parameter): W6600 335 / 812 (20% of a batch) and 364 / 871 (30%);
  - after 5 batches without progress, 60% of a batch random: W6600 337 / 1,151;
  - breadth-first centres (the top 10 or 25 each expanded once before any twice): W6600
    404 / 812 and 572 / 841.
  - learning speed (best / time, invalid 0) instead of log time, which stresses the fast
    end as the Starchart strategy's tree does: pnpoly 47 / 155, W6600 591 / 911;
  - picks from the leaf with the best measurement of one regression tree on speed (the
    Starchart strategy's guided move, which reaches W6600's 373 / 823 on 100 seeds): 20%
    of a batch, W6600 473 / 631, pnpoly 46 / 328; 30% with exploit 0.2, W6600 361 / 736.
  - hill climbs on the forest's mean from random starts (the `predictive` strategy's move,
    which reaches W6600's 263 / 612 with boosted trees): 20% of a batch, pnpoly 39 / 303,
    W6600 451 / 789; 30% with exploit 0.2, W6600 563 / 843.
  W6600's first hits are bimodal (quartiles 56 / 331 / 647 in the default's 40 runs): a
  run either finds the needle early or climbs the 0.84 plateau and stalls there. The
  needle sits in a region whose median configuration runs at 0.01 of the optimum (no
  shared memory, block height 1) and needs six parameters right at once, so no model
  fitted on a few hundred points ranks it well, and Standard 1 there moves by +-100
  between seed sets (302 on the first 40 seeds, 471 on 100).
* batches of 5 (`early_pick`) until 50 configurations are measured (`early_until`), then 10.
  100 seeds on every dataset, until 60 against batches of 10 throughout: pnpoly 40 / 139
  (45 / 133), convolution MI250X 76 / 235 (94 / 224), A4000 71 / 213 (91 / 228), RTX 3090
  54 / 104 (61 / 106), A100 148 / 294 (148 / 316), W6600 471 / 903 (471 / 911), gemm
  108 / 221 (116 / 221): Standard 1 improves or holds everywhere. Until 40 / 50 / 60 / 80 on
  pnpoly: 40 / 162, 40 / 133, 40 / 139, 40 / 197; on two more seed sets (`--seed 1`, `2`)
  until 50: 42 / 143, 40 / 151; until 60: 42 / 142, 40 / 180; batches of 10 throughout: 51 /
  149, 47 / 113. So small early batches take pnpoly's Standard 1 from 45-51 to 40-42, and its
  Standard 2 (five runs' tail) moves between 113 and 197 with the seed set whatever the
  setting. The default, until 50 (`benchmarks/replay_table.py --strategy iterml --repeats
  100`): A100 155 / 304, A4000 74 / 248, MI250X 82 / 207, RTX 3090 54 / 106, W6600 511 / 915,
  gemm 108 / 222, pnpoly 40 / 133. Batches of 5 throughout had cost W6600 (443 / 943 against
  302 / 933 on 40 seeds).
* tried later, not adopted; 100 seeds against the default's pnpoly 40 / 133, W6600 511 / 915;
  first, boosted trees (depth 6, leaves of 2: the `predictive` strategy's model, which reaches
  W6600):
  - hill climbs on them from random starts in place of the Thompson picks: W6600 320 / 864,
    MI250X 71 / 185, A4000 81 / 216, but pnpoly 44 / 231; in place of half of them: W6600
    377 / 766, pnpoly 39 / 160; in place of the random share: W6600 431 / 667, pnpoly
    39 / 298; climbs 0.2, Thompson 0.3, local 0.3, random 0.2: W6600 454 / 752, pnpoly 39 / 123.
  - as IterML's model (40 seeds; the default gives W6600 302 / 933 on them): alone, with mean
    picks, W6600 407 / 686 and pnpoly 40 / 231; averaged with the forest, 400 / 712 and
    37 / 171.
  - "kicks" (iterated local search): one pick per batch, in place of a Thompson pick, changes
    two (or three) parameters of one of the best 5 measured to random values: pnpoly 41 / 106,
    41 / 134, 38 / 134 on seed sets 0, 1, 2 (the default 40 / 133, 42 / 143, 40 / 151), but
    W6600 561 / 942 (three parameters: pnpoly 36 / 111, W6600 580 / 961); with boosted-tree
    climbs in place of the other Thompson picks, pnpoly 41 / 152 and 37 / 105 (seed sets 0, 1).
  Each trades one of W6600's Standard 1 and pnpoly's Standard 2 for the other: both are a
  plateau (0.84 and 0.87) beside a region that needs several parameters changed at once
  (pnpoly: tile 18-20 with use_method 0, from the plateau's tile 12 with use_method 2).
* the climbs sharing the batches (every other batch, `climb_after` 50), adopted. 100 seeds,
  before / after (`benchmarks/replay_table.py --strategy iterml --repeats 100`): W6600
  511 / 915 -> 342 / 822, gemm 108 / 222 -> 84 / 181, MI250X 82 / 207 -> 77 / 176, A4000
  74 / 248 -> 71 / 241, convolution 3090 54 / 106 -> 54 / 125, A100 155 / 304 -> 164 / 313,
  pnpoly 40 / 133 -> 40 / 151. More seeds, to see past the 5th percentile's noise: pnpoly
  (500 seeds) 41 / 171 -> 41 / 152; W6600 (200-300 seeds) 520 / 896 -> 346 / 785.
  - From the first model batch (`climb_after` 0): W6600 325 / 766, gemm 82 / 163, A4000
    81 / 201, A100 135 / 353, but pnpoly 42 / 149 and on 500 seeds 51 / 155: on pnpoly the
    forest's early moves find the optimum in half the runs by 41, and climbs that early slow
    them. From 100: pnpoly 41 / 171 (500 seeds), no change.
  - Random picks (the first batch and the pool's share) chosen greedily among 256 random
    candidates to cover (value, value) pairs of two parameters not measured yet, a pairwise
    covering design: pnpoly (500 seeds) 37 / 110, 37 / 116 with the climbs, but W6600 (200-300
    seeds) 622 / 901 without them, 382 / 758 with them; for the first batch only, pnpoly
    38 / 132 and W6600 601 / 901. The spread picks find pnpoly's tile 18-20 with use_method 0
    early; on W6600 they delay the runs that found the needle early (first quartile 122 ->
    315-328). Only in the pool's share once 50 are measured, with the climbs: pnpoly 41 / 136
    (500 seeds), W6600 363 / 802 (200 seeds). Covering only pairs of parameters with at most
    12 values (not W6600's 16 or pnpoly's 31 block sizes), with the climbs: pnpoly 38 / 99,
    W6600 441 / 805 (first decile 36 -> 103). The same only after 3 batches without
    progress: pnpoly 41 / 151, W6600 343 / 762, no better than without it; pnpoly's gain comes
    from covering pairs early, which is what W6600 loses by.
* tried with the climbs, not adopted (pnpoly 500 seeds, the default 41 / 152; 200 seeds
  elsewhere, the default W6600 346 / 785, gemm 84 / 181, A4000 73 / 224, MI250X 80 / 168).
  pnpoly's slowest runs fail in two ways: they sit on the 0.87 plateau (tile 12, use_method 2)
  with one or no measurement of use_method 0 at tile 16-20 among their first 100; or they
  reach 0.93-0.949 with between_method 2 or 3, and the model, which has seen between_method 0
  do badly with use_method 0 at large block sizes, moves that parameter to 3 or 2 for 30
  measurements before it tries 0.
  - every one-parameter neighbour of the best measured along parameters of at most 4 values,
    before the other local moves: pnpoly 32 / 154, gemm 82 / 172, MI250X 74 / 147, but W6600
    421 / 825, A4000 96 / 223;
  - parameters of at most 4 (or 3) values moved around a centre until each value is measured
    there: pnpoly 38 / 181 (40 / 169);
  - kicks (two parameters of one of the best 5 changed to random values) in place of a
    Thompson pick: pnpoly 41 / 147 (200 seeds; 41 / 137 on 500), W6600 388 / 761; in place of
    a random pick: pnpoly 42 / 159 (300 seeds), W6600 403 / 783 (300 seeds);
  - each line (a parameter and the values of all the others) expanded once, whichever of its
    configurations is the centre: pnpoly 42 / 161.
* pair-covering random picks (`cover_values` 12) with the climbs taking two batches of every
  three (`climb_share` 2/3), adopted. 200 seeds each (pnpoly 500), the default before on the
  same seeds in brackets: pnpoly 38 / 113 (41 / 152), W6600 334 / 781 (346 / 785) and on seed
  set 1 348 / 828 (372 / 731) (400 seeds: 345 / 751), gemm 82 / 158 (84 / 181), MI250X
  82 / 161 (80 / 168), RTX 3090 48 / 105, A4000 94 / 223 (73 / 224), A100 168 / 391
  (158 / 341). Each half alone: the pair
  covering with every other batch climbs, pnpoly 36 / 92 but W6600 441 / 805 (above), A4000
  101 / 221, A100 170 / 371; two batches of three climbs with uniform random picks, pnpoly
  42 / 201, W6600 366 / 674, A4000 77 / 211, A100 162 / 363. So the pair covering finds
  pnpoly's missing pair, and the larger share of climbs wins back the W6600 runs that the
  spread picks no longer let find the needle by luck. The price is A4000's Standard 1 (73 ->
  94, against random search's 267) and A100's tail (341 -> 391, against 4,144). 12 values
  lies between the replay spaces' tile, block-height and method counts (at most 11) and
  their block widths (16 and 31); the latter's pairs cannot be covered within a few hundred
  measurements and would crowd out the rest (with them, W6600 382 / 758 and every other
  batch climbs). Three batches of four climbs: W6600 318 / 743 and 355 / 682 (seed sets 0,
  1), pnpoly 38 / 113 (500 seeds), A4000 102 / 228, A100 178 / 402; climbs from 30 measured:
  W6600 335 / 731, pnpoly 36 / 109. Within noise of two of three on W6600 (334 / 781, 348 /
  828), which moves Standard 1 by 20-30 between sets of 100 seeds (the first 100 of seed set
  0: 362 / 790). On top of it, every neighbour of the best measured along parameters of at
  most 4 values before the other local moves (tried above): pnpoly 31 / 93 (500 seeds), but
  W6600 362 / 723; only after two batches without progress, pnpoly 36 / 111, the gain gone.
  Along parameters of at most 3 values: pnpoly 42 / 116, W6600 363 / 732, so the gain needs
  between_method's 4 values. At most 4, on the issue's 100 seeds (seed 0) against the default
  above: W6600 343 / 723, pnpoly 32 / 113, A4000 124 / 241, MI250X 85 / 176, RTX 3090 48 / 87,
  gemm 76 / 164, A100 175 / 404: W6600 and A4000 trade places at the edge of their Standard 1
  targets, and pnpoly's Standard 2 on 100 seeds stays at 113, so not adopted either. What
  it fixes: pnpoly's slowest runs now wait at between_method 2 with tile 20 and use_method 0
  (0.949), one move from between_method 0 (1.0), and each (centre, parameter) pair is
  expanded once, to the value the model ranks best. At most 2 such neighbours per call: pnpoly
  31 / 93 (500 seeds), but W6600 362 / 781 and A4000 121 / 243 (200 seeds; the default 334 /
  781 and 94 / 223): every form of this check that takes the forest's local moves has cost
  the convolution spaces about 30 in Standard 1.
  Pair moves (one per batch, from the best measured: the two parameters the forest finds most
  interacting, by the gains of parent and child splits on different parameters, changed at
  once to the sampled tree's best pair of values): pnpoly 42 / 130 on 100 seeds. After 80
  measurements that score ranks block_size_x with tile_size first (two main effects), not
  the tile_size / use_method interaction that pnpoly's plateau hides. Ranked by Friedman's H
  statistic on the forest's partial dependence instead: pnpoly 41 / 114 (one centre, one
  move), 44 / 131 (three centres, two moves); the forest has not learned that interaction
  in the runs that need it, so no score computed from it can point there.
* adopted: the same check in the climbs' batches instead, their first 2 picks
  (`incumbent_checks`). pnpoly 38 / 84 (500 seeds; without it 38 / 113), below PSO's 97.
  W6600 347 / 761 on 400 other seeds (seed 1000; without it 364 / 775), 367 / 852 on seed
  set 0 (334 / 781), 363 / 753 on 300 more (seed 2000; 338 / 755): about 8 worse in
  Standard 1 over the 900, within W6600's noise. A4000 96 / 252 (94 / 223). The issue's
  table (100 seeds, seed 0), without it in brackets: A100 192 / 405 (167 / 383),
  A4000 94 / 243 (98 / 211), MI250X 82 / 145 (82 / 157), RTX 3090 48 / 105 (48 / 121), W6600
  431 / 852 (362 / 790), gemm 82 / 152 (81 / 153), pnpoly 36 / 72 (36 / 113). Taking the
  whole climbs batch (up to 9 neighbours on the convolution spaces): pnpoly 38 / 73 but
  W6600 401 / 741 (and 401 / 734 checking each combination of small values once); one pick:
  pnpoly 38 / 91, W6600 403 / 812.
* adopted: the climbs' batches without the `predictive` strategy's uniform random fifth
  (its `explore` 0 here). Traced on W6600 (100 seeds), that share was 8,800 of the climbs'
  25,000 picks and found the needle in 8 runs; random-start climbs found it in 75. The
  forest's batches already hold the random, pair-covering share. The issue's table (100
  seeds, seed 0), before in brackets: A100 146 / 341 (192 / 405), A4000 94 / 196
  (94 / 243), MI250X 82 / 157 (82 / 145), RTX 3090 48 / 93 (48 / 105), gemm 75 / 160
  (82 / 152), W6600 346 / 672 (431 / 852), pnpoly 36 / 72 (36 / 72); W6600 on 200 other
  seeds (seed 1000) 311 / 611 (347 / 761 on 400 seeds that include them), on 200 more
  (seed 2000) 344 / 651 (363 / 753 on 300 that include them); pnpoly (500 seeds) 38 / 89
  (38 / 84).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator

from annotune.core.records import Candidates, Result
from annotune.search.base import Strategy
from annotune.search.covering import PairCoverage
from annotune.search.models import Surrogate, encode_features
from annotune.search.predictive import PredictiveStrategy


class IterML(Strategy):
    """Iterative model-guided pruning search.

    Options (keyword-only, validated here):

    model: "rf" (default), "et", "cart", "knn", "svr", "mlp", "gbt", or any unfitted
        scikit-learn regressor (cloned for every fit). Thompson sampling needs a forest
        ("rf", "et"); other models exploit their mean prediction.
    pick: configurations measured per iteration; a float in (0, 1) is a pick *ratio* of the
        whole space (the paper's formulation), turned into a constant count.
    initial: size of the first, purely random batch (None: `pick`).
    early_pick: batch size while fewer than `early_until` configurations are measured (0: always
        `pick`). The model changes most per measurement early on, so refitting after every
        few pays then; later, batches of `pick` keep compiles parallel and fits rare.
    cut: fraction of the remaining space pruned per step.
    local: fraction of each batch spent on one-parameter moves around the best measured.
    local_sample: fraction of the local moves whose value is chosen by one tree of the
        forest drawn per batch (Thompson sampling) instead of the forest's mean (only with
        "thompson").
    moves_per_centre: parameters expanded around one centre per batch before moving on.
    exploit: fraction of each batch chosen by the model ("thompson" or "mean" acquisition).
        The rest of the batch is random inside the pool.
    adaptive: soft pool that narrows on progress and widens on stalls (else the pool narrows
        every iteration).
    min_keep: the soft pool never shrinks below this many configurations.
    log_target: learn log(time) instead of time.
    invalid_factor: an invalid configuration is learned as this multiple of the worst valid
        time seen so far.
    paper: the plain Algorithm 1: irreversible pruning, purely random picks, raw time targets,
        20 picks and cut 0.5 unless given (overrides `local`, `exploit`, `log_target`,
        `climb_share`, `cover_values`).
    n_jobs: threads for the model (1 when many searches already run in parallel).
    climb_share: once `climb_after` configurations are measured, this fraction of the batches
        (evenly interleaved; 2/3: forest, climbs, climbs, forest, ...) is chosen by hill
        climbs on boosted trees (the `predictive` strategy, told every result) instead of the
        forest (0: never).
    climb_after: measurements before the climbs take their share.
    incumbent_checks: in each climbs batch, up to this many picks go first to unmeasured
        neighbours of the best measured configuration along parameters of at most
        `incumbent_values` values (0: none). The local moves expand each (centre, parameter)
        pair once, to the value the model ranks best, so a near-best configuration can keep a
        wrong method switch forever (pnpoly: between_method 2 at 0.949 beside 0 at 1.0).
    incumbent_values: only parameters with at most this many values are checked so.
    cover_values: the random picks (the first batch and the pool's share) cover value pairs
        of two parameters not measured yet (`annotune.search.covering`), over the
        parameters with at most this many values (0: uniform random picks).
    extra_features: optional (n, k) array, one row per candidate of the search to come,
        appended to the model inputs: knowledge from outside the search, e.g. the `transfer`
        strategy's prediction from other GPUs, which the forest can split on from the start.
    """

    name = "iterml"

    def __init__(
        self,
        *,
        model: str | BaseEstimator = "rf",
        pick: float = 10,
        initial: int | None = 20,
        cut: float = 0.2,
        local: float = 0.5,
        local_sample: float = 1.0,
        exploit: float = 0.3,
        acquisition: str = "thompson",
        adaptive: bool = True,
        moves_per_centre: int = 1,
        min_keep: int = 50,
        log_target: bool = True,
        invalid_factor: float = 2.0,
        paper: bool = False,
        n_jobs: int = 1,
        early_pick: int = 5,
        early_until: int = 50,
        climb_share: float = 2 / 3,
        climb_after: int = 50,
        incumbent_checks: int = 2,
        incumbent_values: int = 4,
        cover_values: int = 12,
        extra_features: np.ndarray | None = None,
    ) -> None:
        if pick <= 0:
            raise ValueError("pick must be a positive count or a ratio in (0, 1)")
        if not 0.0 <= cut < 1.0:
            raise ValueError("cut must be in [0, 1)")
        if not (0.0 <= exploit <= 1.0 and 0.0 <= local <= 1.0 and exploit + local <= 1.0):
            raise ValueError("local and exploit must be fractions with local + exploit <= 1")
        if not 0.0 <= local_sample <= 1.0:
            raise ValueError("local_sample must be a fraction in [0, 1]")
        if moves_per_centre < 1:
            raise ValueError("moves_per_centre must be >= 1")
        if early_pick < 0 or early_until < 0:
            raise ValueError("early_pick and early_until must be >= 0")
        if not 0.0 <= climb_share <= 1.0 or climb_after < 0:
            raise ValueError("climb_share must be a fraction in [0, 1] and climb_after >= 0")
        if cover_values < 0:
            raise ValueError("cover_values must be >= 0")
        if incumbent_checks < 0 or incumbent_values < 0:
            raise ValueError("incumbent_checks and incumbent_values must be >= 0")
        if initial is not None and initial < 1:
            raise ValueError("initial must be >= 1")
        if acquisition not in ("thompson", "mean"):
            raise ValueError("acquisition must be 'thompson' or 'mean'")
        if invalid_factor < 1.0:
            raise ValueError("invalid_factor must be >= 1")
        self.model = model
        self.pick = pick
        self.initial = initial
        self.cut = cut
        self.local = 0.0 if paper else local
        self.local_sample = float(local_sample)
        self.exploit = 0.0 if paper else exploit
        self.acquisition = acquisition
        self.adaptive = adaptive
        self.moves_per_centre = moves_per_centre
        self.min_keep = min_keep
        self.log_target = False if paper else log_target
        self.invalid_factor = invalid_factor
        self.paper = paper
        self.n_jobs = n_jobs
        self.early_pick = 0 if paper else early_pick
        self.early_until = early_until
        self.climb_share = 0.0 if paper else float(climb_share)
        self.climb_after = climb_after
        self.incumbent_checks = incumbent_checks
        self.incumbent_values = incumbent_values
        self.cover_values = 0 if paper else cover_values
        self.extra_features = extra_features
        if paper:
            self.name = "iterml-paper"

    # -- Strategy interface ---------------------------------------------------------------

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        n = len(candidates)
        self._rng = rng
        self._values = candidates.values
        # float32: what scikit-learn's trees compute in; converting once saves a copy per call.
        self._features = (
            encode_features(candidates.values).astype(np.float32) if n else (candidates.values)
        )
        if self.extra_features is not None and n:
            extra = np.asarray(self.extra_features, dtype=np.float32).reshape(n, -1)
            self._features = np.hstack([self._features, extra])
        self._alive = np.ones(n, dtype=bool)  # unmeasured and (paper mode) not pruned
        self._told: list[int] = []
        self._times: list[float] = []  # parallel to _told: time, or nan when invalid
        self._asked = 0
        self._iteration = 0
        self._depth = 0  # pruning steps applied to the soft pool
        self._best = math.inf
        self._expanded: dict[int, set[int]] = {}  # centre row -> parameters moved along
        self._surrogate = Surrogate(self.model, n_jobs=self.n_jobs)
        self._pick = max(1, round(self.pick * n)) if self.pick < 1 else int(self.pick)
        self._initial = self.initial if self.initial is not None else self._pick
        self._batches_after_climb_start = 0
        self._climb_batches = 0
        self._candidates = candidates
        self._climber: PredictiveStrategy | None = None  # created at its first turn
        self._coverage = (
            PairCoverage(candidates.values, self.cover_values) if self.cover_values and n else None
        )
        self._checked_axes = np.array(
            [np.unique(column).size <= self.incumbent_values for column in candidates.values.T],
            dtype=bool,
        )

    def ask(self, max_count: int) -> list[int]:
        alive = np.flatnonzero(self._alive)
        if max_count <= 0 or alive.size == 0:
            return []
        if self._asked < self._initial or not self._told:
            size = min(self._initial - self._asked, max_count, alive.size)
            chosen = self._random_picks(alive, max(size, 1))
        else:
            size = self._pick
            if self.early_pick and len(self._told) < self.early_until:
                size = self.early_pick
            chosen = self._climbed(min(size, max_count))
            if chosen.size == 0:
                chosen = self._model_guided(alive, min(size, max_count))
        if self._climber is not None:
            self._climber.exclude(chosen)
        self._iteration += 1
        self._asked += len(chosen)
        self._alive[chosen] = False
        return [int(i) for i in chosen]

    def tell(self, results: Sequence[Result]) -> None:
        if self._climber is not None:
            self._climber.tell(results)
        if self._coverage is not None:
            self._coverage.record([result.index for result in results])
        improved = False
        for result in results:
            self._alive[result.index] = False
            self._told.append(result.index)
            time = result.time
            valid = time is not None and math.isfinite(time)
            self._times.append(float(time) if valid else math.nan)  # type: ignore[arg-type]
            if valid and time < self._best:  # type: ignore[operator]
                self._best = float(time)  # type: ignore[arg-type]
                improved = True
        self._depth = self._depth + 1 if improved else max(0, self._depth - 1)

    def progress(self) -> dict[str, float]:
        return {
            "iteration": self._iteration,
            "measured": len(self._told),
            "alive": int(self._alive.sum()),
            "climbs": self._climb_batches,
        }

    # -- internals --------------------------------------------------------------------------

    def _climbed(self, count: int) -> np.ndarray:
        """The climbs' batch when it is their turn, else nothing.

        The forest's moves (one-parameter steps, Thompson picks inside a pool ranked by one
        model) wait on a plateau when the better region needs several parameters changed at
        once. Climbs on a second, differently biased model from random starts end in other
        places: on convolution W6600 the `predictive` strategy alone reaches Standard 1 in 263
        measurements where the forest alone needed 511. Sharing the batches, each model learns from
        the other's measurements.
        """
        if not self.climb_share or len(self._told) < self.climb_after:
            return np.zeros(0, dtype=np.intp)
        self._batches_after_climb_start += 1
        turn = self._batches_after_climb_start
        # Batch `turn` is the climbs' when it completes another whole share (1e-9: 3 * (2/3)).
        if math.floor(turn * self.climb_share + 1e-9) == math.floor(
            (turn - 1) * self.climb_share + 1e-9
        ):
            return np.zeros(0, dtype=np.intp)
        if self._climber is None:
            self._climber = self._start_climber()
        checks = self._incumbent_neighbours(min(self.incumbent_checks, count))
        self._climber.exclude(checks)
        climbed = np.asarray(self._climber.ask(count - checks.size), dtype=np.intp)
        chosen = np.concatenate([checks, climbed[self._alive[climbed]]])
        self._climb_batches += bool(chosen.size)
        return chosen

    def _incumbent_neighbours(self, count: int) -> np.ndarray:
        """Up to `count` unmeasured one-parameter neighbours of the best measured, along the
        parameters with at most `incumbent_values` values, in random order."""
        times = np.asarray(self._times)
        valid = ~np.isnan(times)
        if count <= 0 or not valid.any():
            return np.zeros(0, dtype=np.intp)
        best = np.asarray(self._told)[valid][np.argmin(times[valid])]
        differs, one_move = self._one_move_from(best)
        neighbours = one_move & self._alive & differs[:, self._checked_axes].any(axis=1)
        return self._rng.permutation(np.flatnonzero(neighbours))[:count].astype(np.intp)

    def _one_move_from(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """Which parameters of each candidate differ from `row`'s, and which candidates differ
        in exactly one (its neighbours)."""
        differs = self._values != self._values[row]
        return differs, differs.sum(axis=1, dtype=np.int32) == 1

    def _start_climber(self) -> PredictiveStrategy:
        """The climbs' strategy, told everything measured so far.

        Created late because its neighbour table costs about 2 s on 10^6 configurations,
        wasted on a search that stops before `climb_after` measurements.
        """
        # explore=0: the forest's batches already hold the random (pair-covering) share; the
        # predictive strategy's own uniform random fifth only diluted the climbs.
        climber = PredictiveStrategy(initial=0, explore=0.0, n_jobs=self.n_jobs)
        climber.start(self._candidates, self._rng)
        climber.tell(
            [
                Result(row, None if math.isnan(time) else time)
                for row, time in zip(self._told, self._times, strict=True)
            ]
        )
        climber.exclude(np.flatnonzero(~self._alive))  # asked, results still to come
        return climber

    def _targets(self) -> np.ndarray:
        """Training targets: (log) times, invalid ones imputed as a bad time."""
        times = np.asarray(self._times)
        valid = ~np.isnan(times)
        if not valid.any():
            return np.zeros(times.size)
        filled = np.where(valid, times, times[valid].max() * self.invalid_factor)
        return np.log(np.maximum(filled, 1e-300)) if self.log_target else filled

    def _model_guided(self, alive: np.ndarray, count: int) -> np.ndarray:
        """Fit on everything measured, predict `alive`, prune, and choose `count` rows."""
        told = np.asarray(self._told)
        self._surrogate.fit(self._features[told], self._targets(), self._rng)
        features = self._features[alive]
        score = self._surrogate.predict(features).mean
        # Best (lowest) first; random keys break the many ties a tree model produces.
        ranked = alive[np.lexsort((self._rng.random(alive.size), score))]
        if self.paper:
            keep = ranked.size - int(self.cut * ranked.size)
            self._alive[ranked[keep:]] = False
            return self._rng.choice(ranked[:keep], size=min(count, keep), replace=False)
        depth = self._depth if self.adaptive else self._iteration
        pool = ranked[: max(self.min_keep, math.ceil(ranked.size * (1.0 - self.cut) ** depth))]
        n_local = round(self.local * count)
        n_exploit = min(round(self.exploit * count), count - n_local)
        taken = np.zeros(self._alive.size, dtype=bool)
        n_sampled = round(self.local_sample * n_local) if self.acquisition == "thompson" else 0
        local = self._local(alive, score, n_local - n_sampled)
        if n_sampled:
            sampled = self._surrogate.sample(features, self._rng)
            sampled[np.isin(alive, local)] = np.inf
            local = np.concatenate([local, self._local(alive, sampled, n_sampled)])
        taken[local] = True
        if self.acquisition == "thompson":
            exploit = self._thompson(alive, features, ~taken[alive], n_exploit)
        else:
            exploit = ranked[~taken[ranked]][:n_exploit]
        taken[exploit] = True
        rest = pool[~taken[pool]]
        n_random = min(count - local.size - exploit.size, rest.size)
        explore = self._random_picks(rest, n_random)
        return np.concatenate([local, exploit, explore])

    def _random_picks(self, rows: np.ndarray, count: int) -> np.ndarray:
        """`count` of `rows` at random, spread over uncovered value pairs unless turned off."""
        if self._coverage is None:
            return self._rng.choice(rows, size=count, replace=False)
        return self._coverage.spread(rows, count, self._rng)

    def _local(self, alive: np.ndarray, score: np.ndarray, count: int) -> np.ndarray:
        """`count` model-chosen unmeasured neighbours of the best measured configurations.

        A neighbour differs from its centre in exactly one parameter. Centres are taken best
        first; around each, up to `moves_per_centre` parameters not expanded before (drawn
        at random) are moved to the value with the best `score` (predicted for `alive`: the
        forest's mean, or one tree's). Drawing the parameter
        first matters: ranking all neighbours together spends the picks on the parameter
        with the most values even when it hardly matters (pnpoly's 31 block sizes). Each
        (centre, parameter) pair is expanded once per run, so the search walks down the
        ranking instead of circling the same few centres.
        """
        if count <= 0:
            return np.zeros(0, dtype=np.intp)
        times = np.asarray(self._times)
        told = np.asarray(self._told)
        valid = ~np.isnan(times)
        centres = told[valid][np.argsort(times[valid], kind="stable")]
        predicted = np.full(self._alive.size, np.inf)
        predicted[alive] = score
        chosen: list[int] = []
        for centre in centres:
            if len(chosen) == count:
                break
            differs, one_move = self._one_move_from(centre)
            near = one_move & np.isfinite(predicted)
            if not near.any():
                continue
            expanded = self._expanded.setdefault(int(centre), set())
            axes = [a for a in np.flatnonzero(differs[near].any(axis=0)) if a not in expanded]
            moves = min(self.moves_per_centre, count - len(chosen))
            for axis in self._rng.permutation(axes)[:moves]:
                expanded.add(int(axis))
                along = np.flatnonzero(near & differs[:, axis] & np.isfinite(predicted))
                if along.size == 0:
                    continue
                best = along[predicted[along] == predicted[along].min()]
                pick = int(best[self._rng.integers(best.size)])
                predicted[pick] = np.inf
                chosen.append(pick)
        return np.asarray(chosen, dtype=np.intp)

    def _thompson(
        self, rows: np.ndarray, features: np.ndarray, free: np.ndarray, count: int
    ) -> np.ndarray:
        """`count` of the `free` `rows`, each the minimum of a freshly drawn model sample."""
        chosen: list[int] = []
        free = free.copy()
        for _ in range(min(count, int(free.sum()))):
            draw = self._surrogate.sample(features, self._rng)
            draw[~free] = np.inf
            best = np.flatnonzero(draw == draw.min())
            pick = int(best[self._rng.integers(best.size)])
            free[pick] = False
            chosen.append(int(rows[pick]))
        return np.asarray(chosen, dtype=np.intp)
