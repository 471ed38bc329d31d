"""Starchart's recursive least-squares partitioning of measured samples (Jia et al., Alg. 1).

A node holds samples; for every parameter and every split point between two of its distinct
values, the node's samples are cut into `parameter <= v` and `parameter > v` (v a value the
samples take, as in the paper's Figure 3), and the cut whose two sides' means leave the
smallest summed squared error (SSE) wins. The error removed, SSE(node) - SSE(low) - SSE(high),
is the split's *gain*. Nodes are split again until the stopping rule says no (`StopRule`).
Splits high in the tree matter most (§4.2); a parameter's importance is the share of all
error removed by its splits.

The search is vectorized: per node, one argsort of every column and cumulative sums of the
centred target give the gain of every split point of every parameter at once (with the
target centred, gain = s^2 n / (n_low n_high), s the low side's sum: no cancellation).

Stopping rule (`StopRule`): the paper's, split while the best gain exceeds `threshold` (0
for performance trees, §4.3: stop when no split reduces the error), plus three optional
limits of the kinds §4.3 suggests ("a limit on the maximum height of the tree", or stopping
once a partition varies little): a minimum gain relative to the root's SSE (`min_gain`), a
minimum of samples on each side (`min_leaf`) and a maximum depth. Their defaults (0, 1,
none) are the paper's rule alone. Details the paper leaves open: equal gains go to the split
with fewest samples on the low side, then the first parameter; gains under 1e-10 of the
node's SSE are rounding noise, not splits.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from annotune.core.files import save_figure

_NOISE = 1e-10


@dataclass(frozen=True)
class StopRule:
    """When a node stays a leaf.

    A node is split when its best split's gain exceeds `threshold` (the paper's rule, in the
    target's squared units) and `min_gain` times the root's SSE, each side keeps at least
    `min_leaf` samples, and the node is shallower than `max_depth` (None: no limit).
    """

    threshold: float = 0.0
    min_gain: float = 0.0
    min_leaf: int = 1
    max_depth: int | None = None

    def __post_init__(self) -> None:
        if self.threshold < 0 or not 0.0 <= self.min_gain < 1.0:
            raise ValueError("threshold must be >= 0 and min_gain in [0, 1)")
        if self.min_leaf < 1 or (self.max_depth is not None and self.max_depth < 0):
            raise ValueError("min_leaf must be >= 1 and max_depth >= 0")


@dataclass(slots=True)
class Node:
    """A partition: its samples' count, mean target and SSE; a split unless it is a leaf.

    Internal nodes send samples with `column` (named `parameter`) <= `threshold` to `low`,
    the others to `high`.
    """

    count: int
    mean: float
    sse: float
    parameter: str | None = None
    column: int = -1
    threshold: float = math.nan
    low: Node | None = None
    high: Node | None = None

    @property
    def is_leaf(self) -> bool:
        return self.low is None

    @property
    def gain(self) -> float:
        """The error this node's split removes (0 for a leaf)."""
        if self.low is None or self.high is None:
            return 0.0
        return self.sse - self.low.sse - self.high.sse

    def condition(self, *, high: bool = False) -> str:
        """The split as text, `parameter <= v` (or `parameter > v` for the high side)."""
        return f"{self.parameter} {'>' if high else '<='} {self.threshold:g}"

    def to_json(self) -> dict:
        data: dict = {"samples": self.count, "mean": self.mean, "sse": self.sse}
        if self.low is not None and self.high is not None:
            data.update(
                parameter=self.parameter,
                threshold=self.threshold,
                low=self.low.to_json(),
                high=self.high.to_json(),
            )
        return data


@dataclass(frozen=True)
class Tree:
    """A partition tree over parameters `names` (the columns of the values it was built on)."""

    root: Node
    names: tuple[str, ...]

    def nodes(self) -> Iterator[Node]:
        """Every node, parents before children."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            if node.low is not None and node.high is not None:
                stack += [node.high, node.low]

    def leaves(self) -> list[Node]:
        return [node for node in self.nodes() if node.is_leaf]

    def predict(self, values: np.ndarray) -> np.ndarray:
        """Each row's leaf mean: the tree as a performance model (§7.1)."""
        means = np.array([leaf.mean for leaf in self.leaves()])
        return means[self.leaf_of(values)]

    def leaf_of(self, values: np.ndarray) -> np.ndarray:
        """For each row of `values`, the position of its leaf in `leaves()`."""
        out = np.empty(values.shape[0], dtype=np.intp)
        leaf = 0
        stack = [(self.root, np.arange(values.shape[0]))]
        while stack:  # the order of `nodes()`, so leaves are numbered as `leaves()` lists them
            node, rows = stack.pop()
            if node.low is None or node.high is None:
                out[rows] = leaf
                leaf += 1
                continue
            low = values[rows, node.column] <= node.threshold
            stack += [(node.high, rows[~low]), (node.low, rows[low])]
        return out

    def importance(self) -> list[tuple[str, float]]:
        """(parameter, share of all error removed by its splits), largest first; shares sum
        to 1, or are all 0 when the tree has no split."""
        gains = np.zeros(len(self.names))
        for node in self.nodes():
            if not node.is_leaf:
                gains[node.column] += node.gain
        total = gains.sum()
        shares = gains / total if total > 0 else gains
        order = np.argsort(-shares, kind="stable")
        return [(self.names[j], float(shares[j])) for j in order]


def build_tree(
    values: np.ndarray,
    target: np.ndarray,
    names: Sequence[str],
    rule: StopRule = StopRule(),  # noqa: B008  (frozen, never mutated)
) -> Tree:
    """Partition the samples `values` (m, d) with measured `target` (m,) by Algorithm 1."""
    values = np.asarray(values, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != len(names) or target.shape != values.shape[:1]:
        raise ValueError(f"values must be (m, {len(names)}) and target (m,)")
    if values.shape[0] == 0 or not np.all(np.isfinite(target)):
        raise ValueError("need at least one sample and finite targets")
    root = _node(target)
    floor = max(rule.threshold, rule.min_gain * root.sse)
    pending = [(root, np.arange(target.size), 0)]  # the paper's list C of partitions to try
    while pending:
        node, rows, depth = pending.pop()
        if node.count < 2 * rule.min_leaf or depth == rule.max_depth or node.sse <= floor:
            continue  # (a split never removes more than the node's whole error)
        split = _best_split(values[rows], target[rows] - node.mean, rule.min_leaf)
        if split is None:
            continue
        column, order, size, gain = split
        if gain <= floor or gain <= _NOISE * node.sse:
            continue
        node.parameter, node.column = names[column], column
        node.threshold = float(values[rows[order[size - 1]], column])
        low, high = rows[order[:size]], rows[order[size:]]
        node.low, node.high = _node(target[low]), _node(target[high])
        pending += [(node.high, high, depth + 1), (node.low, low, depth + 1)]
    return Tree(root, tuple(names))


def _node(target: np.ndarray) -> Node:
    mean = float(target.sum()) / target.size
    deviation = target - mean
    return Node(count=target.size, mean=mean, sse=float(deviation @ deviation))


def _best_split(
    x: np.ndarray, centred: np.ndarray, min_leaf: int
) -> tuple[int, np.ndarray, int, float] | None:
    """The least-squares split of one node's samples `x` with centred targets: (column, the
    samples' order by that column, how many of them go low, gain); None if there is none."""
    m = centred.size
    if centred.max() == centred.min():
        return None
    order = np.argsort(x, axis=0, kind="stable")
    xs = x[order, np.arange(x.shape[1])]
    low_sum = np.cumsum(centred[order], axis=0)[:-1]  # row k: the k + 1 lowest samples
    n_low = np.arange(1, m, dtype=np.float64)[:, None]
    gain = low_sum**2 * (m / (n_low * (m - n_low)))
    allowed = xs[:-1] < xs[1:]  # only between distinct values
    allowed[: min_leaf - 1] = False
    allowed[m - min_leaf :] = False
    gain[~allowed] = -1.0
    k, column = divmod(int(np.argmax(gain)), gain.shape[1])
    if gain[k, column] < 0:
        return None
    return column, order[:, column], k + 1, float(gain[k, column])


def plot_tree(tree: Tree, path: str | Path, *, target: str = "mean") -> None:
    """Draw the tree as boxes and edges (matplotlib, the optional `plot` extra): each box
    shows the node's split, sample count and mean `target`; the left edge is `<=`.
    AnnotuneError naming `path` when it cannot be written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = list(tree.nodes())  # parents first, low before high: leaves left to right
    depth = {id(tree.root): 0}
    x: dict[int, float] = {}
    for node in nodes:
        if node.low is None or node.high is None:
            x[id(node)] = float(len(x))
        else:
            depth[id(node.low)] = depth[id(node.high)] = depth[id(node)] + 1
    for node in reversed(nodes):  # children before parents: a parent sits between them
        if node.low is not None and node.high is not None:
            x[id(node)] = (x[id(node.low)] + x[id(node.high)]) / 2
    positions = {key: (x[key], -float(depth[key])) for key in x}
    width = float(len(tree.leaves()))
    height = 1 + max(depth.values())
    fig, ax = plt.subplots(figsize=(min(2.0 + 1.6 * width, 60), 1.0 + 1.5 * height))
    for node in tree.nodes():
        x, y = positions[id(node)]
        lines = [] if node.is_leaf else [node.condition()]
        lines += [f"n = {node.count}", f"{target} {node.mean:.3g}"]
        style = {"boxstyle": "round", "fc": "#e8eef7" if node.is_leaf else "#fdf2d0"}
        ax.text(x, y, "\n".join(lines), ha="center", va="center", fontsize=8, bbox=style)
        for child, label in ((node.low, "yes"), (node.high, "no")):
            if child is not None:
                cx, cy = positions[id(child)]
                ax.plot([x, cx], [y - 0.22, cy + 0.22], color="grey", lw=0.8, zorder=0)
                ax.text((x + cx) / 2, (y + cy) / 2, label, fontsize=7, color="grey")
    ax.set_xlim(-0.8, width - 0.2)
    ax.set_ylim(-height + 0.5, 0.5)
    ax.axis("off")
    fig.tight_layout()
    try:
        save_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
