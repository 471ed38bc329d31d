"""Real code: annotune on a drawn sample of a public benchmark suite, as a new user runs it.

    python benchmarks/realcode/realcode.py --suite-root DIR [--sample NAME] [--only NAME ...]
                                           [--json-out F]
    python benchmarks/realcode/realcode.py --from-json F [F ...]   # the table of earlier runs

DIR is a checkout of HeCBench (https://github.com/zjin-lcf/HeCBench; `git clone --depth 1`
is enough): the programs are DIR/src/NAME. The sample (`--sample`, a `[sample.NAME]` of
hecbench/corpus.toml: seed45, 40 CUDA and 20 OpenMP programs, by default; seed34, the first
run's 20 and 10) is drawn from the sorted names of DIR/src; corpus.toml also says what each
drawn program needs, and hecbench/NAME.toml is the annotune.toml a user would write for it
(its knobs, the compile command of its Makefile, its smallest arguments, its time line and
what it prints when it is right).

For each program the harness copies DIR/src/NAME (and the siblings it reads) into a scratch
directory, never touching DIR, puts the toml beside the source as annotune.toml and, from
another directory than the program's, runs the control (a plain build, and for OpenMP a plain
run), `annotune scan`, `annotune tune` (CUDA: compile-only, no GPU here; OpenMP: a short host
tune) and the rebuild check (harness.py). The table (table.py) says per program how its knobs
are written, whether it was tuned from the config alone, whose fault a failure is, how every
variant's output was checked, and the reach over the programs in scope. The rules are in
README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DEFAULT_SAMPLE, Row, load_corpus, samples  # noqa: E402
from table import markdown  # noqa: E402


def load_rows(paths: list[str]) -> list[Row]:
    """The rows of earlier runs' JSON, in order (a run in chunks is several files)."""
    fields = Row.__dataclass_fields__
    rows = []
    for path in paths:
        for r in json.loads(Path(path).read_text()):
            rows.append(Row(**{k: v for k, v in r.items() if k in fields}))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-root", help="a HeCBench checkout (has src/)")
    parser.add_argument(
        "--sample",
        default=DEFAULT_SAMPLE,
        help=f"which [sample.NAME] of corpus.toml to draw (default {DEFAULT_SAMPLE})",
    )
    parser.add_argument("--scratch", help="where the copies go (default: a new temp dir)")
    parser.add_argument("--only", nargs="*", help="these drawn programs only")
    parser.add_argument("--arch", default="sm_90", help="nvcc target (default sm_90)")
    parser.add_argument("--cuda-budget", type=int, default=6, help="configurations compiled")
    parser.add_argument("--omp-budget", type=int, default=3, help="configurations measured")
    parser.add_argument(
        "--omp-options",
        default="--repeats 3 --max-repeats 5 --recheck-rounds 6",
        help="more tune options for an OpenMP program's host tune",
    )
    parser.add_argument(
        "--max-run-seconds",
        type=float,
        default=10.0,
        help="an OpenMP program whose one plain run takes longer is not tuned (too slow)",
    )
    parser.add_argument(
        "--config-mode",
        choices=("beside", "flag"),
        default="beside",
        help="the toml as annotune.toml beside the source, or under another name via --config",
    )
    parser.add_argument("--json-out", help="write every step's command and output here")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--from-json", nargs="+", help="print the table of earlier --json-out files only"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        print(markdown(load_rows(args.from_json)))
        return 0
    if args.sample not in samples(load_corpus()):
        parser.error(f"--sample: corpus.toml has {sorted(samples(load_corpus()))}")
    if not args.suite_root or not (Path(args.suite_root) / "src").is_dir():
        parser.error("--suite-root must be a HeCBench checkout (a directory with src/)")
    from harness import Harness  # the table alone needs none of the harness

    started = time.monotonic()
    harness = Harness(args)
    rows = harness.main()
    print(markdown(rows))
    print(f"\nwall time {time.monotonic() - started:.0f} s; scratch {harness.scratch}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
