"""Hold Ctrl-C and SIGTERM back while a short piece of work that must not be cut finishes.

Python raises KeyboardInterrupt (and the CLI's `Terminated` on SIGTERM) between any two
bytecodes of the main thread. Raised after a database's BEGIN but before its `with` block is
entered (a context manager's `__enter__` can be interrupted once it has begun), it left the
connection inside a transaction that no one would end: the best-so-far write after the stop
failed with "cannot start a transaction within a transaction". Raised inside the block, it lost
the measurement being recorded. Inside `held()`, a signal is only noted; it is delivered again,
to the handler that was in place, as the block ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held, then deliver any that came.

    Only the main thread receives Python's signals, and only it may change their handlers; in
    another thread the block runs as it is (it is never interrupted there). Nested blocks hold
    once, at the outermost. A handler installed outside Python (None to `signal.getsignal`)
    could not be put back, so with one in place the block runs as it is."""
    if threading.current_thread() is not threading.main_thread() or _holding:
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in _HELD_SIGNALS}
    if None in previous.values():
        yield
        return
    arrived: list[int] = []
    _holding.append(True)
    try:  # the handlers are swapped inside: a signal between two swaps still restores both
        for signum in _HELD_SIGNALS:
            signal.signal(signum, lambda received, _frame: arrived.append(received))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _holding.pop()
        for signum in dict.fromkeys(arrived):  # each signal once, in the order they came
            signal.raise_signal(signum)


_holding: list[bool] = []
"""Non-empty while the main thread is inside `held()`."""
