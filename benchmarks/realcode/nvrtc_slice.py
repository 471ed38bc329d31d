"""Does NVRTC compile the device code annotune slices out of real programs? The NVRTC column.

    python benchmarks/realcode/nvrtc_slice.py --suite SUITE --suite-root PATH
        [--all | --sample K --seed S] [--only NAME ...] [--nvcc] [--json]

SUITE is hecbench (its drawn sample, `hecbench/corpus.toml`, the same 20 as `realcode.py`;
`--all` or `--sample K --seed S` draws over every `src/*-cuda` program instead), polybench-acc,
rodinia or cuda-samples (every program, or `--sample K --seed S` of them; how each suite's
programs, translation units and include directories are found is `suites.toml`).

For each translation unit (a .cu file no other file of the program includes, that defines a
kernel; skipped HeCBench programs included, the slice needs no knob), the source is read as
`annotune tune` reads it (a program of the HeCBench sample with its `hecbench/NAME.toml` beside
it, when there is one, for the compile command's include directories and macros; any other
HeCBench program with its Makefile's unconditional `-I` and `-D`), `annotate.device_code`
blanks what NVRTC must not see, and NVRTC compiles what is left for sm_90 with the options,
include path and prelude the builder gives it, once, at the program's defaults. A row says how
many `__global__` functions the cubin holds and which `__global__` templates the source
defines that it lacks (only what something instantiates is compiled; kernel mode cannot load
a template yet), or NVRTC's first error and a category of why (`CATEGORIES`, ours): what would
send every variant of the program to nvcc. `--nvcc` also compiles each failing unit as written
with nvcc, to tell the slice's faults from the program's own (slow: about 2 s a unit).

Kernel mode proper, from a config, is `kernels/`: each toml there declares a kernel of one
program, and `annotune tune main.cu --mode kernel --compile-only` compiles it (see the README).
Nothing is written outside a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ARCH = (9, 0)
SUITES = ("hecbench", "polybench-acc", "rodinia", "cuda-samples")

TEXTURE = "texture reference (removed in CUDA 12)"
# A texture reference's declaration: the program cannot build with CUDA 12 or later, nvcc or not.
_TEXTURE_REFERENCE = re.compile(rb"\btexture\s*<")
# A quoted #include, the only kind that makes a file part of another's translation unit here.
_QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
_SOURCES = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".c", ".cc", ".cpp"})

# NVRTC's first error, sorted into the causes a fix would address, first match wins. The
# patterns are NVRTC's wording; the categories are ours.
CATEGORIES: tuple[tuple[str, str], ...] = (
    (r"cannot open source file", "missing header"),
    (r"texture|surface|tex[123]D", TEXTURE),
    (
        r'namespace "std" has no member (class )?"(abs|min|max|numeric_limits|conditional|'
        r'(false|true)_type|is_\w+|enable_if|swap|sqrt|exp|log|pow|floor|ceil|fabs|fmin|fmax)"',
        "std:: function or trait in device code, its header dropped",
    ),
    (r'namespace "std" has no member', "std:: type left in the slice"),
    (
        r'identifier "(string|vector|map|cout|cerr|endl|ifstream|ofstream)" is undefined',
        "host type named after `using namespace std`",
    ),
    (
        r'identifier "(CHAR_BIT|S?CHAR_M(AX|IN)|U?(SHRT|INT|LONG|LLONG)_M(AX|IN))" is undefined',
        "<climits> constant (the prelude has <cfloat>'s)",
    ),
    (
        r'identifier "U?INT(8|16|32|64|PTR|MAX)_(C|MAX|MIN)" is undefined',
        "<cstdint> macro (the prelude has the types only)",
    ),
    (
        r'identifier "(uint|ulong|ushort|ssize_t|u_int\w*)" is undefined',
        "glibc typedef (<sys/types.h>) the prelude lacks",
    ),
    (
        r"thrust/system/cuda/detail/core/triple_chevron_launch",
        "<cub/cub.cuh> or thrust kept: their host launch code",
    ),
    (r"qualified name is not allowed", "out-of-line member of a host class"),
    (r"is not a template", "use of a template the slice blanked as host code"),
    (r"without execution space annotations", "host function left in the slice"),
    (r"dynamic initialization", "namespace-scope const with a non-constant initializer"),
    (
        r'incomplete type "(struct )?\w+" is not allowed',
        "host class kept whole, a member's type dropped",
    ),
    (r'identifier "CU\w+" is undefined', "driver API type from <cuda.h>"),
    (
        r'name followed by "::" must be a class',
        "X:: where X is a dropped header's namespace or a blanked typedef",
    ),
    (r'identifier "[^"]*" is undefined', "undefined identifier"),
)


@dataclass(frozen=True)
class Unit:
    """One translation unit to slice: its row's name, the main source, the tree the slice's
    copies keep their paths relative to, and what its build adds (include directories,
    `NAME[=VALUE]` macros, the language)."""

    name: str
    source: Path
    tree: Path
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]
    language: str


def category(why: str) -> str:
    """The cause of NVRTC's (or annotune's) first error, as `CATEGORIES` sorts it."""
    if why.startswith("annotune cannot read it"):
        return "annotune cannot read it"
    return next((name for pattern, name in CATEGORIES if re.search(pattern, why)), "other")


def drawn_hecbench(suite_root: Path, draw: tuple[int, int] | None, every: bool) -> list[str]:
    """The CUDA programs of HeCBench to slice: `realcode.py`'s sample unless `every` or `draw`
    ((count, seed), drawn the same way over all of them)."""
    names = sorted(p.name for p in (suite_root / "src").iterdir() if p.name.endswith("-cuda"))
    if every:
        return names
    if draw is None:
        sample = tomllib.loads((HERE / "hecbench" / "corpus.toml").read_text())["sample"]["seed34"]
        draw = (sample["cuda"], sample["seed"])
    return random.Random(draw[1]).sample(names, min(draw[0], len(names)))


def hecbench_units(name: str, suite_root: Path, scratch: Path) -> list[Unit]:
    """A HeCBench program of `corpus.toml`: its source, copied into `scratch` as `realcode.py`
    copies it, read with its toml. Any other: its translation units in place, with no macro
    or include directory but what its Makefile always gives (`makefile_flags`). Raises
    AnnotuneError when the toml cannot be read."""
    from annotune.annotate.config import load_file_config
    from annotune.annotate.source import compiler_macros, language_of

    corpus = tomllib.loads((HERE / "hecbench" / "corpus.toml").read_text())["program"]
    if name not in corpus:
        program, root = suite_root.resolve() / "src" / name, suite_root.resolve()
        sources = translation_units(program)
        include_dirs, defines = makefile_flags(program)
        macros = (*compiler_macros("cuda", None), *defines)
        return [
            Unit(
                name if len(sources) == 1 else f"{name}:{s.relative_to(program)}",
                s,
                root,
                include_dirs,
                macros,
                "cuda",
            )
            for s in sources
        ]
    entry = corpus[name]
    work = scratch / name
    shutil.copytree(suite_root / "src" / name, work)
    for sibling in entry.get("copy", []):
        shutil.copytree(suite_root / "src" / sibling, scratch / sibling, dirs_exist_ok=True)
    source = work / entry.get("source", "main.cu")
    toml = HERE / "hecbench" / f"{name}.toml"
    config = None
    if toml.exists():
        shutil.copy(toml, work / "annotune.toml")
        config = load_file_config(work / "annotune.toml", source)
    include_dirs = [*config.command_include_dirs, *config.include_dirs] if config else []
    language = (config.language if config else None) or language_of(source)
    defines = [*compiler_macros(language, config.compiler if config else None)]
    defines += list(config.defines) if config else []
    return [Unit(name, source, scratch, tuple(include_dirs), tuple(defines), language)]


def makefile_flags(program: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `-I` directories (that exist) and `-D` macros of the program's Makefile, outside any
    `ifeq`/`ifdef` block and free of make variables: what a user would copy into the
    annotune.toml that a program of the drawn sample has. A rough reading, not make's."""
    makefile = program / "Makefile"
    if not makefile.is_file():
        return (), ()
    includes: list[str] = []
    defines: list[str] = []
    depth = 0
    for line in makefile.read_text(errors="replace").splitlines():
        word = line.split(maxsplit=1)[0] if line.split() else ""
        depth += (word in ("ifeq", "ifneq", "ifdef", "ifndef")) - (word == "endif")
        if depth or line.lstrip().startswith("#"):
            continue
        for flag, value in re.findall(r"(?<!\S)-([ID])\s*([^\s$]+)", line):
            if flag == "D":
                defines.append(value)
            elif (program / value).is_dir():
                includes.append(str((program / value).resolve()))
    return tuple(dict.fromkeys(includes)), tuple(dict.fromkeys(defines))


def translation_units(program: Path) -> list[Path]:
    """The .cu files of `program` that no other of its files includes and that define a
    `__global__` function themselves or through the files they include, sorted."""
    files = sorted(p.resolve() for p in program.rglob("*") if p.suffix in _SOURCES and p.is_file())
    includes = {
        f: {
            (f.parent / m.decode(errors="replace")).resolve()
            for m in _QUOTED_INCLUDE.findall(f.read_bytes())
        }
        for f in files
    }
    included = set().union(*includes.values())

    def has_kernel(file: Path, seen: set[Path]) -> bool:
        if file in seen or file not in includes:
            return False
        seen.add(file)
        return b"__global__" in file.read_bytes() or any(
            has_kernel(f, seen) for f in includes[file]
        )

    return [f for f in files if f.suffix == ".cu" and f not in included and has_kernel(f, set())]


def suite_units(
    suite: str, suite_root: Path, draw: tuple[int, int] | None
) -> tuple[list[Unit], int]:
    """The translation units of the suite's programs (`draw`: (count, seed) of the programs
    that have one, else all), and how many program directories hold no kernel."""
    from annotune.annotate.source import compiler_macros

    rules = tomllib.loads((HERE / "suites.toml").read_text())[suite]
    root = suite_root.resolve()
    directories = sorted({p for g in rules["programs"] for p in root.glob(g) if p.is_dir()})
    programs = {p: units for p in directories if (units := translation_units(p))}
    chosen = sorted(programs)
    if draw is not None:
        chosen = sorted(random.Random(draw[1]).sample(chosen, min(draw[0], len(chosen))))
    rows = []
    for program in chosen:
        name = program.relative_to(root).as_posix()
        extra = rules.get("program", {}).get(name, {})
        include_dirs = [
            str(root / d) for d in (*rules.get("include", []), *extra.get("include", []))
        ]
        defines = [*compiler_macros("cuda", None), *extra.get("defines", [])]
        for source in programs[program]:
            row = name if len(programs[program]) == 1 else f"{name}:{source.relative_to(program)}"
            rows.append(Unit(row, source, root, tuple(include_dirs), tuple(defines), "cuda"))
    return rows, len(directories) - len(programs)


def global_functions(translation_unit, parsed) -> tuple[set[str], set[str]]:
    """The names of the `__global__` functions, and apart of the templates, defined in the
    user's files (as kernel mode finds them)."""
    import clang.cindex as ci

    from annotune.annotate.kernels import kernel_definitions

    definitions = kernel_definitions(translation_unit, parsed)
    templates = {
        name
        for name, cursors in definitions.items()
        if any(c.kind == ci.CursorKind.FUNCTION_TEMPLATE for c in cursors)
    }
    return set(definitions) - templates, templates


def slice_row(unit: Unit, scratch: Path, nvcc: bool = False) -> dict:
    """One unit's slice compiled by NVRTC: kernels in the cubin, or the first error (`nvcc`:
    and nvcc's first error on the unit as written, or "compiles")."""
    from annotune.annotate.device_code import device_code
    from annotune.annotate.kernels import parse_cuda
    from annotune.annotate.source import parse_source
    from annotune.builder.compiler import parse_ptxas
    from annotune.builder.nvrtc import (
        NvrtcRequest,
        compile_request,
        nvrtc_options,
        toolkit_include_dirs,
    )
    from annotune.core.diagnostics import AnnotuneError

    row: dict = {"program": unit.name, "source": str(unit.source.relative_to(unit.tree))}
    include_dirs, defines = list(unit.include_dirs), list(unit.defines)
    try:
        parsed = parse_source(
            unit.source, include_dirs=include_dirs, defines=defines, language=unit.language
        )
        translation_unit = parse_cuda(parsed, include_dirs, defines)
        code = device_code(parsed, translation_unit=translation_unit)
    except AnnotuneError as error:
        why = f"annotune cannot read it: {error.message}"
        return {**row, "ok": False, "why": why, "category": category(why)}
    sliced = scratch / "sliced" / unit.name.replace(":", "/")
    shown = {f"{sliced}/": "", f"{unit.tree}/": "", f"{scratch}/": ""}
    for file in parsed.files:
        relative = Path(file.path).resolve().relative_to(unit.tree)
        (sliced / relative).parent.mkdir(parents=True, exist_ok=True)
        (sliced / relative).write_bytes(code.slice(file.path, file.data))
    prelude = scratch / "prelude.h"
    prelude.write_text(code.prelude)
    main = sliced / unit.source.relative_to(unit.tree)
    # The builder's order: the sliced copies first, then the directories they came from.
    includes = [f"-I{main.parent}"]
    for directory in include_dirs:
        inside = Path(directory).resolve().is_relative_to(unit.tree)
        copy = sliced / Path(directory).resolve().relative_to(unit.tree) if inside else None
        includes += [f"-I{copy}"] if copy else []
        includes.append(f"-I{directory}")
    includes += [f"-I{d}" for d in toolkit_include_dirs()]
    macros = [f"-D{d}" for d in defines if d not in ("__CUDACC__", "__NVCC__")]
    options = nvrtc_options(ARCH, macros, includes, str(prelude))
    request = NvrtcRequest(str(main), main.read_bytes(), tuple(options), str(scratch / "k"), 120)
    outcome = compile_request(request)
    if not outcome.ok:
        why = first_error(outcome.log, shown)
        # A texture reference stops any compile (CUDA 12 removed them), whatever NVRTC trips
        # on first (often the reference the slice blanked, as an undefined identifier).
        # A quoted header (not the toolkit's) that the parse did not find is dropped from the
        # slice: a name NVRTC then misses is the include path's doing, not the slice's.
        texture = any(_TEXTURE_REFERENCE.search(f.data) for f in parsed.files)
        said = TEXTURE if texture else makefile_macro(why, unit) or category(why)
        toolkit = toolkit_include_dirs()
        missing = [
            header
            for _, header in parsed.missing_local_includes
            if not any((Path(d) / header).is_file() for d in toolkit)
        ]
        if missing and said in ("undefined identifier", "other"):
            said = "local header not found (an include directory the build gives)"
            row["header"] = missing[0]
        row |= {"ok": False, "why": why, "category": said}
        if nvcc:
            row["nvcc"] = nvcc_error(unit, scratch, shown) or "compiles"
        return row
    kernels = sorted(parse_ptxas(outcome.log))
    plain, templates = global_functions(translation_unit, parsed)
    return {
        **row,
        "ok": True,
        "kernels": len(kernels),
        "templates": len(templates),
        "templates_missing": sorted(t for t in templates if not in_cubin(t, kernels, "I")),
        "kernels_missing": sorted(k for k in plain if not in_cubin(k, kernels, "")),
        "seconds": round(outcome.seconds, 3),
    }


def makefile_macro(why: str, unit: Unit) -> str:
    """The category of an undefined identifier that a Makefile of the source's directory or
    one above it (inside the suite) defines with `-D`: a build setting this run does not give.
    "" for any other error."""
    name = re.search(r'identifier "(\w+)" is undefined', why)
    if not name:
        return ""
    pattern = re.compile(rb"-D\s*" + re.escape(name.group(1).encode()) + rb"\b")
    directories = [d for d in unit.source.parents if d.is_relative_to(unit.tree) and d != unit.tree]
    makefiles = [f for d in directories for f in d.glob("[Mm]akefile*") if f.is_file()]
    if any(pattern.search(f.read_bytes()) for f in makefiles):
        return "macro the Makefile defines (-D), not given here"
    return ""


def in_cubin(name: str, symbols: list[str], after: str) -> bool:
    """Whether a symbol of the cubin is `name`'s (`after`: "I" for a template's instance)."""
    return any(s == name or f"{len(name)}{name}{after}" in s for s in symbols)


def first_error(log: str, shown: dict[str, str]) -> str:
    """The log's first error line, the scratch paths cut from its file names."""
    first = next((line for line in log.splitlines() if "error" in line), log.strip())
    for path, short in shown.items():
        first = first.replace(path, short)
    return first[:300]


def nvcc_error(unit: Unit, scratch: Path, shown: dict[str, str]) -> str:
    """nvcc's first error on the unit as written (a cubin for sm_90, the same include
    directories and macros), "" when it compiles: a slice that NVRTC rejects is a fault of the
    slice only where nvcc builds the original."""
    argv = ["nvcc", "-cubin", f"-arch=sm_{ARCH[0]}{ARCH[1]}", "-std=c++17"]
    argv += [f"-I{d}" for d in (unit.source.parent, *unit.include_dirs)]
    argv += [f"-D{d}" for d in unit.defines if d not in ("__CUDACC__", "__NVCC__")]
    argv += [str(unit.source), "-o", str(scratch / "nvcc.cubin")]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "nvcc ran past 300 s"
    return "" if done.returncode == 0 else first_error(done.stdout + done.stderr, shown)


def failed_row(name: str, source: str, why: str) -> dict:
    return {"program": name, "source": source, "ok": False, "why": why, "category": category(why)}


def summary(rows: list[dict]) -> dict:
    """Compiled and failed counts, and each failure category's count and programs."""
    failures: dict[str, list[str]] = {}
    for row in rows:
        if not row["ok"]:
            failures.setdefault(row["category"], []).append(row["program"])
    programs = {row["program"].split(":")[0] for row in rows}
    whole = programs - {row["program"].split(":")[0] for row in rows if not row["ok"]}
    return {
        "programs": len(programs),
        "programs_compiled": len(whole),
        "units": len(rows),
        "compiled": sum(row["ok"] for row in rows),
        "failed": sum(not row["ok"] for row in rows),
        "no_kernel_in_cubin": sum(row["ok"] and row["kernels"] == 0 for row in rows),
        "templates_missing": sum(len(row.get("templates_missing", [])) for row in rows),
        "kernels_missing": sum(len(row.get("kernels_missing", [])) for row in rows),
        "categories": dict(sorted(failures.items(), key=lambda item: -len(item[1]))),
    }


def said(row: dict) -> str:
    """A row as one line of the table: the kernels, or the category and the first error."""
    if not row["ok"]:
        nvcc = f" [nvcc: {row['nvcc']}]" if "nvcc" in row else ""
        return f"[{row['category']}] {row['why'][:160]}{nvcc}"
    text = f"{row['kernels']} kernels, {row['templates']} templates"
    if row["templates_missing"]:
        text += f" ({len(row['templates_missing'])} not in the cubin)"
    if row["kernels_missing"]:
        text += f"; NOT IN THE CUBIN: {', '.join(row['kernels_missing'])}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=SUITES, default="hecbench")
    parser.add_argument("--suite-root", type=Path, required=True, help="the suite's checkout")
    parser.add_argument("--all", action="store_true", help="hecbench: every CUDA program")
    parser.add_argument("--sample", type=int, help="draw this many programs (with --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=[], help="some of the programs, by name")
    parser.add_argument(
        "--nvcc", action="store_true", help="also compile each failing unit as written with nvcc"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.all and args.sample is not None:
        parser.error("--all and --sample draw differently: give one")
    sys.path.insert(0, str(ROOT))
    draw = (args.sample, args.seed) if args.sample is not None else None
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        from annotune.core.diagnostics import AnnotuneError

        if args.suite == "hecbench":
            names = drawn_hecbench(args.suite_root, draw, args.all)
            units, empty = [], 0
        else:
            names, (units, empty) = [], suite_units(args.suite, args.suite_root, draw)
        for name in names:
            if args.only and name not in args.only:
                continue
            try:
                found = hecbench_units(name, args.suite_root, Path(scratch))
                units += found
                empty += not found
            except AnnotuneError as error:
                rows.append(failed_row(name, "", f"annotune cannot read it: {error.message}"))
        for unit in units:
            if args.only and unit.name.split(":")[0] not in args.only:
                continue
            row = slice_row(unit, Path(scratch), args.nvcc)
            rows.append(row)
            if not args.json:
                print(f"{row['program']:40} {'NVRTC' if row['ok'] else 'FAILS':6} {said(row)}")
    total = summary(rows)
    total["seconds"] = round(time.monotonic() - started, 1)
    total["without_kernel"] = empty
    if args.json:
        print(json.dumps({"suite": args.suite, "rows": rows, **total}, indent=1))
        return 0
    print(
        f"{total['programs']} programs ({total['programs_compiled']} with every slice compiled): "
        f"{total['compiled']} of {total['units']} slices compile with NVRTC "
        f"({total['no_kernel_in_cubin']} of them with no kernel in the cubin), "
        f"{total['failed']} fail; {total['seconds']} s"
        + (f"; {empty} programs hold no kernel, left out" if empty else "")
    )
    for name, programs in total["categories"].items():
        print(f"  {len(programs):3}  {name}: {', '.join(programs[:4])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
