"""The cuda-python backend: NVIDIA's `cuda-bindings` driver API (`cuda.bindings.driver`).

This is what the lent GPU machines ship. Every driver call returns a tuple whose first element
is a CUresult; `_check` turns a failure into BackendError with the error's name and text.
Kernel arguments go to cuLaunchKernel as an array of pointers to each value, so the driver
lays them out itself (no hand-computed alignment); the array is built once per configuration
(`prepare`). Timed launches get a pair of events each, from a pool that lives as long as the
context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotune.run.backends.base import (
    DEFAULT_SHARED_LIMIT,
    BackendError,
    BackendUnavailable,
    Dims,
    Flush,
    KernelBackend,
    wait_until,
)


def _import_driver():
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


@dataclass(frozen=True)
class _Kernel:
    module: object
    function: object


@dataclass(frozen=True)
class _Launch:
    """A prepared launch: cuLaunchKernel's array of pointers to each argument's value."""

    function: object
    grid: Dims
    block: Dims
    shared: int
    values: tuple[np.ndarray, ...]  # what `pointers` points into: kept alive with it
    pointers: np.ndarray
    address: int  # of `pointers`, as cuLaunchKernel takes it


class CudaPythonBackend(KernelBackend):
    """Kernel launches through `cuda.bindings.driver` on the device's primary context."""

    name = "cuda-python"

    def __init__(self, device: int = 0, *, driver: object | None = None):
        """`driver` is the `cuda.bindings.driver` module, imported when None; the tests pass a
        CPU stand-in to check the argument packing without a GPU."""
        self._driver = driver or _import_driver()
        d = self._driver
        try:
            result = d.cuInit(0)  # without a driver, cuda-bindings raises rather than returns
        except Exception as error:  # noqa: BLE001  (its exception types vary between releases)
            raise BackendUnavailable(f"no usable CUDA driver ({error})") from None
        if result[0] != d.CUresult.CUDA_SUCCESS:
            raise BackendUnavailable(
                f"no usable CUDA driver or GPU ({self._error_text(result[0])})"
            )
        count = self._check(d.cuDeviceGetCount(), "cuDeviceGetCount")
        if device >= count:
            raise BackendUnavailable(f"no CUDA device {device} ({count} found)")
        self._device = self._check(d.cuDeviceGet(device), "cuDeviceGet")
        self._open_context()

    def _open_context(self) -> None:
        d = self._driver
        self._context = self._check(d.cuDevicePrimaryCtxRetain(self._device), "cuCtxRetain")
        self._check(d.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        self._stop = self._new_event()
        self._last = self._stop  # the event recorded last: what `recover` asks
        self._pairs: list[tuple[object, object]] = []  # timed launches' events, made as needed
        self.generation += 1

    def _new_event(self) -> object:
        flags = self._driver.CUevent_flags.CU_EVENT_DEFAULT
        return self._check(self._driver.cuEventCreate(flags), "cuEventCreate")

    def _error_text(self, error: object) -> str:
        _, name = self._driver.cuGetErrorName(error)
        _, text = self._driver.cuGetErrorString(error)
        decode = lambda b: b.decode() if isinstance(b, bytes) else str(b)  # noqa: E731
        return f"{decode(name)}: {decode(text)}"

    def _check(self, result: tuple, call: str):
        """The call's value(s), or BackendError naming the call and the CUDA error."""
        error = result[0]
        if error != self._driver.CUresult.CUDA_SUCCESS:
            raise BackendError(f"{call} failed: {self._error_text(error)}")
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    def device_name(self) -> str:
        name = self._check(self._driver.cuDeviceGetName(256, self._device), "cuDeviceGetName")
        return name.split(b"\0", 1)[0].decode()

    def compute_capability(self) -> tuple[int, int]:
        d = self._driver
        attribute = d.CUdevice_attribute
        major = self._check(
            d.cuDeviceGetAttribute(
                attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self._device
            ),
            "cuDeviceGetAttribute",
        )
        minor = self._check(
            d.cuDeviceGetAttribute(
                attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self._device
            ),
            "cuDeviceGetAttribute",
        )
        return int(major), int(minor)

    def l2_cache_bytes(self) -> int:
        d = self._driver
        size = self._check(
            d.cuDeviceGetAttribute(
                d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, self._device
            ),
            "cuDeviceGetAttribute(L2_CACHE_SIZE)",
        )
        return int(size)

    def pci_bus_id(self) -> str:
        bus = self._check(self._driver.cuDeviceGetPCIBusId(32, self._device), "cuDeviceGetPCIBusId")
        return bus.split(b"\0", 1)[0].decode()

    def load(self, image: bytes, symbol: str) -> _Kernel:
        d = self._driver
        self._check(d.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        data = np.frombuffer(image + b"\0", dtype=np.uint8)  # alive for the call
        module = self._check(d.cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")
        try:
            function = self._check(
                d.cuModuleGetFunction(module, symbol.encode()), f"cuModuleGetFunction({symbol})"
            )
        except BackendError:
            d.cuModuleUnload(module)
            raise
        return _Kernel(module, function)

    def unload(self, kernel: object) -> None:
        assert isinstance(kernel, _Kernel)
        self._check(self._driver.cuModuleUnload(kernel.module), "cuModuleUnload")

    def find_global(self, kernel: object, symbol: str) -> tuple[object, int]:
        assert isinstance(kernel, _Kernel)
        address, nbytes = self._check(
            self._driver.cuModuleGetGlobal(kernel.module, symbol.encode()),
            f"cuModuleGetGlobal({symbol})",
        )
        return address, int(nbytes)

    def allocate(self, nbytes: int) -> object:
        return self._check(self._driver.cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})")

    def free(self, buffer: object) -> None:
        self._check(self._driver.cuMemFree(buffer), "cuMemFree")

    def upload(self, buffer: object, array: np.ndarray) -> None:
        self._check(
            self._driver.cuMemcpyHtoD(buffer, array.ctypes.data, array.nbytes), "cuMemcpyHtoD"
        )

    def download(self, buffer: object, array: np.ndarray) -> None:
        self._check(
            self._driver.cuMemcpyDtoH(array.ctypes.data, buffer, array.nbytes), "cuMemcpyDtoH"
        )

    def fill(self, buffer: object, nbytes: int) -> None:
        self._check(self._driver.cuMemsetD8(buffer, 0, nbytes), "cuMemsetD8")

    def copy(self, target: object, source: object, nbytes: int) -> None:
        self._check(self._driver.cuMemcpyDtoDAsync(target, source, nbytes, 0), "cuMemcpyDtoD")

    def prepare(
        self, kernel: object, grid: Dims, block: Dims, shared: int, args: Sequence[object]
    ) -> _Launch:
        assert isinstance(kernel, _Kernel)
        d = self._driver
        if shared > DEFAULT_SHARED_LIMIT:
            self._check(
                d.cuFuncSetAttribute(
                    kernel.function,
                    d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared,
                ),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            )
        values = tuple(
            np.array([arg]) if isinstance(arg, np.generic) else np.array([int(arg)], np.uint64)
            for arg in args
        )
        pointers = np.array([value.ctypes.data for value in values], dtype=np.uint64)
        return _Launch(kernel.function, grid, block, shared, values, pointers, pointers.ctypes.data)

    def launch(self, prepared: object) -> None:
        assert isinstance(prepared, _Launch)
        self._check(
            self._driver.cuLaunchKernel(
                prepared.function,
                *prepared.grid,
                *prepared.block,
                prepared.shared,
                0,
                prepared.address,
                0,
            ),
            "cuLaunchKernel",
        )

    def timed_launches(
        self, prepared: object, count: int, flush: Flush | None, *, timeout: float
    ) -> list[float]:
        d = self._driver
        while len(self._pairs) < count:
            self._pairs.append((self._new_event(), self._new_event()))
        pairs = self._pairs[:count]
        for start, stop in pairs:
            if flush is not None:
                self.fill(*flush)
            self._check(d.cuEventRecord(start, 0), "cuEventRecord")
            self.launch(prepared)
            self._check(d.cuEventRecord(stop, 0), "cuEventRecord")
        self._last = pairs[-1][1]
        self._wait(self._last, timeout, "the kernel")
        return [
            float(self._check(d.cuEventElapsedTime(start, stop), "cuEventElapsedTime"))
            for start, stop in pairs
        ]

    def synchronize(self, timeout: float) -> None:
        self._check(self._driver.cuEventRecord(self._stop, 0), "cuEventRecord")
        self._last = self._stop
        self._wait(self._stop, timeout, "the device")

    def _wait(self, event: object, timeout: float, what: str) -> None:
        d = self._driver

        def done() -> bool:
            error = d.cuEventQuery(event)[0]
            if error == d.CUresult.CUDA_ERROR_NOT_READY:
                return False
            if error != d.CUresult.CUDA_SUCCESS:
                raise BackendError(f"{what} failed: {self._error_text(error)}")
            return True

        wait_until(done, timeout, what)

    def recover(self) -> None:
        """Reset the primary context when the last event reports a fault or is still pending.

        The event is asked rather than the context synchronized, which would wait forever on a
        kernel that hangs.
        """
        d = self._driver
        if d.cuEventQuery(self._last)[0] == d.CUresult.CUDA_SUCCESS:
            return
        d.cuDevicePrimaryCtxRelease(self._device)
        self._check(d.cuDevicePrimaryCtxReset(self._device), "cuDevicePrimaryCtxReset")
        self._open_context()

    def close(self) -> None:
        d = self._driver
        for event in [self._stop, *(event for pair in self._pairs for event in pair)]:
            d.cuEventDestroy(event)
        d.cuDevicePrimaryCtxRelease(self._device)
