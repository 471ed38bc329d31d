"""Number literals in a pragma's clauses, found by the clause's name: `thread_limit(256)`'s 256,
`schedule(dynamic, 16)`'s 16, `unroll 4`'s 4; and the clauses a config may name
(`PRAGMA_CLAUSES`)."""

from __future__ import annotations

from annotune.annotate.grammar.annotation import parse_number
from annotune.annotate.source import Token

PRAGMA_CLAUSES = frozenset(
    ("num_threads", "thread_limit", "num_teams", "collapse", "schedule", "dist_schedule",
     "simdlen", "safelen", "grainsize", "num_tasks", "gang", "worker", "vector", "num_gangs",
     "num_workers", "vector_length", "tile", "unroll")
)  # fmt: skip
"""OpenMP's and OpenACC's clauses that take a number, and `#pragma unroll N` (`GCC unroll`
too): what a config's `clause = "..."` may name."""

ADDABLE = {
    **dict.fromkeys(
        ("num_threads", "thread_limit", "num_teams", "simdlen", "safelen", "grainsize"), "omp"
    ),
    "num_tasks": "omp",
    **dict.fromkeys(
        ("gang", "worker", "vector", "num_gangs", "num_workers", "vector_length"), "acc"
    ),
    "collapse": "omp acc",
}
"""The clauses that can be added, written `clause(N)`, and the pragmas (`#pragma omp`, `#pragma
acc`) that take them; `schedule` and `tile` need more than a number, and are not."""


def number_literals(words: tuple[Token, ...]) -> list[tuple[int, Token]]:
    found = []
    for index, token in enumerate(words):
        if token.kind != "literal":
            continue
        try:
            parse_number(token.text)
        except ValueError:
            continue
        found.append((index, token))
    return found


def clause_literals(
    words: tuple[Token, ...], literals: list[tuple[int, Token]], clause: str
) -> list[tuple[int, Token]]:
    """The literals `@tune(NAME: clause)` can mean, whatever the clause's name.

    Inside `clause(...)`: its first argument when that is a literal (`tile(32, 4)` means 32),
    else any argument, as the chunk of `schedule(dynamic, 16)`; without parentheses, the
    literal right after the word (`unroll 4`).
    """
    inside = [
        (i, token)
        for i, token in literals
        if (at := enclosing_clause(words, i)) is not None and words[at].text == clause
    ]
    first = [(i, token) for i, token in inside if words[i - 1].text == "("]
    after = [(i, token) for i, token in literals if i >= 1 and words[i - 1].text == clause]
    return first or inside or after


def enclosing_clause(words: tuple[Token, ...], index: int) -> int | None:
    """The index of the clause name whose parentheses hold word `index` (innermost), if any."""
    depth = 0
    for at in range(index - 1, 0, -1):
        if words[at].text == ")":
            depth += 1
        elif words[at].text == "(":
            if depth == 0:
                return at - 1
            depth -= 1
    return None


def clause_of(words: tuple[Token, ...], index: int) -> str:
    """How a literal shows in messages: its clause as written (`schedule(dynamic, 16)`)."""
    name = enclosing_clause(words, index)
    if name is None:
        return words[index].text
    depth, end = 0, name + 1
    for end in range(name + 1, len(words)):
        depth += {"(": 1, ")": -1}.get(words[end].text, 0)
        if depth == 0:
            break
    return "".join(w.text + (" " if w.text == "," else "") for w in words[name : end + 1])
