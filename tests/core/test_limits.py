"""Limits for children, clamped to what the process inherited (`core.limits`)."""

from __future__ import annotations

import os
import resource

import pytest

from annotune.core import limits


def in_child(body) -> int:
    """Run `body` in a forked child; its exit status (0 when it returned True)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if body() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_limit_above_the_inherited_hard_limit_is_clamped_to_it():
    def body() -> bool:
        resource.setrlimit(resource.RLIMIT_CPU, (500, 600))
        ceiling = limits.set_limit(resource.RLIMIT_CPU, 10_000, 10_005)
        return (
            ceiling == limits.Ceiling(10_000, 600)
            and ceiling.inherited
            and resource.getrlimit(resource.RLIMIT_CPU) == (600, 600)
        )

    assert in_child(body) == 0


def test_a_limit_below_the_inherited_one_is_annotunes_own():
    def body() -> bool:
        resource.setrlimit(resource.RLIMIT_CPU, (500, 600))
        ceiling = limits.set_limit(resource.RLIMIT_CPU, 100, 105)
        return not ceiling.inherited and resource.getrlimit(resource.RLIMIT_CPU) == (100, 105)

    assert in_child(body) == 0


def test_an_unlimited_parent_grants_what_is_asked():
    hard = limits.inherited_hard(resource.RLIMIT_CPU)
    if hard is not None:
        pytest.skip("this process runs under a CPU limit")  # pragma: no cover
    assert limits.clamp(resource.RLIMIT_CPU, 7) == 7


def test_held_address_space_is_this_process_size():
    assert limits.held_address_space() > 1 << 20
    assert limits.gib(4 << 30) == "4"
    assert limits.gib(3 << 29) == "1.5"
