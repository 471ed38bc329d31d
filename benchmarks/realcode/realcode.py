"""Real code: annotune on a drawn sample of a public benchmark suite, as a new user runs it.

    python benchmarks/realcode/realcode.py --suite-root DIR [--only NAME ...] [--json-out F]
    python benchmarks/realcode/realcode.py --from-json F      # the table of an earlier run

DIR is a checkout of HeCBench (https://github.com/zjin-lcf/HeCBench; `git clone --depth 1`
is enough): the programs are DIR/src/NAME. The sample is drawn from the sorted names of
DIR/src by the rule in hecbench/corpus.toml, which also says what each drawn program needs;
hecbench/NAME.toml is the annotune.toml a user would write for it (its knobs as [[file]]
params, the compile command of its Makefile, its smallest arguments and its time line).

For each program the harness copies DIR/src/NAME (and the siblings it reads) into a scratch
directory, never touching DIR, and puts the toml beside the source as annotune.toml
(`--config-mode flag`: under another name, passed with --config). Then, from another
directory than the program's:

1. a plain build: the toml's compile command, untouched source, run by the harness itself
   (and for an OpenMP program one plain run with the toml's arguments and environment): the
   control that says whether a failure is the program's own;
2. `annotune scan SOURCE --json`;
3. CUDA: `annotune tune SOURCE --compile-only --budget N --arch sm_90 --json` (no GPU here);
   OpenMP: a short host tune, `annotune tune SOURCE --budget 3 --json` with few repeats;
4. the rebuild check: the same tune asked again for the default alone must be served from
   what was built or measured (the control), then, after a line is appended to a file the
   build reads (`edit` in corpus.toml; where there is one, a file only a second source of the
   compile command reads), it must be built (CUDA: not from the compile cache) or measured
   (OpenMP: not reused) again; `STALE` in the table says it was not.

It prints one row per program: handled or not, and whose fault a failure is: `program` (the
plain build or run fails too, one plain run takes longer than --max-run-seconds, or the
program has no knob annotune can be told about without a source edit: corpus.toml's `skip`),
`tool` (annotune fails where the plain build and run work, or scan lists fewer knobs than the
toml declares) or `handled`. The rules are in README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "hecbench"
EDIT_LINE = "\n#define ANNOTUNE_REALCODE_EDIT 1 /* appended by benchmarks/realcode */\n"


@dataclass
class Row:
    program: str
    language: str
    outcome: str = ""  # handled, failed, skipped
    fault: str = ""  # handled, tool, program
    detail: str = ""
    rebuild: str = ""  # the rebuild check's verdict
    seconds: float = 0.0
    steps: list[dict] = field(default_factory=list)


def draw(names: list[str], seed: int, count: int) -> list[str]:
    """The sample: `random.Random(seed).sample(sorted(names), count)`, all when fewer."""
    names = sorted(names)
    return random.Random(seed).sample(names, min(count, len(names)))


def annotune_cmd() -> list[str]:
    found = shutil.which("annotune")
    return [found] if found else [sys.executable, "-m", "annotune"]


def run(argv: list[str], cwd: Path, timeout: float, env: dict | None = None) -> dict:
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        err += f"\n[harness] timed out after {timeout:.0f} s"
    return {
        "argv": argv,
        "cwd": str(cwd),
        "rc": rc,
        "stdout": out,
        "stderr": err,
        "seconds": round(time.monotonic() - start, 2),
    }


def parse_json(text: str) -> dict | None:
    """The JSON object annotune printed (after any progress lines), or None."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        start = text.find("{", start + 1)
    return None


def first_error(text: str, limit: int = 220) -> str:
    """The line of a compiler's or annotune's output that says what went wrong."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (
        r"internal error",
        r"internal compiler error",
        r"fatal error",
        r"\berror\b",
        r"Traceback|Exception",
        r"timed out",
        r"warning",
    ):
        for line in lines:
            if re.search(pattern, line, re.IGNORECASE):
                return line[:limit]
    return (lines[-1] if lines else "(no output)")[:limit]


# Why a plain build or run of the untouched program fails: the program's own reasons.
BUILD_REASONS = [
    (r"gsl/|cublasLt\.h|cublas|cudnn|No such file or directory", "a missing library"),
    (r"Unsupported gpu architecture|not supported|was removed", "something the toolkit removed"),
    (r"internal compiler error", "the compiler crashes on it"),
    (r"\berror\b", "does not compile with this toolchain"),
]
RUN_REASONS = [
    (r"no CUDA-capable|no GPU|nvidia-smi", "needs a GPU to run"),
    (r"Error Reading|failed to open|cannot open|No such file", "its input is not in the checkout"),
    (r"timed out", "too slow on this host at its smallest input"),
    (r"", "crashes on the host (its OpenMP target code run on the host)"),
]


def program_reason(text: str, reasons: list[tuple[str, str]]) -> str:
    for pattern, reason in reasons:
        if re.search(pattern, text, re.IGNORECASE):
            return reason
    return "fails on its own"


def plain_command(compile_cmd: str, source: str, output: Path, arch: str | None) -> list[str]:
    argv = []
    for arg in shlex.split(compile_cmd):
        if arg in ("{defines}", "{includes}"):
            continue
        argv.append(arg.replace("{source}", source).replace("{output}", str(output)))
    if arch and Path(argv[0]).name == "nvcc":
        argv.insert(1, f"-arch={arch}")
    return argv


def plain_env(config: dict) -> dict:
    """The environment of a plain run: the toml's env, each {NAME} its parameter's default."""
    defaults = {}
    for name, spec in config.get("params", {}).items():
        if isinstance(spec, dict) and "default" in spec:
            defaults[name] = str(spec["default"])
    env = dict(os.environ)
    for name, value in config.get("env", {}).items():
        env[name] = re.sub(r"\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), value)
    return env


def lines_of(step: dict) -> str:
    return step["stdout"] + "\n" + step["stderr"]


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.suite = Path(args.suite_root).resolve()
        self.corpus = tomllib.loads((CORPUS / "corpus.toml").read_text())
        self.scratch = Path(args.scratch or tempfile.mkdtemp(prefix="annotune-realcode-"))
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.annotune = annotune_cmd()

    def sample(self) -> list[tuple[str, str]]:
        names = [p.name for p in (self.suite / "src").iterdir() if p.is_dir()]
        spec = self.corpus["sample"]
        cuda = draw([n for n in names if n.endswith("-cuda")], spec["seed"], spec["cuda"])
        omp = draw([n for n in names if n.endswith("-omp")], spec["seed"], spec["omp"])
        drawn = [(n, "CUDA") for n in cuda] + [(n, "OpenMP") for n in omp]
        if self.args.only:
            drawn = [(n, lang) for n, lang in drawn if n in self.args.only]
        return drawn

    # -- one program -------------------------------------------------------------------------

    def program(self, name: str, language: str) -> Row:
        row = Row(name, language)
        start = time.monotonic()
        try:
            self._program(row)
        finally:
            row.seconds = round(time.monotonic() - start, 1)
        return row

    def _step(self, row: Row, what: str, step: dict) -> dict:
        step["what"] = what
        row.steps.append(step)
        if self.args.verbose:
            said = f"  {row.program}: {what}: rc {step['rc']} in {step['seconds']} s"
            print(said, file=sys.stderr)
        return step

    def _copy(self, name: str, entry: dict) -> Path:
        root = self.scratch / name
        if root.exists():
            shutil.rmtree(root)
        for rel in [name, *entry.get("copy", [])]:
            source = self.suite / "src" / rel
            if source.is_dir():
                shutil.copytree(source, root / "src" / rel, symlinks=True)
        return root / "src" / name

    def _program(self, row: Row) -> None:
        entry = self.corpus.get("program", {}).get(row.program)
        if entry is None:
            row.outcome, row.fault = "failed", "harness"
            row.detail = "drawn, but corpus.toml has no entry for it"
            return
        program = self._copy(row.program, entry)
        source = entry["source"]
        work = self.scratch / row.program / "work"  # annotune runs here: not the program's dir
        work.mkdir(parents=True, exist_ok=True)
        src_arg = os.path.relpath(program / source, work)
        for argv in entry.get("prepare", []):
            self._step(row, "prepare", run(argv, program, 300))

        if "skip" in entry:
            scan = self._step(row, "scan", run([*self.annotune, "scan", src_arg], work, 300))
            said = first_error(lines_of(scan)) if scan["rc"] else scan["stdout"].splitlines()[0]
            row.outcome, row.fault = "skipped", "program"
            row.detail = f"{entry['skip']}; scan without a toml: {said}"
            return

        toml_path = CORPUS / f"{row.program}.toml"
        config = tomllib.loads(toml_path.read_text())["file"][0]
        config_args: list[str] = []
        if self.args.config_mode == "beside":
            shutil.copy(toml_path, program / "annotune.toml")
        else:
            shutil.copy(toml_path, program / "realcode.toml")
            config_args = ["--config", os.path.relpath(program / "realcode.toml", work)]

        # 1. the control: the program built (and run) as its Makefile would, without annotune
        plain_exe = self.scratch / row.program / "plain.exe"
        arch = self.args.arch if row.language == "CUDA" else None
        build = self._step(
            row,
            "plain build",
            run(plain_command(config["compile"], source, plain_exe, arch), program, 900),
        )
        if build["rc"] != 0:
            said = lines_of(build)
            row.outcome, row.fault = "failed", "program"
            reason = program_reason(said, BUILD_REASONS)
            row.detail = f"{reason}: the plain build fails: {first_error(said)}"
            self._annotune_too(row, src_arg, work, config_args)
            return
        note = ""  # what the plain run says that does not stop the tune
        if row.language == "OpenMP":
            env = plain_env(config)
            argv = [str(plain_exe), *config.get("args", [])]
            ran = self._step(row, "plain run", run(argv, program, config.get("timeout", 20), env))
            if ran["rc"] != 0:
                said = lines_of(ran)
                what = f"exit code {ran['rc']}" if ran["rc"] > 0 else f"signal {-ran['rc']}"
                if ran["rc"] == 124:
                    what = f"no end within {config.get('timeout', 20)} s"
                row.outcome, row.fault = "failed", "program"
                row.detail = (
                    f"{program_reason(said, RUN_REASONS)}: the plain run fails on the host "
                    f"({what}): {first_error(said)}"
                )
                self._annotune_too(row, src_arg, work, config_args)
                return
            if ran["seconds"] > self.args.max_run_seconds:
                row.outcome, row.fault = "failed", "program"
                row.detail = (
                    f"too slow for a short tune: one plain run at its smallest input takes "
                    f"{ran['seconds']:.0f} s (the rule: at most {self.args.max_run_seconds:.0f} s)"
                )
                self._annotune_too(row, src_arg, work, config_args)
                return
            if re.search(r"^\s*FAIL", ran["stdout"], re.MULTILINE):
                note = "the program's own check prints FAIL on the host (exit code 0); "

        # 2. scan
        scan = self._step(
            row, "scan", run([*self.annotune, "scan", src_arg, "--json", *config_args], work, 300)
        )
        scanned = parse_json(scan["stdout"])
        if scan["rc"] != 0 or scanned is None:
            row.outcome, row.fault = "failed", "tool"
            row.detail = f"scan exits {scan['rc']}: {first_error(lines_of(scan))}"
            return
        found = {p["name"] for p in scanned.get("params", [])}
        missing = sorted(set(config.get("params", {})) - found)
        if missing:
            row.outcome, row.fault = "failed", "tool"
            row.detail = f"scan does not list declared knobs {missing}"
            return

        # 3. tune
        tune_argv = [*self.annotune, "tune", src_arg, "--json", *config_args]
        if row.language == "CUDA":
            tune_argv += ["--compile-only", "--arch", self.args.arch, "--budget"]
            tune = self._step(
                row, "tune", run([*tune_argv, str(self.args.cuda_budget)], work, 1200)
            )
        else:
            tune_argv += [*self.args.omp_options.split(), "--budget"]
            tune = self._step(row, "tune", run([*tune_argv, str(self.args.omp_budget)], work, 1200))
        report = parse_json(tune["stdout"])
        space = scanned.get("space", {}).get("legal")
        if tune["rc"] != 0 or report is None:
            row.outcome, row.fault = "failed", "tool"
            row.detail = f"tune exits {tune['rc']}: {first_error(lines_of(tune))}"
            crashed = r"exited with (signal|code)|timed out"
            if row.language == "OpenMP" and re.search(crashed, lines_of(tune)):
                # the program's own, if it also fails outside annotune when run a few times more
                failed = 0
                for _ in range(3):
                    again = run(argv, program, config.get("timeout", 20), env)
                    failed += self._step(row, "plain run again", again)["rc"] != 0
                if failed:
                    row.fault = "program"
                    row.detail = (
                        f"crashes on the host now and then (its OpenMP target code run on the "
                        f"host): {failed} of 3 more plain runs fail too; annotune: "
                        f"{first_error(lines_of(tune))}"
                    )
            return
        row.outcome, row.fault = "handled", "handled"
        row.detail = note
        if row.language == "CUDA":
            kinds = "; ".join(
                f"{f.get('count', '?')} {f.get('kind', f.get('status', ''))}: "
                f"{str(f.get('message', ''))[:120]}"
                for f in report.get("failures", [])
            )
            row.detail += (
                f"{plural(len(found), 'knob')}, {space} legal; "
                f"compiled {report.get('compiled')} of "
                f"{report.get('compiled', 0) + report.get('failed', 0)}"
                + (f", failed: {kinds}" if kinds else "")
                + (f"; kernels recorded: {len(report.get('kernels') or {})}")
            )
        else:
            best, default = report.get("best") or {}, report.get("default") or {}
            row.detail += (
                f"{plural(len(found), 'knob')}, {space} legal; "
                f"{report.get('evaluations')} measured; "
                f"default {fmt_ms(default.get('time'))}, best {fmt_ms(best.get('time'))} "
                f"{best.get('params')}; speedup {fmt_ratio(report.get('speedup'))}"
                + (", kept the default" if report.get("kept_default") else "")
            )
        # 4. the rebuild check
        if entry.get("edit"):
            row.rebuild = self._rebuild(row, program / entry["edit"], tune_argv, work)
        else:
            row.rebuild = "n/a (no file to edit that the source does not include)"

    def _annotune_too(self, row: Row, src_arg: str, work: Path, config_args: list[str]) -> None:
        """What annotune says about a program that fails on its own: a tool fault if it crashes."""
        argv = [*self.annotune, "scan", src_arg, "--json", *config_args]
        scan = self._step(row, "scan", run(argv, work, 300))
        if scan["rc"] != 0 and "internal error" in lines_of(scan):
            row.fault = "tool"
            row.detail += f"; and scan crashes: {first_error(lines_of(scan))}"

    def _rebuild(self, row: Row, edited: Path, tune_argv: list[str], work: Path) -> str:
        cuda = row.language == "CUDA"
        key = "cached" if cuda else "reused"
        again = [*tune_argv, "1", *([] if cuda else ["--recheck", "0"])]

        def served() -> int | None:
            step = self._step(row, f"rebuild check ({key})", run(again, work, 600))
            report = parse_json(step["stdout"])
            return None if report is None else int(report.get(key) or 0)

        before = served()
        if before is None:
            return "not checked: the repeated tune printed no report"
        if before == 0:
            return f"not checked: unchanged, the default was not {key} either (no cache to test)"
        with edited.open("a") as f:
            f.write(EDIT_LINE)
        after = served()
        name = edited.name
        if after is None:
            return f"not checked: after editing {name} the tune printed no report"
        if after:
            return f"STALE: after editing {name} the default was {key}, not rebuilt"
        return f"holds: editing {name} rebuilt it"

    # -- all of them ------------------------------------------------------------------------

    def main(self) -> list[Row]:
        rows = []
        started = time.monotonic()
        for name, language in self.sample():
            print(f"[{time.monotonic() - started:6.0f} s] {name} ...", file=sys.stderr, flush=True)
            rows.append(self.program(name, language))
            row = rows[-1]
            print(f"           {row.outcome} ({row.fault}): {row.detail}", file=sys.stderr)
        return rows


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def fmt_ratio(value: float | None) -> str:
    return "none claimed" if value is None else f"{value:.2f}x"


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def markdown(rows: list[Row]) -> str:
    out = [
        "| program | language | outcome | fault | detail | rebuild check |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        detail = r.detail.replace("|", "\\|")
        out.append(
            f"| {r.program} | {r.language} | {r.outcome} | {r.fault} | {detail} | "
            f"{r.rebuild or '-'} |"
        )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.fault] = counts.get(r.fault, 0) + 1
    checks: dict[str, int] = {}
    for r in rows:
        if r.rebuild:
            verdict = r.rebuild.split(":")[0].split(" (")[0]
            checks[verdict] = checks.get(verdict, 0) + 1
    out.append("")
    out.append(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    out.append("rebuild check: " + ", ".join(f"{k} {v}" for k, v in sorted(checks.items())))
    return "\n".join(out)


def _load(path: str) -> list[dict]:
    return json.loads(Path(path).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-root", help="a HeCBench checkout (has src/)")
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
    parser.add_argument("--from-json", help="print the table of an earlier --json-out only")
    args = parser.parse_args(argv)
    if args.from_json:
        fields = Row.__dataclass_fields__
        rows = [Row(**{k: v for k, v in r.items() if k in fields}) for r in _load(args.from_json)]
        print(markdown(rows))
        return 0
    if not args.suite_root or not (Path(args.suite_root) / "src").is_dir():
        parser.error("--suite-root must be a HeCBench checkout (a directory with src/)")
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
