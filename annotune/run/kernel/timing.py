"""Kernel mode's timed launches: between two CUDA events each, queued in batches and waited
for once per batch, until the median is stable (`annotune.run.sampling`).

The stopping rule is applied to each time in launch order, so the times kept are those one
launch at a time would give; a batch's size is what the median's interval says is still
needed (`batch_size`). When the kernel's arrays fit in the L2 cache, a buffer twice the L2's
size is cleared before each timed launch (`flush_bytes`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from annotune.annotate.kernels import Launch
from annotune.core.stats import median_interval, relative_halfwidth
from annotune.run.backends import KernelBackend
from annotune.run.backends.base import Flush
from annotune.run.sampling import Sampling

_FIRST_INTERVAL = next(n for n in itertools.count(1) if median_interval([1.0] * n) is not None)
"""The fewest samples whose median has a 95% interval: below it no time is stable yet."""


@dataclass
class Spent:
    """Where one measurement's time went, added up as it runs (seconds)."""

    timed: float = 0.0  # wall time inside the timed batches
    gpu: float = 0.0  # the sum of their event times
    energy: float = 0.0  # wall time inside the energy batches


def flush_bytes(backend: KernelBackend, launch: Launch, flush_l2: bool | None) -> int:
    """How much to clear before each timed launch: twice the L2 size, or 0 for no flush
    (`flush_l2` None: flush when the kernel's arrays fit in the L2)."""
    l2 = backend.l2_cache_bytes()
    if flush_l2 is None:
        wanted = sum(arg.nbytes for arg in launch.args if arg.is_pointer) <= l2
    else:
        wanted = flush_l2
    return 2 * l2 if wanted and l2 > 0 else 0


def timed_launches(
    backend: KernelBackend,
    prepared: object,
    sampling: Sampling,
    *,
    timeout: float,
    flush: Flush | None,
    stop_above: float | None,
    spent: Spent,
) -> list[float]:
    """Timed launches in batches until `Sampling.enough`, applied to each time in launch
    order, so the times kept are those that one launch at a time would have given. Each
    launch may take `timeout` seconds."""
    times: list[float] = []
    seconds = 0.0
    while True:
        count = batch_size(sampling, times, seconds)
        began = time.perf_counter()
        wait = timeout * count  # each launch may take `timeout`, as the checked one
        batch = backend.timed_launches(prepared, count, flush, timeout=wait)
        took = time.perf_counter() - began
        spent.timed += took
        spent.gpu += sum(batch) / 1e3
        for done, elapsed in enumerate(batch, 1):
            times.append(elapsed)
            if sampling.enough(times, seconds + took * done / len(batch), stop_above):
                return times
        seconds += took


def batch_size(sampling: Sampling, times: Sequence[float], seconds: float) -> int:
    """How many timed launches to queue next: `min_runs` first; then about what the median
    interval, narrowing as 1/sqrt(n), says is still needed, at most as many as so far (the
    rule may stop sooner than guessed), never past `max_runs` or, at the pace so far,
    `max_seconds`."""
    n = len(times)
    if n < sampling.min_runs:
        return sampling.min_runs - n
    cap = min(sampling.max_runs - n, n)
    if seconds > 0:
        cap = min(cap, max(1, int((sampling.max_seconds - seconds) / (seconds / n))))
    if n < _FIRST_INTERVAL:
        wanted = _FIRST_INTERVAL - n
    else:
        width = relative_halfwidth(times)
        wanted = math.ceil(n * (width / sampling.within) ** 2) - n if width < math.inf else cap
    return max(1, min(cap, wanted))
