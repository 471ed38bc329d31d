"""The harness's table and its totals, made from the rows alone (a run's JSON), never by hand.

Reach is counted over the programs in scope: those that launch a kernel of their own (CUDA)
or have a parallel region (OpenMP). A program the sample draws that has neither is listed,
out of scope, so that no drawn program goes unsaid.
"""

from __future__ import annotations

from corpus import Row


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def fmt_ratio(value: float | None) -> str:
    return "none claimed" if value is None else f"{value:.2f}x"


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def _cell(text: str) -> str:
    return (text or "-").replace("|", "\\|")


def _pct(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f}%)" if whole else f"{part} of 0"


def markdown(rows: list[Row]) -> str:
    out = [
        "| program | language | knob form | outcome | fault | detail | output check "
        "| rebuild check |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r.program} | {r.language} | {_cell(r.form)} | {r.outcome} | {r.fault} | "
            f"{_cell(r.detail)} | {_cell(r.check)} | {_cell(r.rebuild)} |"
        )
    out.append("")
    out += summary(rows)
    return "\n".join(out)


def summary(rows: list[Row]) -> list[str]:
    counts: dict[str, int] = {}
    checks: dict[str, int] = {}
    for r in rows:
        counts[r.fault] = counts.get(r.fault, 0) + 1
        if r.rebuild:
            verdict = r.rebuild.split(":")[0].split(" (")[0]
            checks[verdict] = checks.get(verdict, 0) + 1
    out = [
        f"Rows: {len(rows)}; faults: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        "Rebuild check: " + ", ".join(f"{k} {v}" for k, v in sorted(checks.items())),
    ]
    scope = [r for r in rows if r.scope]
    tuned = [r for r in scope if r.outcome == "handled"]
    ran = [r for r in scope if not (r.outcome == "failed" and r.fault == "program")]
    line = f"Reach: {_pct(len(tuned), len(scope))} programs in scope tuned from a config alone"
    for language in ("CUDA", "OpenMP"):
        lang = [r for r in scope if r.language == language]
        line += f"; {language} {_pct(sum(r.outcome == 'handled' for r in lang), len(lang))}"
    out.append(line)
    out.append(
        f"Of those that build (and, OpenMP, run) here untouched: {_pct(len(tuned), len(ran))}"
    )
    named = [r for r in scope if r.named]
    out.append(
        f"Named from a config alone (scan lists every knob of its toml; tuned here, or failing "
        f"here on its own): {_pct(len(named), len(scope))}"
    )
    wrong_winners = [r.program for r in rows if "WRONG" in r.check]
    missing = [r.program for r in rows if r.check.startswith("MISSING")]
    out.append(
        f"Output checks: {sum(1 for r in tuned if r.check and 'exit code only' not in r.check)} "
        f"of {len(tuned)} tuned programs have rules; a winner failing its program's own check: "
        f"{len(wrong_winners)} {wrong_winners or ''}; a self-checking program without rules: "
        f"{len(missing)} {missing or ''}".rstrip()
    )
    outside = [r for r in rows if not r.scope]
    if outside:
        out.append(
            "Out of scope (no kernel of its own / no parallel region): "
            + "; ".join(f"{r.program} ({r.form or r.detail.split(';')[0]})" for r in outside)
        )
    unreached = [r for r in scope if r.outcome != "handled"]
    if unreached:
        out.append("Not reached, with the form or reason that stops each:")
        for r in unreached:
            why = r.detail.split("; scan without a toml")[0]
            out.append(f"- {r.program} ({r.language}, {r.fault}): {r.form or '-'}: {why}")
    seconds = sum(r.seconds for r in rows)
    out.append(f"Programs' time summed: {seconds:.0f} s")
    return out
