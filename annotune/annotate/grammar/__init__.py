"""The front end's two grammars, on text alone: the annotation language (`annotation`: `@tune`
comments, `#pragma annotune param` bodies, domains; its error `GrammarError`, at an offset) and
the kernel-clause language (`kernel_clauses`, `kernel_items`: `#pragma annotune kernel` and a
config's `[[file.kernel]]`; its errors located, as its text knows where it is written). The C
expressions both contain are the constraints' (`annotune.space.expressions`)."""

from __future__ import annotations

from annotune.annotate.grammar.annotation import (
    DOMAIN_KINDS,
    MAX_DOMAIN_SIZE,
    Domain,
    GrammarError,
    ParamPragma,
    TuneComment,
    find_tune_comments,
    parse_domain,
    parse_number,
    parse_param_pragma,
)
from annotune.annotate.grammar.kernel_clauses import CLAUSES, DeclaredClause, DeclaredKernel
from annotune.annotate.grammar.kernel_items import FILLS, Fill
from annotune.annotate.grammar.pragma_clauses import (
    ADDABLE,
    PRAGMA_CLAUSES,
    clause_literals,
    clause_of,
    number_literals,
)

__all__ = [
    "CLAUSES",
    "DOMAIN_KINDS",
    "FILLS",
    "MAX_DOMAIN_SIZE",
    "ADDABLE",
    "PRAGMA_CLAUSES",
    "DeclaredClause",
    "DeclaredKernel",
    "Domain",
    "Fill",
    "GrammarError",
    "ParamPragma",
    "TuneComment",
    "clause_literals",
    "clause_of",
    "find_tune_comments",
    "number_literals",
    "parse_domain",
    "parse_number",
    "parse_param_pragma",
]
