"""Holding Ctrl-C and SIGTERM over a piece of work that must not be cut."""

from __future__ import annotations

import signal
import threading

import pytest

from annotune.core.interrupts import held


class Stop(Exception):
    pass


@pytest.fixture
def stopping():
    """SIGINT and SIGTERM raise Stop, counting what arrived, and are put back afterwards."""
    arrived: list[int] = []

    def handler(signum, _frame):
        arrived.append(signum)
        raise Stop

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    yield arrived
    for signum, old in previous.items():
        signal.signal(signum, old)


def test_a_signal_in_the_block_is_delivered_once_it_ends(stopping):
    steps = []
    with pytest.raises(Stop), held():
        signal.raise_signal(signal.SIGTERM)
        steps.append("after the signal")
        signal.raise_signal(signal.SIGTERM)  # twice in the block: delivered once
        steps.append("end of the block")
    assert steps == ["after the signal", "end of the block"]
    assert stopping == [signal.SIGTERM]


def test_the_handlers_are_put_back_and_nothing_is_held_after(stopping):
    with held():
        pass
    with pytest.raises(Stop):
        signal.raise_signal(signal.SIGINT)
    assert stopping == [signal.SIGINT]


def test_nested_blocks_deliver_at_the_outermost(stopping):
    steps = []
    with pytest.raises(Stop), held():
        with held():
            signal.raise_signal(signal.SIGINT)
        steps.append("inner ended")
    assert steps == ["inner ended"]
    assert stopping == [signal.SIGINT]


def test_an_error_in_the_block_is_not_swallowed(stopping):
    with pytest.raises(ValueError), held():
        raise ValueError("the work failed")
    assert stopping == []


def test_another_thread_runs_the_block_as_it_is(stopping):
    ran = []

    def work():
        with held():
            ran.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert ran and ran[0] is not None and ran[0].__name__ == "handler"
