"""Kernel mode's device memory, kept from one configuration to the next.

Each pointer argument's device copy stays while its element count stays the same: `in` arrays
are uploaded once, `inout` arrays once to a pristine copy that is copied on the device into
the kernel's array before each checked launch, and `out` arrays are zeroed there. So is the
L2 flush buffer. A context reset (after a fault) takes them all with it: `DeviceMemory`
notices by the backend's `generation` and uploads them again. Since the `in` arrays stay, the
first configuration shows whether the kernel leaves them alone (`check_inputs_kept`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotune.annotate.kernels import KernelSpec, Launch, LaunchArg
from annotune.core.diagnostics import AnnotuneError
from annotune.run.backends import BackendError, KernelBackend
from annotune.run.backends.base import Flush
from annotune.run.kernel.inputs import HostInputs, scalar


@dataclass(frozen=True)
class Slot:
    """A pointer argument's device memory, kept from one configuration to the next while its
    element count stays the same."""

    count: int
    work: object  # what the kernel gets
    pristine: object | None  # `inout`: the input, copied into `work` before each checked launch


class DeviceMemory:
    """The device copies of a kernel's pointer arguments (by position) and the flush buffer,
    on one backend, their inputs from `inputs`."""

    def __init__(self, backend: KernelBackend, inputs: HostInputs):
        self.backend = backend
        self.inputs = inputs
        self.slots: dict[int, Slot] = {}  # by argument position
        self.flush: Flush | None = None
        self._generation = backend.generation  # of the context the slots live in
        self._inputs_checked = False  # whether a kernel was seen to leave its `in` arrays alone

    def forget_if_reset(self) -> None:
        """Drop the handles of a context that was reset since (a reset took them with it)."""
        if self.backend.generation != self._generation:
            self.slots.clear()
            self.flush = None
            self._generation = self.backend.generation

    def flush_buffer(self, nbytes: int) -> Flush:
        """The buffer cleared before each timed launch, allocated the first time."""
        if self.flush is None:
            self.flush = (self.backend.allocate(nbytes), nbytes)
        return self.flush

    def fill_constants(self, kernel: object, launch: Launch) -> None:
        """Set the `__constant__` variables the host would, in the module just loaded (each
        load starts from the cubin's image), before its first launch."""
        for index, constant in enumerate(launch.constants):
            address, nbytes = self.backend.find_global(kernel, constant.symbol)
            count = nbytes // np.dtype(constant.dtype).itemsize
            data = self.inputs.constant_array(index, constant, count)
            if data.size:
                self.backend.upload(address, data)

    def arguments(self, launch: Launch) -> list[object]:
        """The kernel's arguments for a checked launch: scalars as their C type, buffers with
        their inputs (an `inout` array copied from its pristine copy, an `out` array zeroed)."""
        args: list[object] = []
        for index, arg in enumerate(launch.args):
            if not arg.is_pointer:
                args.append(scalar(arg))
                continue
            slot = self.slot(index, arg)
            if arg.count and arg.kind == "inout":
                self.backend.copy(slot.work, slot.pristine, arg.nbytes)
            elif arg.count and arg.kind == "out":
                self.backend.fill(slot.work, arg.nbytes)
            args.append(slot.work)
        return args

    def outputs(self, launch: Launch) -> dict[str, np.ndarray]:
        """The `out` and `inout` arrays read back (read-only), by argument name."""
        outputs = {}
        for index, arg in enumerate(launch.args):
            if arg.kind in ("out", "inout"):
                host = np.empty(arg.count, arg.dtype)
                if arg.count:
                    self.backend.download(self.slots[index].work, host)
                host.flags.writeable = False
                outputs[arg.name] = host
        return outputs

    def check_inputs_kept(self, spec: KernelSpec, launch: Launch) -> None:
        """Once, after the first checked launch: the `in` arrays stay on the device for every
        later configuration, so a kernel that writes one would change all their inputs
        (AnnotuneError at that argument, the memory released)."""
        if self._inputs_checked:
            return
        index = self.changed_input(launch, ("in",))
        if index is None:
            self._inputs_checked = True
            return
        self.release()
        name = launch.args[index].name
        raise AnnotuneError(
            f"kernel '{spec.declared}' writes '{name}', which the pragma declares in(...): "
            f"every configuration would then start from what the last one left; declare it "
            f"inout(...)",
            spec.args[index].location,
        )

    def slot(self, index: int, arg: LaunchArg) -> Slot:
        """The device memory of the pointer argument at `index`, its input uploaded: kept from
        an earlier configuration when the element count is the same, else made anew (and the
        old freed, so memory does not grow with the sizes a space tries)."""
        slot = self.slots.get(index)
        if slot is not None and slot.count == arg.count:
            return slot
        if slot is not None:
            del self.slots[index]
            free(self.backend, [slot.work, slot.pristine])
        taken: list[object] = []
        try:
            taken.append(self.backend.allocate(max(arg.nbytes, 1)))
            if arg.kind == "inout":
                taken.append(self.backend.allocate(max(arg.nbytes, 1)))
            if arg.kind != "out" and arg.count:
                self.backend.upload(taken[-1], self.inputs.input_array(index, arg))
        except BackendError:
            free(self.backend, taken)
            raise
        slot = Slot(arg.count, taken[0], taken[1] if arg.kind == "inout" else None)
        self.slots[index] = slot
        return slot

    def changed_input(self, launch: Launch, kinds: tuple[str, ...]) -> int | None:
        """The position of the first argument of `kinds` whose input on the device (for
        `inout`, the pristine copy) is no longer the host's, or None."""
        for index, arg in enumerate(launch.args):
            if arg.kind not in kinds or not arg.count:
                continue
            slot = self.slots[index]
            kept = np.empty(arg.count, arg.dtype)
            self.backend.download(slot.pristine if arg.kind == "inout" else slot.work, kept)
            if kept.tobytes() != self.inputs.input_array(index, arg).tobytes():
                return index
        return None

    def release(self) -> None:
        """Free all of it; the next configuration uploads the inputs again."""
        held = [b for slot in self.slots.values() for b in (slot.work, slot.pristine)]
        if self.flush is not None:
            held.append(self.flush[0])
        self.slots.clear()
        self.flush = None
        free(self.backend, held)


def free(backend: KernelBackend, buffers: Sequence[object | None]) -> None:
    """Free buffers no longer used; after a fault these calls may fail, which changes nothing:
    the context reset frees them."""
    for buffer in buffers:
        if buffer is not None:
            with contextlib.suppress(BackendError):
                backend.free(buffer)
