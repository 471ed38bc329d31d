"""Does NVRTC compile the device code annotune slices out of real programs? The NVRTC column.

    python benchmarks/realcode/nvrtc_slice.py --suite-root /path/to/HeCBench [--json]

For each CUDA program of the drawn HeCBench sample (`hecbench/corpus.toml`, the same 20 as
`realcode.py`), skipped ones included (the slice does not need a knob): the source is read as
`annotune tune` reads it (its `hecbench/NAME.toml` beside it, when there is one, for the
compile command's include directories and macros), `annotate.device_code` blanks what NVRTC
must not see, and NVRTC compiles what is left for sm_90 with the options, include path and
prelude the builder gives it, once, at the program's defaults. A row says how many `__global__`
functions the cubin holds (templates only where something instantiates them) or NVRTC's first
error: what would send every variant of the program to nvcc.

Kernel mode proper, from a config, is `kernels/`: each toml there declares a kernel of one
program, and `annotune tune main.cu --mode kernel --compile-only` compiles it (see the README).
Nothing is written outside a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ARCH = (9, 0)


def drawn(suite_root: Path) -> list[str]:
    """The CUDA programs of the sample, as `realcode.py` draws them."""
    corpus = tomllib.loads((HERE / "hecbench" / "corpus.toml").read_text())
    sample = corpus["sample"]
    names = sorted(p.name for p in (suite_root / "src").iterdir() if p.name.endswith("-cuda"))
    return random.Random(sample["seed"]).sample(names, sample["cuda"])


def slice_row(name: str, suite_root: Path, scratch: Path) -> dict:
    """One program's slice compiled by NVRTC: kernels in the cubin, or the first error."""
    from annotune.annotate.config import load_file_config
    from annotune.annotate.device_code import device_code
    from annotune.annotate.frontend import compiler_macros, language_of, parse_source
    from annotune.annotate.kernel import parse_cuda
    from annotune.builder.compiler import parse_ptxas
    from annotune.builder.nvrtc import (
        NvrtcRequest,
        compile_request,
        nvrtc_options,
        toolkit_include_dirs,
    )
    from annotune.core.diagnostics import AnnotuneError

    corpus = tomllib.loads((HERE / "hecbench" / "corpus.toml").read_text())["program"]
    entry = corpus.get(name, {})
    work = scratch / name
    shutil.copytree(suite_root / "src" / name, work)
    for sibling in entry.get("copy", []):
        shutil.copytree(suite_root / "src" / sibling, scratch / sibling, dirs_exist_ok=True)
    source = work / entry.get("source", "main.cu")
    toml = HERE / "hecbench" / f"{name}.toml"
    row: dict = {"program": name, "source": source.name, "skip": "skip" in entry}
    try:
        config = None
        if toml.exists():
            shutil.copy(toml, work / "annotune.toml")
            config = load_file_config(work / "annotune.toml", source)
        include_dirs = [*config.command_include_dirs, *config.include_dirs] if config else []
        language = (config.language if config else None) or language_of(source)
        defines = [*compiler_macros(language, config.compiler if config else None)]
        defines += list(config.defines) if config else []
        parsed = parse_source(source, include_dirs=include_dirs, defines=defines, language=language)
        code = device_code(parsed, translation_unit=parse_cuda(parsed, include_dirs, defines))
    except AnnotuneError as error:
        return {**row, "ok": False, "why": f"annotune cannot read it: {error.message}"}
    sliced = scratch / "sliced" / name
    for file in parsed.files:
        relative = Path(file.path).resolve().relative_to(scratch)
        (sliced / relative).parent.mkdir(parents=True, exist_ok=True)
        (sliced / relative).write_bytes(code.slice(file.path, file.data))
    prelude = scratch / "prelude.h"
    prelude.write_text(code.prelude)
    main = sliced / source.relative_to(scratch)
    includes = [f"-I{main.parent}", *(f"-I{d}" for d in include_dirs)]
    includes += [f"-I{d}" for d in toolkit_include_dirs()]
    options = nvrtc_options(ARCH, [], includes, str(prelude))
    request = NvrtcRequest(str(main), main.read_bytes(), tuple(options), str(scratch / "k"), 120)
    outcome = compile_request(request)
    if not outcome.ok:
        first = next((line for line in outcome.log.splitlines() if "error" in line), outcome.log)
        return {**row, "ok": False, "why": first.replace(str(scratch) + "/", "")[:300]}
    kernels = sorted(parse_ptxas(outcome.log))
    return {**row, "ok": True, "kernels": len(kernels), "seconds": round(outcome.seconds, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-root", type=Path, required=True, help="a HeCBench checkout")
    parser.add_argument("--only", nargs="*", default=[], help="some of the drawn programs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in drawn(args.suite_root):
            if args.only and name not in args.only:
                continue
            row = slice_row(name, args.suite_root, Path(scratch))
            rows.append(row)
            if not args.json:
                said = f"{row['kernels']} kernels" if row["ok"] else row["why"]
                print(f"{name:24} {'NVRTC' if row['ok'] else 'FAILS':6} {said}", flush=True)
    compiled = sum(row["ok"] for row in rows)
    if args.json:
        print(json.dumps({"rows": rows, "compiled": compiled, "programs": len(rows)}, indent=1))
    else:
        print(f"{compiled} of {len(rows)} slices compile with NVRTC")
    return 0


if __name__ == "__main__":
    sys.exit(main())
