"""The corpus: which programs are drawn, what each needs, and what a row of the table holds.

corpus.toml names the samples (`[sample.NAME]`: seed and counts) and holds one `[program.NAME]`
entry for every program any sample draws, so that two samples sharing a program share its
toml. The draw is a function of the checkout's directory names and the seed alone, never of
which programs we like. A program's knob form is read from its toml and from where `scan`
found each knob, not written by hand, so that the column says what the config really used.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "hecbench"
DEFAULT_SAMPLE = "seed45"
LANGUAGES = {"-cuda": ("CUDA", "cuda"), "-omp": ("OpenMP", "omp")}


@dataclass
class Row:
    """One program's result. `program`, `language`, `outcome` and `fault` keep the meaning
    they had in the first runs, so that later runs compare."""

    program: str
    language: str
    outcome: str = ""  # handled, failed, skipped
    fault: str = ""  # handled, tool, program, harness
    detail: str = ""
    rebuild: str = ""  # the rebuild check's verdict
    seconds: float = 0.0
    steps: list[dict] = field(default_factory=list)
    sample: str = ""
    form: str = ""  # how the knobs are written (or the form that stops the program)
    scope: bool = True  # launches a kernel of its own / has a parallel region: counted in reach
    check: str = ""  # how each variant's output was checked
    named: bool = False  # scan lists every knob of the toml: the config alone names them


def draw(names: list[str], seed: int, count: int) -> list[str]:
    """The sample: `random.Random(seed).sample(sorted(names), count)`, all when fewer."""
    names = sorted(names)
    return random.Random(seed).sample(names, min(count, len(names)))


def load_corpus() -> dict:
    return tomllib.loads((CORPUS / "corpus.toml").read_text())


def samples(corpus: dict) -> dict[str, dict]:
    return corpus["sample"]


def drawn(suite: Path, corpus: dict, sample: str) -> list[tuple[str, str]]:
    """(name, language) of every program `sample` draws from `suite`/src: every directory,
    the empty ones a mirror lacks the files of included, or the draw would change."""
    names = [p.name for p in (suite / "src").iterdir() if p.is_dir()]
    spec = samples(corpus)[sample]
    out = []
    for suffix, (language, key) in LANGUAGES.items():
        pool = [n for n in names if n.endswith(suffix)]
        out += [(n, language) for n in draw(pool, spec["seed"], spec[key])]
    return out


# -- the form of a program's knobs ---------------------------------------------------------


def _launch_names(config: dict) -> set[str]:
    """Knob names used in [[file.launch]] expressions."""
    names: set[str] = set()
    for launch in config.get("launch", []):
        for key in ("grid", "block", "shared"):
            names |= set(re.findall(r"[A-Za-z_]\w*", str(launch.get(key, ""))))
        for arg in launch.get("template", []):
            names |= set(re.findall(r"[A-Za-z_]\w*", str(arg)))
    return names


def _declared_form(line: str, name: str) -> str:
    """What a knob named by its declaration is, read from the line scan located it at."""
    text = line.strip()
    if text.startswith("#"):
        return "macro"
    if re.match(rf"^(\w+\s*(\.\s*\w+)?\s*)?{re.escape(name)}\s*=", text) and not re.search(
        r"\b(int|unsigned|long|size_t|auto|short|char)\b", text
    ):
        return "statement"
    if re.search(r"\bdim3\b", text):
        return "dim3 of one number"
    if re.search(r"\b(const|constexpr|enum)\b", text):
        return "constant"
    return "variable"


def knob_forms(config: dict, scanned: dict | None, work: Path) -> str:
    """The forms of the toml's knobs, e.g. `macro, launch rewritten`: each param by the key
    that places it (clause, launch, dim3), its `{NAME}` in args or env, its use in a
    [[file.launch]], or else the line scan found its declaration on (scan's paths are read
    from `work`, the directory it ran in)."""
    forms: list[str] = []
    located = {p["name"]: p.get("location") or {} for p in (scanned or {}).get("params", [])}
    in_launch = _launch_names(config)
    args = " ".join(config.get("args", []))
    env = " ".join(config.get("env", {}).values())
    for name, spec in config.get("params", {}).items():
        spec = spec if isinstance(spec, dict) else {}
        if "clause" in spec:
            form = "added clause" if spec.get("add") else "clause literal"
        elif "launch" in spec:
            form = "launch literal" + (" (dim3 component)" if "." in spec.get("arg", "") else "")
        elif "dim3" in spec:
            form = "dim3 component"
        elif f"{{{name}}}" in args:
            form = "args"
        elif f"{{{name}}}" in env:
            form = "environment"
        else:
            form = ""
            where = located.get(name, {})
            path = work / where.get("file", "")  # an absolute path stays as it is
            if (
                where.get("file")
                and where.get("line")
                and path.is_file()
                and path.suffix != ".toml"
            ):
                lines = path.read_text(errors="replace").splitlines()
                if where["line"] <= len(lines):
                    form = _declared_form(lines[where["line"] - 1], name)
            if not form:
                form = "launch rewritten" if name in in_launch else "declared by the config"
        if name in in_launch and form != "launch rewritten":
            form += " + launch rewritten"
        if form not in forms:
            forms.append(form)
    return ", ".join(forms)


# -- what checks a variant's output --------------------------------------------------------


def prints_a_verdict(program: Path) -> bool:
    """Whether the program's own code prints PASS or FAIL (a string literal holding the word,
    not a `[FAIL]` log level): its check, which the toml must then give as [file.check]."""
    literal = re.compile(r'"(?:[^"\\\n]|\\.)*"')  # left to right: quotes pair up
    for path in program.rglob("*"):
        if path.suffix in (".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".cuh") and path.is_file():
            for text in literal.findall(path.read_text(errors="replace")):
                if re.search(r"(?<!\[)\b(PASS|FAIL)", text):
                    return True
    return False


def check_rules(config: dict) -> str:
    rules = config.get("check", {})
    return ", ".join(f"{k} {rules[k]!r}" for k in ("expect", "reject", "result") if k in rules)
