"""Kernel mode's inputs: what a kernel's `in` and `inout` arrays and its `__constant__`
variables are filled with, on the host, the same for every configuration.

Inputs are pseudo-random and depend only on the seed, the argument's position, type and
length: floating-point elements uniform in [0, 1), integers in [0, INTEGER_INPUT_LIMIT), `out`
arrays zero; a fill rule of the pragma (`annotate.grammar.FILLS`) replaces the default.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from annotune.annotate.kernels import KernelSpec, LaunchArg, LaunchConstant

INTEGER_INPUT_LIMIT = 100
"""Integer inputs are drawn from [0, INTEGER_INPUT_LIMIT): small, so that they stay valid as
sizes or (small) indices and cannot overflow a sum."""


class HostInputs:
    """The host's copies of a kernel's inputs under one seed, made once per (argument, type,
    length, fill) and kept read-only."""

    def __init__(self, seed: int):
        self.seed = seed
        self._inputs: dict[tuple, np.ndarray] = {}
        self._constants: dict[tuple, np.ndarray] = {}  # `constant_array`'s, by their key

    def input_array(self, index: int, arg: LaunchArg) -> np.ndarray:
        """The host's copy of the pointer argument at `index`: zeros for `out` (what the device
        sets it to), else the seeded input (read-only, the same for every configuration)."""
        if arg.kind == "out":
            return np.zeros(arg.count, arg.dtype)
        key = (index, arg.dtype, arg.count, arg.fill)
        if key not in self._inputs:
            data = input_data(arg, np.random.default_rng([self.seed, index]))
            data.flags.writeable = False
            self._inputs[key] = data
        return self._inputs[key]

    def constant_array(self, index: int, constant: LaunchConstant, count: int) -> np.ndarray:
        """What the `__constant__` variable at `index` of the spec's `constants` is filled with,
        `count` elements (as many as the cubin holds): by its rule, else as an `in` array is
        (read-only, the same for every configuration of that size)."""
        key = (index, constant.dtype, count, constant.fill)
        if key not in self._constants:
            as_input = LaunchArg(constant.name, "in", constant.dtype, count, fill=constant.fill)
            data = input_data(as_input, np.random.default_rng([self.seed, index, 1]))
            data.flags.writeable = False
            self._constants[key] = data
        return self._constants[key]


def input_data(arg: LaunchArg, rng: np.random.Generator) -> np.ndarray:
    """An input array's elements (`_numbers`); of a struct type, each field's numbers drawn in
    turn as an array of them would be, padding zero."""
    dtype = np.dtype(arg.dtype)
    if dtype.names is None:
        return _numbers(arg, rng)
    data = np.zeros(arg.count, dtype)
    for name in dtype.names:
        field = dtype.fields[name][0]  # type: ignore[index]
        if field.base.kind != "V":
            written = f"{field.shape}{field.base.str}" if field.shape else field.str
            data[name] = _numbers(replace(arg, dtype=written), rng)
    return data


def _numbers(arg: LaunchArg, rng: np.random.Generator) -> np.ndarray:
    """An input array's elements: by its fill rule (`annotate.grammar.FILLS`, bounds checked
    when the launch was computed), else floats uniform in [0, 1), booleans 0 or 1 and other
    integers in [0, INTEGER_INPUT_LIMIT). A vector type's array is (count, lanes), each lane
    an element; `iota` counts lanes."""
    dtype = np.dtype(arg.dtype).base  # a vector type's lanes: (count, lanes) of its base
    shape = (arg.count, *np.dtype(arg.dtype).shape)
    count = int(np.prod(shape))
    rule, bounds = arg.fill if arg.fill is not None else ("", ())
    if rule == "iota":
        data = np.arange(count)
    elif rule == "value":
        data = np.full(count, bounds[0])
    elif rule == "range" or (rule == "uniform" and dtype.kind != "f"):
        data = rng.integers(int(bounds[0]), int(bounds[1]), count)
    elif rule == "uniform":
        data = rng.uniform(float(bounds[0]), float(bounds[1]), count)
    elif dtype.kind == "f":
        data = rng.random(count)
    elif dtype.kind == "b":
        data = rng.integers(0, 2, count)
    else:
        data = rng.integers(0, INTEGER_INPUT_LIMIT, count)
    return data.astype(dtype).reshape(shape)


def scalar(arg: LaunchArg) -> np.generic:
    """The value as the parameter's C type, converted as C would (truncation, wrap-around)."""
    with np.errstate(all="ignore"):
        return np.array(arg.value).astype(arg.dtype)[()]


def fill_notes(spec: KernelSpec) -> tuple[str, ...]:
    """What a user should know once about the kernel's `__constant__` variables: those filled
    by the default rule, and those left as the cubin holds them (zeros), with why."""
    notes = []
    default = [c for c in spec.constants if c.fill is None and not c.why]
    if default:
        listed = ", ".join(f"{c.name} ({c.ctype})" for c in default)
        notes.append(
            f"kernel mode fills the __constant__ variables the host would set (cudaMemcpyToSymbol) "
            f"as it fills in(...) arrays, floats uniform in [0, 1) and integers in "
            f"[0, {INTEGER_INPUT_LIMIT}): {listed}; where that does not fit, give a rule: "
            "constants(NAME = RULE) in the kernel's declaration"
        )
    for constant in spec.constants:
        if constant.why:
            where = constant.location
            notes.append(
                f"__constant__ {constant.name} ({constant.ctype}, {where.file}:{where.line}) "
                f"keeps the cubin's zeros in kernel mode: {constant.why}"
            )
    return tuple(notes)
