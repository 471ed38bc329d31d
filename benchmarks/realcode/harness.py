"""One drawn program, tuned as a new user would: the control, scan, tune, the rebuild check.

The control (a plain build, and for OpenMP a plain run, without annotune) comes first so that
every failure after it can be put down to annotune (`tool`) or to the program (`program`):
the rules are in README.md beside this file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from corpus import CORPUS, Row, check_rules, drawn, knob_forms, load_corpus, prints_a_verdict
from steps import (
    BUILD_REASONS,
    RUN_REASONS,
    annotune_cmd,
    first_error,
    lines_of,
    parse_json,
    plain_args,
    plain_command,
    plain_env,
    program_reason,
    run,
)
from table import fmt_ms, fmt_ratio, plural

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

EDIT_LINE = "\n#define ANNOTUNE_REALCODE_EDIT 1 /* appended by benchmarks/realcode */\n"


def failed_rules(rules: dict, text: str) -> str:
    """The [file.check] rule a plain run's output fails (expect, reject), or ''."""
    if "expect" in rules and not re.search(rules["expect"], text, re.MULTILINE):
        return f"expect {rules['expect']!r}: nothing in the output matches"
    if "reject" in rules:
        found = re.search(rules["reject"], text, re.MULTILINE)
        if found:
            line = text[text.rfind("\n", 0, found.start()) + 1 :].split("\n", 1)[0]
            return f"reject {rules['reject']!r} matches {line.strip()[:80]!r}"
    return ""


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.suite = Path(args.suite_root).resolve()
        self.corpus = load_corpus()
        self.scratch = Path(args.scratch or tempfile.mkdtemp(prefix="annotune-realcode-"))
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.annotune = annotune_cmd()

    def sample(self) -> list[tuple[str, str]]:
        programs = drawn(self.suite, self.corpus, self.args.sample)
        if self.args.only:
            programs = [(n, lang) for n, lang in programs if n in self.args.only]
        return programs

    # -- one program -------------------------------------------------------------------------

    def program(self, name: str, language: str) -> Row:
        row = Row(name, language, sample=self.args.sample)
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

        if "skip" in entry or "none" in entry:
            scan = self._step(row, "scan", run([*self.annotune, "scan", src_arg], work, 300))
            said = first_error(lines_of(scan)) if scan["rc"] else scan["stdout"].splitlines()[0]
            row.outcome, row.fault = "skipped", "program"
            row.scope = "none" not in entry
            row.form = entry.get("form", "")
            row.detail = f"{entry.get('skip') or entry['none']}; scan without a toml: {said}"
            return

        toml_path = CORPUS / f"{row.program}.toml"
        config = tomllib.loads(toml_path.read_text())["file"][0]
        # the form that stops a program annotune fails on is said in corpus.toml, else read
        row.form = entry.get("form") or knob_forms(config, None, work)
        rules = config.get("check", {})
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
            self._annotune_too(row, src_arg, work, config_args, config)
            return
        note = ""  # what the plain run says that does not stop the tune
        argv: list[str] = []
        env: dict = {}
        if row.language == "OpenMP":
            env = plain_env(config)
            argv = [str(plain_exe), *plain_args(config)]
            run_dir = program / config.get("run_dir", ".")
            ran = self._step(row, "plain run", run(argv, run_dir, config.get("timeout", 20), env))
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
                self._annotune_too(row, src_arg, work, config_args, config)
                return
            if ran["seconds"] > self.args.max_run_seconds:
                row.outcome, row.fault = "failed", "program"
                row.detail = (
                    f"too slow for a short tune: one plain run at its smallest input takes "
                    f"{ran['seconds']:.0f} s (the rule: at most {self.args.max_run_seconds:.0f} s)"
                )
                self._annotune_too(row, src_arg, work, config_args, config)
                return
            failing = failed_rules(rules, lines_of(ran))
            if failing:
                row.outcome, row.fault = "failed", "program"
                row.detail = (
                    f"its own check fails on the host at the defaults, so no variant could be "
                    f"checked against it: {failing}"
                )
                self._annotune_too(row, src_arg, work, config_args, config)
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
        row.form = entry.get("form") or knob_forms(config, scanned, work)
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
            budget = str(self.args.cuda_budget)
        else:
            tune_argv += [*self.args.omp_options.split(), "--budget"]
            budget = str(self.args.omp_budget)
        tune = self._step(row, "tune", run([*tune_argv, budget], work, 1200))
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
                    again = run(argv, program / config.get("run_dir", "."), 60, env)
                    failed += self._step(row, "plain run again", again)["rc"] != 0
                if failed:
                    row.fault = "program"
                    row.detail = (
                        f"crashes on the host now and then (its OpenMP target code run on the "
                        f"host): {failed} of 3 more plain runs fail too; annotune: "
                        f"{first_error(lines_of(tune))}"
                    )
            return
        row.outcome, row.fault, row.named = "handled", "handled", True
        row.detail = note + self._tuned(row, report, found, space)
        row.check = self._checked(row, config, report, program)
        # 4. the rebuild check
        if entry.get("edit"):
            row.rebuild = self._rebuild(row, program / entry["edit"], tune_argv, work)
        else:
            row.rebuild = "n/a (no file to edit that the source does not include)"

    def _tuned(self, row: Row, report: dict, found: set[str], space: object) -> str:
        if row.language == "CUDA":
            kinds = "; ".join(
                f"{f.get('count', '?')} {f.get('kind', f.get('status', ''))}: "
                f"{str(f.get('message', f.get('error', '')))[:120]}"
                for f in report.get("failures", [])
            )
            return (
                f"{plural(len(found), 'knob')}, {space} legal; "
                f"compiled {report.get('compiled')} of "
                f"{report.get('compiled', 0) + report.get('failed', 0)}"
                + (f", failed: {kinds}" if kinds else "")
                + (f"; kernels recorded: {len(report.get('kernels') or {})}")
            )
        best, default = report.get("best") or {}, report.get("default") or {}
        return (
            f"{plural(len(found), 'knob')}, {space} legal; "
            f"{report.get('evaluations')} measured; "
            f"default {fmt_ms(default.get('time'))}, best {fmt_ms(best.get('time'))} "
            f"{best.get('params')}; speedup {fmt_ratio(report.get('speedup'))}"
            + (", kept the default" if report.get("kept_default") else "")
        )

    def _checked(self, row: Row, config: dict, report: dict, program: Path) -> str:
        """How each variant's output was checked: by the toml's rules where the program checks
        itself (PASS/FAIL), and which variants those rules made invalid."""
        rules = check_rules(config)
        own = prints_a_verdict(program)
        if not rules:
            return (
                "MISSING: the program prints PASS/FAIL, the toml checks nothing"
                if own
                else ("exit code only (the program prints no verdict)")
            )
        if row.language == "CUDA":
            return f"{rules}: not run (compile-only, no GPU)"
        failures = report.get("failures", [])
        wrong = sum(f.get("count", 0) for f in failures if f.get("status") == "wrong_output")
        best = (report.get("best") or {}).get("params")
        bad = [f.get("params") for f in failures if f.get("status") == "wrong_output"]
        said = f"{rules}: every run checked, {wrong} wrong_output (invalid)"
        if best is not None and best in bad:
            said += "; WRONG: the winner failed the check"
        return said

    def _annotune_too(
        self, row: Row, src_arg: str, work: Path, config_args: list[str], config: dict
    ) -> None:
        """What annotune says about a program that fails on its own: a tool fault if it crashes,
        and whether the config alone names its knobs (`named`), which a tune here cannot show."""
        argv = [*self.annotune, "scan", src_arg, "--json", *config_args]
        scan = self._step(row, "scan", run(argv, work, 300))
        if scan["rc"] != 0 and "internal error" in lines_of(scan):
            row.fault = "tool"
            row.detail += f"; and scan crashes: {first_error(lines_of(scan))}"
        scanned = parse_json(scan["stdout"]) if scan["rc"] == 0 else None
        if scanned is not None:
            found = {p["name"] for p in scanned.get("params", [])}
            row.named = set(config.get("params", {})) <= found
            if not self.corpus["program"][row.program].get("form"):
                row.form = knob_forms(config, scanned, work)
            if row.named:
                row.detail += f"; scan finds its {plural(len(found), 'knob')} from the config"
        else:
            row.detail += f"; scan exits {scan['rc']}: {first_error(lines_of(scan))}"

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
