"""Kernel mode: launch the annotated kernel from each configuration's cubin and time it.

For each configuration the runner (`runner.KernelRunner`) evaluates the pragma's launch (grid,
block, shared memory, argument sizes and values), loads the cubin, packs the arguments once,
and launches:

1. once on fresh inputs: the outputs (`out` and `inout` arrays) are read back and checked; a
   configuration whose outputs are wrong is not timed;
2. `warmup` times, untimed;
3. between two CUDA events each, until its median is stable (`annotune.run.sampling`); the
   median is the configuration's time (ms). The launches are queued in batches and waited for
   once per batch (`timing.py`); the stopping rule is applied to each time in launch order,
   so the times kept are those one launch at a time would give. When the kernel's arrays fit in
   the L2 cache, a buffer twice the L2's size is cleared before each timed launch (`flush_l2`,
   on by default then), so no launch is timed on the cache its predecessor warmed.

Inputs are pseudo-random and depend only on the seed, the argument's position, type and length,
so every configuration sees the same data (`inputs.py`). They stay on the device from one
configuration to the next (per argument, until its element count changes; `memory.py`): `in`
arrays are uploaded once, `inout` arrays once to a pristine copy that is copied on the device
into the kernel's array before each checked launch, and `out` arrays are zeroed there. The first
configuration measured shows whether the kernel leaves its `in` arrays alone; one that writes
them is an error in the pragma. When a configuration's outputs are wrong and the kept inputs
have changed (an earlier configuration wrote out of bounds), it is judged again on fresh
copies. A context reset (after a fault) takes the kept copies with it; they are uploaded again.

The default configuration is measured first and its outputs are the reference (`outputs.py`):
an output further from it than `atol + rtol * |reference|` (integers: any difference) makes a
configuration `wrong_output`, with the largest error in the reason. A launch the device cannot
run (too many threads, too much shared memory, more registers than a multiprocessor has, by the
compiler's report: `launch_limits.py`) is a `runtime_error` before its module is loaded, one the
device refuses otherwise or a kernel that faults is one after; a kernel that runs past `timeout`
is a `timeout`. Failures are data: the runner returns them as
measurements, resets the device when a fault poisoned it, and goes on.

Later timed launches run on whatever earlier launches left in `inout` arrays: they are timed,
not checked.

Given an energy meter (`annotune.run.energy`), the runner measures energy after the times, in
`energy_batches` batches of its own (`energy.py`): launches queued back to back, without the L2
flush (whose clearing would be billed to the kernel), for at least the meter's `min_window`
(NVML resolves no less than about a second), the launch count estimated from the median time.
A batch the meter saw as too short, or over which it saw no energy, is tried again at least
twice as long, up to `ENERGY_ATTEMPTS` times; then the measurement has no energy and says why
(`compile_info["energy"]["error"]`), never 0 J. A batch's energy divided by its launches is one
sample; their median is the configuration's energy per launch, the board's idle power over the
batch included. A kernel shorter than it takes Python to queue a launch (a few µs) runs as
densely as launches can be queued, and its energy per launch includes the gaps between them.
"""

from annotune.run.kernel.energy import ENERGY_ATTEMPTS, ENERGY_SHORTFALL
from annotune.run.kernel.inputs import INTEGER_INPUT_LIMIT, fill_notes, input_data
from annotune.run.kernel.outputs import KernelReference, compare_outputs
from annotune.run.kernel.runner import KernelRunner

__all__ = [
    "ENERGY_ATTEMPTS",
    "ENERGY_SHORTFALL",
    "INTEGER_INPUT_LIMIT",
    "KernelReference",
    "KernelRunner",
    "compare_outputs",
    "fill_notes",
    "input_data",
]
