"""One device of a Ray cluster: the class each device's actor runs (`annotune.session.
distributed`), kept apart so that a replay device's worker process imports only the replay
device (a tenth of a second) and not the runners or the tuner with its models (a second or
more)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.core.records import BuildResult, Measurement
from annotune.core.tools import run_tool
from annotune.run.protocol import Measurer
from annotune.session.replay_device import ReplayMeasurer, ReplayTable

if TYPE_CHECKING:
    from annotune.annotate import Problem
    from annotune.annotate.kernels import KernelSpec
    from annotune.builder import CompilerCommand
    from annotune.run.program import RunSpec
    from annotune.session.options import MeasureSettings


@dataclass(frozen=True)
class DeviceRecipe:
    """What an actor makes its measurer from: a replay table, or the problem and measuring
    settings of a tune on its GPU, with the device name the user gave. Sent to the actor's
    process, so it is small and plain."""

    table: ReplayTable | None = None
    delay: float | None = None
    problem: Problem | None = None
    settings: MeasureSettings | None = None
    device: str | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """What an actor says about its device once its measurer is made."""

    name: str
    study: dict  # the measurer's `to_json`: part of the study's key
    warnings: tuple[str, ...] = ()
    compiler: CompilerCommand | None = None
    nvrtc_arch: tuple[int, int] | None = None
    run_dir: Path | None = None
    run_spec: RunSpec | KernelSpec | None = None  # what `measurers.run_key` reads; None: replay


class DeviceActor:
    """One device in its own Ray worker process, holding an ordinary measurer (made there:
    a GPU's backend and NVML handle cannot travel). Every failure of a configuration comes
    back as a Measurement; an exception means the device itself is broken."""

    def __init__(self, recipe: DeviceRecipe):
        self.resources = ExitStack()
        if recipe.table is not None:
            self.measurer: Measurer = ReplayMeasurer(recipe.table, recipe.delay)
            self.info = DeviceInfo(recipe.table.device, self.measurer.to_json())
            return
        from annotune.session.measurers import open_measurer  # a GPU's: not for replay

        assert recipe.problem is not None and recipe.settings is not None
        measurer, compiler, arch = open_measurer(recipe.problem, recipe.settings, self.resources)
        self.measurer = measurer
        self.info = DeviceInfo(
            recipe.device or assigned_gpu_name(),
            measurer.to_json(),
            tuple(measurer.warnings),
            compiler,
            arch,
            measurer.run_dir,
            measurer.run_spec,
        )

    def describe(self) -> DeviceInfo:
        return self.info

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        return self.measurer.measure(build, stop_above)

    def sample(self, build: BuildResult) -> Measurement:
        return self.measurer.sample(build)

    def adopt_baseline(self, measurement: Measurement, build: BuildResult) -> None:
        self.measurer.adopt_baseline(measurement, lambda: build)


def assigned_gpu_name() -> str:
    """The name of the GPU Ray gave this actor: nvidia-smi lists every GPU of the node, so it
    is asked for the first one in CUDA_VISIBLE_DEVICES (else the machine's device name)."""
    from annotune.run.device import NVIDIA_SMI_TIMEOUT_S, current_device_name

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if not visible:
        return current_device_name()
    done = run_tool(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", visible],
        timeout=NVIDIA_SMI_TIMEOUT_S,
    )
    lines = done.stdout.strip().splitlines() if done.ok else []
    return lines[0].strip() if lines and lines[0].strip() else current_device_name()
