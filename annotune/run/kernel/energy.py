"""Kernel mode's energy: measured after the times, in batches of its own.

Launches are queued back to back, without the L2 flush (whose clearing would be billed to the
kernel), for at least the meter's `min_window` (NVML resolves no less than about a second),
the launch count estimated from the median time. A batch the meter saw as too short, or over
which it saw no energy, is tried again at least twice as long, up to `ENERGY_ATTEMPTS` times;
then the measurement has no energy and says why, never 0 J. A batch's energy divided by its
launches is one sample; their median is the configuration's energy per launch.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from annotune.run.backends import KernelBackend
from annotune.run.energy import EnergyError, EnergyMeter, EnergyReading

ENERGY_ATTEMPTS = 4
"""Tries at one energy batch before the configuration is left without an energy."""

ENERGY_SHORTFALL = 0.9
"""An energy batch at least this share of the meter's window is long enough: its launch count
is planned from the median time, so about half the batches come out a little short of it."""

ENERGY_CHECK_S = 0.01
"""About how much work (s) is queued between two looks at the meter's clock in an energy batch."""


@dataclass(frozen=True)
class Energy:
    """One configuration's energy batches: each batch's energy per launch (J), launches and
    seconds; or, when no batch could be measured, why not."""

    samples: tuple[float, ...] = ()
    launches: tuple[int, ...] = ()
    seconds: tuple[float, ...] = ()
    error: str = ""

    def to_json(self, meter: EnergyMeter) -> dict:
        if self.error:
            return {"method": meter.method, "error": self.error}
        seconds = [round(s, 4) for s in self.seconds]
        return {"method": meter.method, "launches": list(self.launches), "seconds": seconds}


def measure_energy(
    backend: KernelBackend,
    meter: EnergyMeter,
    prepared: object,
    median_ms: float,
    *,
    batches: int,
    timeout: float,
) -> Energy:
    """`batches` batches of back-to-back launches, each at least the meter's `min_window`
    long (a batch too short, or with no energy seen, is tried again longer)."""
    per_launch = max(median_ms / 1e3, 1e-7)
    samples, launches, seconds = [], [], []
    for _ in range(batches):
        window = meter.min_window
        for _attempt in range(ENERGY_ATTEMPTS):
            try:
                count, reading = _batch(backend, meter, prepared, window, per_launch, timeout)
            except EnergyError as error:
                return Energy(error=str(error))
            if reading.joules > 0 and reading.seconds >= ENERGY_SHORTFALL * meter.min_window:
                break
            window *= max(2.0, meter.min_window / max(reading.seconds, 1e-9))
        else:
            return Energy(error=_unmeasured(meter, reading))
        samples.append(reading.joules / count)
        launches.append(count)
        seconds.append(reading.seconds)
    return Energy(tuple(samples), tuple(launches), tuple(seconds))


def _batch(
    backend: KernelBackend,
    meter: EnergyMeter,
    prepared: object,
    window: float,
    per_launch: float,
    timeout: float,
) -> tuple[int, EnergyReading]:
    """Launches queued back to back until about `window` seconds of them are queued (by
    the median time) or the meter's clock says `window` has passed (launching is then
    slower than the kernel); how many, and the meter's reading over them and the wait."""
    target = max(1, math.ceil(window / per_launch))
    chunk = max(1, math.ceil(ENERGY_CHECK_S / per_launch))
    count = 0
    meter.start()
    try:
        while count < target and (count == 0 or meter.elapsed() < window):
            queued = min(chunk, target - count)
            for _ in range(queued):
                backend.launch(prepared)
            count += queued
        backend.synchronize(timeout + 4 * count * per_launch)
    except BaseException:
        with contextlib.suppress(EnergyError):
            meter.stop()
        raise
    return count, meter.stop()


def _unmeasured(meter: EnergyMeter, reading: EnergyReading) -> str:
    """Why an energy batch was given up on, after its last try."""
    if reading.joules <= 0:
        return (
            f"{meter.description} saw no energy in {ENERGY_ATTEMPTS} ever longer batches, the "
            f"last {reading.seconds:.3g} s long"
        )
    return (
        f"{meter.description} needs batches of {meter.min_window:g} s; after "
        f"{ENERGY_ATTEMPTS} tries the last was {reading.seconds:.3g} s"
    )
