"""Kernels declared in a config (`[[file.kernel]]`): each clause's text where it is written,
for the kernel-clause grammar to read as it reads the pragma's; here only the tables' shape is
checked."""

from __future__ import annotations

from annotune.annotate.config.values import C_NAME
from annotune.annotate.grammar import CLAUSES, DeclaredClause, DeclaredKernel
from annotune.core.diagnostics import AnnotuneError
from annotune.core.toml import Positions


def kernel_tables(entry: dict, where: Positions, at: tuple) -> tuple[DeclaredKernel, ...]:
    """`[[file.kernel]]`: each clause's text where it is written, for `annotate.kernels` to read
    with the pragma's grammar; here only the table's shape is checked."""
    tables = entry.get("kernel", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise AnnotuneError(
            "'kernel' must be an array of tables ([[file.kernel]])", where.key((*at, "kernel"))
        )
    kernels = []
    for number, table in enumerate(tables):
        here = (*at, "kernel", number)
        name = table.get("name")
        if not isinstance(name, str) or not C_NAME.fullmatch(name.split("<", 1)[0].strip()):
            raise AnnotuneError(
                'each [[file.kernel]] needs name = "KERNEL" (the __global__ function\'s name, '
                'with its template arguments for a template: "KERNEL<float, BLOCK>")',
                where.value((*here, "name")) if "name" in table else where.key(here),
            )
        clauses = []
        for clause in CLAUSES:
            value = table.get(clause)
            if value is None:
                continue
            if clause == "tolerance" and type(value) in (int, float):
                value = repr(value)  # a TOML number as the pragma would write it
            if isinstance(value, str):
                pieces = ((value, where.value((*here, clause))),)
            elif clause in ("args", "constants") and isinstance(value, list):
                if not all(isinstance(v, str) for v in value):
                    raise AnnotuneError(
                        f"'{clause}' must be a string or a list of strings",
                        where.key((*here, clause)),
                    )
                pieces = tuple(
                    (v, where.value((*here, clause, index))) for index, v in enumerate(value)
                )
            else:
                listed = clause in ("args", "constants")
                kind = "a string or a list of strings" if listed else "a string"
                raise AnnotuneError(f"'{clause}' must be {kind}", where.value((*here, clause)))
            clauses.append(DeclaredClause(clause, pieces))
        kernels.append(DeclaredKernel(name, where.value((*here, "name")), tuple(clauses)))
    return tuple(kernels)
