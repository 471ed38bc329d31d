"""The interface every kernel-mode backend implements, and the errors it raises.

A backend is a thin layer over one CUDA driver binding: load a cubin, move arrays, launch,
time with CUDA events. Timed launches come in batches queued back to back and waited for once,
so that between two launches Python does only what queueing them takes. It decides nothing:
the kernel runner owns warm-up, repeats, inputs and checking, so the two real backends and the
tests' CPU stand-in stay interchangeable. Every failure of the device or the driver is raised
as `BackendError`; the runner turns it into the measurement's status, and calls `recover()` so
that one crashing configuration does not take the rest of the study with it.

Contract: one backend object holds one CUDA context, current on the thread that created it;
use it from that thread only. Waits never block past their `timeout`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

Dims = tuple[int, int, int]
Flush = tuple[object, int]
"""A buffer and how many of its bytes to clear before each timed launch (the L2 flush)."""


DEFAULT_SHARED_LIMIT = 48 * 1024
"""Dynamic shared memory above this many bytes needs the kernel's opt-in attribute."""


class BackendError(Exception):
    """The driver refused or the kernel failed (launch, memory, module, or a sticky error)."""


class KernelTimeout(BackendError):
    """The device did not finish within the timeout."""


class BackendUnavailable(Exception):
    """This backend cannot be used here: its package is missing, or there is no GPU."""


class KernelBackend(ABC):
    """Loads kernels from cubins, moves arrays and launches them on one CUDA device.

    Handles (`load`'s kernel, `allocate`'s buffer, `prepare`'s launch) are opaque to callers.
    Launch arguments are buffers for pointer parameters and numpy scalars of the parameter's
    exact type for the rest.
    """

    name: ClassVar[str]
    generation: int = 0
    """How many times the context was (re)created: a handle from an earlier generation is gone,
    so whoever keeps buffers across launches compares it before using them."""

    @abstractmethod
    def device_name(self) -> str:
        """The GPU's name, e.g. 'NVIDIA H100 80GB HBM3'."""

    @abstractmethod
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor): what `-arch=sm_XY` the cubins must be compiled for."""

    @abstractmethod
    def l2_cache_bytes(self) -> int:
        """The size of the device's L2 cache: what a flush between timed launches must evict."""

    def pci_bus_id(self) -> str:
        """The device's PCI bus id, e.g. "0000:65:00.0", by which NVML finds the same GPU
        whatever CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER made of CUDA's numbering; ""
        when the backend cannot tell."""
        return ""

    @abstractmethod
    def load(self, image: bytes, symbol: str) -> object:
        """Load a cubin and find the kernel `symbol` (its mangled name) in it."""

    @abstractmethod
    def unload(self, kernel: object) -> None:
        """Release a loaded kernel's module."""

    def find_global(self, kernel: object, symbol: str) -> tuple[object, int]:
        """The device address of the global variable `symbol` (its name in the cubin) of a
        loaded kernel's module, and its size in bytes: `upload` there does what the host's
        `cudaMemcpyToSymbol` does, until the module is unloaded. A backend that cannot reach
        a module's globals says so (BackendError)."""
        raise BackendError(f"the {self.name} backend cannot reach __constant__ memory")

    @abstractmethod
    def allocate(self, nbytes: int) -> object:
        """Device memory of `nbytes` (> 0) bytes."""

    @abstractmethod
    def free(self, buffer: object) -> None: ...

    @abstractmethod
    def upload(self, buffer: object, array: np.ndarray) -> None:
        """Copy a contiguous host array into the start of `buffer`."""

    @abstractmethod
    def download(self, buffer: object, array: np.ndarray) -> None:
        """Fill a contiguous host array from the start of `buffer`."""

    @abstractmethod
    def fill(self, buffer: object, nbytes: int) -> None:
        """Set the first `nbytes` of `buffer` to zero on the device (asynchronously, in launch
        order): writing a buffer larger than L2 evicts what earlier launches left there."""

    @abstractmethod
    def copy(self, target: object, source: object, nbytes: int) -> None:
        """Copy the first `nbytes` of `source` to `target` on the device (asynchronously, in
        launch order): an `inout` array's input restored without crossing the bus."""

    @abstractmethod
    def prepare(
        self, kernel: object, grid: Dims, block: Dims, shared: int, args: Sequence[object]
    ) -> object:
        """One configuration's launch, with its arguments packed once for every launch of it;
        `shared` is the dynamic shared memory in bytes. Valid while `kernel` is loaded."""

    @abstractmethod
    def launch(self, prepared: object) -> None:
        """Start one prepared launch (asynchronously)."""

    @abstractmethod
    def timed_launches(
        self, prepared: object, count: int, flush: Flush | None, *, timeout: float
    ) -> list[float]:
        """`count` (>= 1) launches queued back to back, each between its own pair of CUDA
        events, with `flush` (a buffer and its size) cleared before each; one wait, of at most
        `timeout` seconds, for the last event; then every launch's time in milliseconds, in
        launch order."""

    @abstractmethod
    def synchronize(self, timeout: float) -> None:
        """Wait for all work so far; a failed earlier launch is raised here."""

    @abstractmethod
    def recover(self) -> None:
        """After a BackendError: make the device usable again.

        Sticky errors (an illegal address, a trap) poison the CUDA context; then every handle
        is lost, the context is recreated and `generation` goes up. Other errors leave it as
        it is.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the context; the backend cannot be used afterwards."""

    def __enter__(self) -> KernelBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_until(done: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `done` (an event query) until it is true; KernelTimeout after `timeout` seconds.

    Polling rather than a blocking synchronize is what makes a hanging kernel a timeout instead
    of a hung tuner. The pause grows to 1 ms, so short kernels are seen finished at once; the
    time itself comes from CUDA events, not from this loop.
    """
    deadline = time.monotonic() + timeout
    pause = 1e-5
    while not done():
        if time.monotonic() > deadline:
            raise KernelTimeout(f"{what} did not finish within {timeout:g} s")
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)
