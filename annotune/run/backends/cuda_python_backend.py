"""The cuda-python backend: NVIDIA's `cuda-bindings` driver API (`cuda.bindings.driver`).

This is what the lent GPU machines ship. Every driver call returns a tuple whose first element
is a CUresult; `cuda_python_driver.CudaDriver.check` turns a failure into BackendError with the
error's name and text.
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
)
from annotune.run.backends.cuda_python_driver import CudaDriver, import_driver


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
        self._driver = driver or import_driver()
        self._cuda = CudaDriver(self._driver)
        self._check = self._cuda.check
        d = self._driver
        try:
            result = d.cuInit(0)  # without a driver, cuda-bindings raises rather than returns
        except Exception as error:  # noqa: BLE001  (its exception types vary between releases)
            raise BackendUnavailable(f"no usable CUDA driver ({error})") from None
        if result[0] != d.CUresult.CUDA_SUCCESS:
            raise BackendUnavailable(
                f"no usable CUDA driver or GPU ({self._cuda.error_text(result[0])})"
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
        self._stop = self._cuda.new_event()
        self._last = self._stop  # the event recorded last: what `recover` asks
        self._pairs: list[tuple[object, object]] = []  # timed launches' events, made as needed
        self.generation += 1

    def device_name(self) -> str:
        name = self._check(self._driver.cuDeviceGetName(256, self._device), "cuDeviceGetName")
        return name.split(b"\0", 1)[0].decode()

    def compute_capability(self) -> tuple[int, int]:
        major = self._cuda.attribute("COMPUTE_CAPABILITY_MAJOR", self._device)
        minor = self._cuda.attribute("COMPUTE_CAPABILITY_MINOR", self._device)
        return major, minor

    def l2_cache_bytes(self) -> int:
        call = "cuDeviceGetAttribute(L2_CACHE_SIZE)"
        return self._cuda.attribute("L2_CACHE_SIZE", self._device, call)

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
        return _pack(kernel.function, grid, block, shared, args)

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
            self._pairs.append((self._cuda.new_event(), self._cuda.new_event()))
        pairs = self._pairs[:count]
        for start, stop in pairs:
            if flush is not None:
                self.fill(*flush)
            self._check(d.cuEventRecord(start, 0), "cuEventRecord")
            self.launch(prepared)
            self._check(d.cuEventRecord(stop, 0), "cuEventRecord")
        self._last = pairs[-1][1]
        self._cuda.wait(self._last, timeout, "the kernel")
        return [
            float(self._check(d.cuEventElapsedTime(start, stop), "cuEventElapsedTime"))
            for start, stop in pairs
        ]

    def synchronize(self, timeout: float) -> None:
        self._check(self._driver.cuEventRecord(self._stop, 0), "cuEventRecord")
        self._last = self._stop
        self._cuda.wait(self._stop, timeout, "the device")

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


def _pack(
    function: object, grid: Dims, block: Dims, shared: int, args: Sequence[object]
) -> _Launch:
    """cuLaunchKernel's array of pointers to each argument's value: a numpy scalar as it is,
    a buffer as its 64-bit device address."""
    values = tuple(
        np.array([arg]) if isinstance(arg, np.generic) else np.array([int(arg)], np.uint64)
        for arg in args
    )
    pointers = np.array([value.ctypes.data for value in values], dtype=np.uint64)
    return _Launch(function, grid, block, shared, values, pointers, pointers.ctypes.data)
