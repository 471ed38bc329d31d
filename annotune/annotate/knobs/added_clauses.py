"""A clause a pragma of code that must not be edited lacks, added by every variant but the
default: `VL = { domain = "pow2(32, 256)", clause = "vector_length", add = true, line = 42,
default = 128 }` writes ` vector_length(V)` at the end of the one OpenACC pragma on line 42.

The default configuration is the pragma as written, byte for byte: what every build of the
program has. The config's `default` names the value the implementation uses without the
clause; annotune cannot read it from the code, so `scan` says the default stands for the
pragma as written, and the tuned header holds the number only when it differs.
"""

from __future__ import annotations

from annotune.annotate.config import ClausePlace, ConfigParam
from annotune.annotate.grammar import ADDABLE
from annotune.annotate.knobs.clause_knobs import narrowed
from annotune.annotate.knobs.state import Collector, check_default
from annotune.annotate.problem import Rewrite, TunableParam
from annotune.annotate.source import Directive, SourceFile, TextSpan
from annotune.core.diagnostics import AnnotuneError


def add_clause(collector: Collector, spec: ConfigParam, place: ClausePlace) -> None:
    """The knob `spec` as `place.clause(V)` added to the one pragma `place` narrows to;
    AnnotuneError at the config when it names no such pragma, several, or one that has it."""
    if spec.default is None:
        raise AnnotuneError(
            f"{spec.name}: the pragma has no `{place.clause}` clause, so no number to take as "
            "the default: give default = the value the implementation uses without it",
            spec.location,
            hint="the default configuration is the pragma as written; `default` names it",
        )
    families = ADDABLE[place.clause].split()
    found: list[tuple[SourceFile, Directive]] = []
    for source in collector.parsed.files:
        for directive in source.directives:
            words = directive.words
            if directive.name != "pragma" or not words or words[0].text not in families:
                continue
            if not source.is_active(directive.hash_token.start):
                continue
            if narrowed(collector, source, directive.hash_token.start, directive.end, place):
                found.append((source, directive))
    if len(found) != 1:
        what = f"`#pragma {' or '.join(families)}`"
        raise AnnotuneError(
            f"{spec.name}: {place.described().replace(f'a `{place.clause}` clause', what)} "
            f"names {len(found)} pragmas the compiler sees; a clause is added to one",
            place.location,
            hint="narrow it to one pragma with `line` (or `function`)",
        )
    source, directive = found[0]
    if any(word.text == place.clause for word in directive.words):
        raise AnnotuneError(
            f"{spec.name}: the pragma at {_at(source, directive)} has a `{place.clause}` clause "
            "already: tune it without `add`",
            place.location,
        )
    check_default(spec.name, spec.domain, spec.default, spec.default_location or spec.location)
    end = directive.words[-1].end
    collector.rewrites.append(
        Rewrite(
            TextSpan(source.path, end, end),
            f" {place.clause}({spec.name})",
            (spec.name,),
            f"the `{place.clause}` clause added to the pragma at {_at(source, directive)}",
            "",
        )
    )
    collector.add(
        TunableParam(
            name=spec.name,
            values=spec.domain.values,
            default=spec.default,
            origin="config",
            guarded=True,
            location=spec.location,
            domain=spec.domain.text,
        )
    )


def _at(source: SourceFile, directive: Directive) -> str:
    location = source.location(directive.hash_token.start)
    return f"{location.file}:{location.line}"
