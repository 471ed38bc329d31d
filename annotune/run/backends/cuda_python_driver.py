"""NVIDIA's `cuda-bindings` driver API as the cuda-python backend calls it: every driver call
returns a tuple whose first element is a CUresult; `CudaDriver.check` turns a failure into
BackendError with the error's name and text, and gives the call's value(s) otherwise."""

from __future__ import annotations

from annotune.run.backends.base import BackendError, BackendUnavailable, wait_until


def import_driver():
    """The `cuda.bindings.driver` module (or an older cuda-python's `cuda.cuda`);
    BackendUnavailable when neither is installed."""
    try:
        from cuda.bindings import driver  # cuda-bindings >= 12.6
    except ImportError:
        try:
            from cuda import cuda as driver  # older cuda-python
        except ImportError:
            raise BackendUnavailable(
                "the cuda-python package is not installed (pip install cuda-python)"
            ) from None
    return driver


class CudaDriver:
    """The driver module `d` (the tests pass a CPU stand-in), its results checked."""

    def __init__(self, d: object):
        self.d = d

    def error_text(self, error: object) -> str:
        _, name = self.d.cuGetErrorName(error)
        _, text = self.d.cuGetErrorString(error)
        decode = lambda b: b.decode() if isinstance(b, bytes) else str(b)  # noqa: E731
        return f"{decode(name)}: {decode(text)}"

    def check(self, result: tuple, call: str):
        """The call's value(s), or BackendError naming the call and the CUDA error."""
        error = result[0]
        if error != self.d.CUresult.CUDA_SUCCESS:
            raise BackendError(f"{call} failed: {self.error_text(error)}")
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    def attribute(self, name: str, device: object, call: str = "cuDeviceGetAttribute") -> int:
        """The device attribute `CU_DEVICE_ATTRIBUTE_<name>`."""
        attribute = getattr(self.d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(self.check(self.d.cuDeviceGetAttribute(attribute, device), call))

    def new_event(self) -> object:
        flags = self.d.CUevent_flags.CU_EVENT_DEFAULT
        return self.check(self.d.cuEventCreate(flags), "cuEventCreate")

    def wait(self, event: object, timeout: float, what: str) -> None:
        """Until `event` is done, at most `timeout` seconds (`wait_until`); BackendError when
        it reports a failure."""
        d = self.d

        def done() -> bool:
            error = d.cuEventQuery(event)[0]
            if error == d.CUresult.CUDA_ERROR_NOT_READY:
                return False
            if error != d.CUresult.CUDA_SUCCESS:
                raise BackendError(f"{what} failed: {self.error_text(error)}")
            return True

        wait_until(done, timeout, what)
