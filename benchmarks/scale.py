"""Benchmark: how annotune's front end and space scale on large and hostile inputs.

Run: `python benchmarks/scale.py` (or `--only NAME` for one row). Each row runs in its own
process, under a time limit, so a row that never finishes shows as a timeout instead of hanging
the table, and its peak RSS is its own. Targets (the "hostile input" issue), on a 2-core
machine: a 10^7-configuration space enumerates in under 10 s; `annotune scan` of one
`range(1, 1000000)` parameter takes under a second; expressions of hundreds of terms parse; a
10^12-configuration space is sampled and estimated without allocating anything of its size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotune.space import Param, Space, SpaceError  # noqa: E402  (runs from a checkout)

TIME_LIMIT = 120.0


def gemm_like_space() -> Space:
    """Four knobs of 56 values (9.8 million configurations) with two constraints."""
    values = tuple(range(1, 57))
    params = [Param(name, values, 1) for name in ("bx", "by", "tile", "unroll")]
    return Space(params, ["bx * by <= 1024 && bx % 2 == 0 || tile > unroll", "by + tile < 100"])


def huge_space() -> Space:
    """Four parameters of a thousand values: 10^12 configurations."""
    params = [Param(f"p{i}", tuple(range(1, 1001)), 1) for i in range(4)]
    return Space(params, ["p0 + p1 > p2", "p3 % 4 != 1 || p0 < 500"])


def count_legal() -> str:
    return f"{gemm_like_space().count_legal():,} legal"


def legal_indices() -> str:
    return f"{len(gemm_like_space().legal_indices()):,} rows"


def iter_legal() -> str:
    return f"{sum(len(chunk) for chunk in gemm_like_space().iter_legal()):,} rows"


def _scan(text: str, name: str = "kernel.c") -> str:
    """`annotune scan` of a small file, as the user runs it (interpreter start included)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / name
        source.write_text(text)
        done = subprocess.run(
            [sys.executable, "-m", "annotune", "scan", str(source)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT,
        )
    lines = (done.stdout + done.stderr).splitlines()
    found = [line for line in lines if line.startswith("space:") or ": error:" in line]
    return f"exit {done.returncode}: {found[0] if found else lines[-1:]}"


def scan_range() -> str:
    return _scan("#define N 5 // @tune range(1, 1000000)\nint a[N];\n")


def scan_tiny() -> str:
    """The same command on a ten-value domain: interpreter and libclang start-up alone."""
    return _scan("#define N 5 // @tune range(1, 10)\nint a[N];\n")


def scan_macro_chain() -> str:
    """Kernel mode reads every numeric macro: 2000 of them, each using the one defined after
    it, the order that made resolving them quadratic."""
    macros = "".join(f"#define M{i} (M{i + 1} + 1)\n" for i in range(2000)) + "#define M2000 1\n"
    return _scan(
        "#define B 32 // @tune values(32, 64)\n"
        + macros
        + "#pragma annotune kernel k grid(M0 / B) block(B) args(in(M0), 1)\n"
        + "__global__ void k(const float *in, int n) { }\n",
        name="kernel.cu",
    )


def _constraint(text: str) -> str:
    params = [Param("a", tuple(range(8)), 1), Param("b", tuple(range(8)), 1)]
    try:
        space = Space(params, [text])
    except SpaceError as error:
        return f"rejected: {error.message} (offset {error.offset})"
    return f"{space.count_legal()} legal of {space.cartesian_size}"


def sum_500() -> str:
    return _constraint(" + ".join(["a"] * 500) + " > b")


def or_500() -> str:
    return _constraint(" || ".join(f"a == {i % 8}" for i in range(500)))


def nested_200() -> str:
    return _constraint("(" * 200 + "a + b" + ")" * 200 + " > 3")


def nested_201() -> str:
    return _constraint("(" * 201 + "a + b" + ")" * 201 + " > 3")


def sample_huge() -> str:
    space = huge_space()
    rows = space.sample(1000, np.random.default_rng(0))
    assert space.is_legal(rows).all()
    return f"{len(rows)} rows of {space.cartesian_size:,}"


def search_rows_huge() -> str:
    rows, count = huge_space().search_rows(np.random.default_rng(0))
    return f"{len(rows):,} rows, count {count}"


def count_huge() -> str:
    try:
        return f"{huge_space().count_legal():,}"
    except SpaceError as error:
        return f"refused: {error.message[:60]}"


ROWS: dict[str, tuple[str, Callable[[], str]]] = {
    "count_legal": ("56^4 space, count_legal", count_legal),
    "legal_indices": ("56^4 space, legal_indices", legal_indices),
    "iter_legal": ("56^4 space, iter_legal", iter_legal),
    "scan_tiny": ("scan range(1, 10)", scan_tiny),
    "scan_range": ("scan range(1, 1000000)", scan_range),
    "scan_macro_chain": ("scan, 2000 chained macros", scan_macro_chain),
    "sum_500": ("500-term + constraint", sum_500),
    "or_500": ("500-term || constraint", or_500),
    "nested_200": ("200 nested parentheses", nested_200),
    "nested_201": ("201 nested parentheses", nested_201),
    "sample_huge": ("10^12 space, sample 1000", sample_huge),
    "search_rows_huge": ("10^12 space, search_rows", search_rows_huge),
    "count_huge": ("10^12 space, count_legal", count_huge),
}


def run_row(name: str) -> None:
    """In the child: time one row and print it as JSON."""
    start = time.perf_counter()
    try:
        result = ROWS[name][1]()
    except Exception as error:  # a crash is a result worth showing in the table
        result = f"crash: {type(error).__name__}: {str(error)[:60]}"
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"result": result, "seconds": seconds, "rss": rss}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(ROWS), action="append")
    parser.add_argument("--row", choices=sorted(ROWS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        run_row(args.row)
        return
    print(f"{'task':<28} {'seconds':>8} {'peak MiB':>9}  result")
    for name in args.only or ROWS:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--row", name],
                capture_output=True,
                text=True,
                timeout=TIME_LIMIT + 10,
            )
            row = json.loads(done.stdout.splitlines()[-1])
            seconds, rss, result = f"{row['seconds']:8.2f}", f"{row['rss']:9.0f}", row["result"]
        except subprocess.TimeoutExpired:
            seconds, rss, result = f"{'>' + str(int(TIME_LIMIT)):>8}", f"{'-':>9}", "timeout"
        except (IndexError, json.JSONDecodeError):
            seconds, rss, result = f"{'-':>8}", f"{'-':>9}", f"died: {done.stderr[-80:]!r}"
        print(f"{ROWS[name][0]:<28} {seconds} {rss}  {result}", flush=True)


if __name__ == "__main__":
    main()
