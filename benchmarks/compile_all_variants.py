"""Compile every legal variant of an example with its default compiler and report resources.

python benchmarks/compile_all_variants.py examples/cuda/stencil2d/stencil2d.cu [--jobs 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from annotune.annotate import problem_space, read_problem
from annotune.builder import Builder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="compile only the first N")
    args = parser.parse_args()

    problem = read_problem(args.source)
    space = problem_space(problem)
    configs = space.to_dicts(space.legal_indices())[: args.limit]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cache:
        builds = Builder(problem, cache_dir=Path(cache), jobs=args.jobs).build(configs)
    seconds = time.monotonic() - started
    failed = [b for b in builds if not b.ok]
    registers = [r.registers for b in builds for r in b.resources.values()]
    spills = sum(r.spill_stores + r.spill_loads for b in builds for r in b.resources.values())
    print(f"{'source':24}{args.source}")
    print(f"{'variants compiled':24}{len(builds)} of {len(configs)} legal")
    print(f"{'failed':24}{len(failed)}")
    for build in failed[:5]:
        print(f"{'':24}{build.params}: {build.error}")
    if registers:
        print(f"{'registers (min-max)':24}{min(registers)}-{max(registers)}")
        print(f"{'spilled bytes (total)':24}{spills}")
    print(f"{'wall time':24}{seconds:.1f} s")


if __name__ == "__main__":
    main()
