"""Kernel-mode backends: pycuda where installed, NVIDIA's cuda-python otherwise.

pycuda has no wheels and does not build on our machines, while the lent GPU machines ship
cuda-python; hence two backends behind one interface (`KernelBackend`). Both packages are
imported only when a backend is opened, so annotune imports and its tests run without either.
"""

from __future__ import annotations

from annotune.core.diagnostics import AnnotuneError
from annotune.run.backends.base import (
    BackendError,
    BackendUnavailable,
    KernelBackend,
    KernelTimeout,
)

__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendUnavailable",
    "KernelBackend",
    "KernelTimeout",
    "open_backend",
    "select_backend",
]

BACKENDS = ("pycuda", "cuda-python")
"""Backend names, in the order `select_backend` tries them."""


def open_backend(name: str, device: int = 0) -> KernelBackend:
    """Open the backend `name` on CUDA device `device`; BackendUnavailable if it cannot be."""
    if name == "pycuda":
        from annotune.run.backends.pycuda_backend import PycudaBackend

        return PycudaBackend(device)
    if name == "cuda-python":
        from annotune.run.backends.cuda_python_backend import CudaPythonBackend

        return CudaPythonBackend(device)
    raise AnnotuneError(f"unknown kernel backend '{name}' (known: {', '.join(BACKENDS)})")


def select_backend(name: str | None = None, *, device: int = 0) -> KernelBackend:
    """The backend `name`, or the first of BACKENDS that works here when `name` is None.

    Raises AnnotuneError saying why each candidate cannot be used (not installed, no GPU).
    """
    problems = []
    for candidate in (name,) if name else BACKENDS:
        try:
            return open_backend(candidate, device)
        except (BackendUnavailable, BackendError) as reason:
            problems.append(f"{candidate}: {reason}")
    raise AnnotuneError(
        "no usable CUDA kernel backend (" + "; ".join(problems) + ")",
        hint="kernel mode needs a GPU and cuda-python (pip install cuda-python) or pycuda "
        "(pip install 'annotune[cuda]')",
    )
