"""Scan's warnings about a parameter tuned through the environment alone: it has no use in the
code by design, and that is no mistake to warn about."""

from __future__ import annotations

from annotune.annotate import read_problem, read_problem_and_source
from annotune.annotate.summary import env_only_params, environment_at, scan_warnings

SOURCE = """#include <stdio.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) { printf("%d\\n", X); return 0; }
#ifdef NEVER
int unused = UNUSED;
#endif
"""


def _warnings(tmp_path, params: str, env: str) -> list[str]:
    (tmp_path / "t.c").write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "t.c"\n[file.params]\n{params}\n[file.env]\n{env}\n'
    )
    problem, parsed = read_problem_and_source(tmp_path / "t.c")
    return [message for _, message in scan_warnings(problem, parsed)]


def test_a_parameter_used_only_through_the_environment_is_not_said_to_be_unused(tmp_path):
    threads = 'THREADS = { domain = "values(1, 2, 4)", default = 1 }'
    assert _warnings(tmp_path, threads, 'OMP_NUM_THREADS = "{THREADS}"') == []
    # One that no env value names, read only in a skipped branch, is unused indeed.
    unused = 'UNUSED = { domain = "values(1, 2)", default = 1 }'
    (message,) = _warnings(tmp_path, f"{threads}\n{unused}", 'OMP_NUM_THREADS = "{THREADS}"')
    assert message.startswith("'UNUSED' is not used in active code")


def test_which_parameters_are_environment_only_and_their_environment(tmp_path):
    (tmp_path / "t.c").write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "t.c"\n[file.params]\n'
        'T = { domain = "values(1, 2, 4)", default = 1 }\n'
        '[file.env]\nOMP_NUM_THREADS = "{T}"\nLABEL = "x{X}-t{T}"\nOMP_PROC_BIND = "close"\n'
    )
    problem = read_problem(tmp_path / "t.c")
    assert env_only_params(problem) == {"T"}  # X is read by the code: it keeps its -D
    assert environment_at(problem, {"X": 2, "T": 4.0}) == {
        "OMP_NUM_THREADS": "4",
        "LABEL": "x2-t4",
        "OMP_PROC_BIND": "close",
    }
