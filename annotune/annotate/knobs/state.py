"""What the reading of one problem holds while it goes: the parameters so far (a second one of a
name is an error), the constraints, the `#define`s seen, and what waits until every file is read."""

from __future__ import annotations

from dataclasses import dataclass, field

from annotune.annotate.grammar import Domain, ParamPragma, TuneComment
from annotune.annotate.macros import Define
from annotune.annotate.problem import ConstraintDecl, Rewrite, TunableParam
from annotune.annotate.source import ParsedSource, SourceFile, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import Number


@dataclass
class Collector:
    parsed: ParsedSource
    params: dict[str, TunableParam] = field(default_factory=dict)
    constraints: list[ConstraintDecl] = field(default_factory=list)
    defines: dict[str, Define] = field(default_factory=dict)
    pending_define_params: list[tuple[Define, list[tuple[Token, TuneComment]]]] = field(
        default_factory=list
    )
    pending_pragma_params: list[tuple[SourceFile, int, str, ParamPragma]] = field(
        default_factory=list
    )  # the pragma's file, where its body starts, the body, what it says
    program_args: list[str] | None = None
    undefined: dict[str, Location] = field(default_factory=dict)  # last kept #undef, none after
    rewrites: list[Rewrite] = field(default_factory=list)  # `[[file.launch]]`'s, in order

    def add(self, param: TunableParam) -> None:
        first = self.params.get(param.name)
        if first is not None:
            where = first.location
            raise AnnotuneError(
                f"duplicate parameter '{param.name}'",
                param.location,
                hint=f"first declared at {where.file}:{where.line}:{where.column}",
            )
        self.params[param.name] = param


def check_default(name: str, domain: Domain, default: Number, at: Location) -> None:
    if default not in domain.values:
        raise AnnotuneError(
            f"default value {default} of '{name}' is not in its domain {domain.text}", at
        )
