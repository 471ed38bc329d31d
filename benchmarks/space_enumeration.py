"""Benchmark: enumerate a 10^7-configuration space with two constraints; sample a 10^15 one.

Run: `python benchmarks/space_enumeration.py`. The target (issue 2) is under 10 s and 2 GB for
the full enumeration on a 2-core machine. Peak RSS is the process's high-water mark so far, so
each row's figure includes the rows above it.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotune.space import Param, Space  # noqa: E402  (runs from a checkout, uninstalled)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def gemm_like_space() -> Space:
    """Seven knobs of ten values each, with two typical CUDA constraints."""
    params = [
        Param("block_size_x", tuple(range(16, 161, 16)), 32),
        Param("block_size_y", tuple(range(1, 11)), 4),
        Param("tile_size_x", tuple(range(1, 11)), 2),
        Param("tile_size_y", tuple(range(1, 11)), 2),
        Param("loop_unroll", tuple(range(1, 11)), 1),
        Param("vector_width", tuple(range(1, 11)), 2),
        Param("stages", tuple(range(1, 11)), 1),
    ]
    constraints = [
        "block_size_x * block_size_y >= 64 && block_size_x * block_size_y <= 1024",
        "loop_unroll <= tile_size_x * tile_size_y && tile_size_x * vector_width % 2 == 0",
    ]
    return Space(params, constraints)


def huge_space() -> Space:
    params = [Param(f"p{i}", tuple(range(1000)), 0) for i in range(5)]
    return Space(params, ["p0 + p1 > p2", "p3 % 4 != 1 || p4 < 500"])


def main() -> None:
    rows: list[tuple[str, int, int, float, float]] = []
    space = gemm_like_space()
    start = time.perf_counter()
    legal = space.count_legal()
    seconds = time.perf_counter() - start
    rows.append(("count_legal", space.cartesian_size, legal, seconds, peak_rss_mib()))

    big = huge_space()
    start = time.perf_counter()
    sample = big.sample(1000, np.random.default_rng(0))
    seconds = time.perf_counter() - start
    assert big.is_legal(sample).all()
    rows.append(("sample 1000", big.cartesian_size, len(sample), seconds, peak_rss_mib()))

    print(f"{'task':<12} {'cartesian':>18} {'legal/rows':>12} {'seconds':>8} {'peak RSS MiB':>13}")
    for task, cartesian, count, secs, rss in rows:
        print(f"{task:<12} {cartesian:>18,} {count:>12,} {secs:>8.2f} {rss:>13.0f}")


if __name__ == "__main__":
    main()
