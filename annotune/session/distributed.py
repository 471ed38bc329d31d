"""Tuning on a Ray cluster: the driver searches and owns the database; each device is an actor.

`annotune tune FILE --ray` (`pip install 'annotune[ray]'`) joins the cluster at
`--ray-address`, or starts a local one, and makes one Ray actor (`DeviceActor`) per device:

* A GPU is an actor with `num_gpus=1` that holds the ordinary measurer `annotune tune` uses on
  its own machine (`measurers.open_measurer`: kernel or program mode), made inside the actor, where
  Ray's `CUDA_VISIBLE_DEVICES` gives it its own GPU. A replay device (`--replay FILE`) holds a
  `ReplayMeasurer` of the recording and takes no GPU, so the whole path runs without one.
* Devices of the same kind (the GPU's name; one recording) share one study and one header:
  `loop.tune_on` searches for the kind and measures each batch on all its devices at once
  through a `RayPool` (`annotune.session.concurrent`). Several kinds are tuned at the same
  time, one thread each, each with its own study, header and report, and each learns from
  the others as their results arrive: its search is the `transfer` strategy, which ranks the
  space again with the other kinds' measurements once they hold enough
  (`learning.LiveTransfer`).
* Compiles stay on the driver, in the tune's own Builder pool (NVRTC workers, nvcc, the
  compile cache with its dependency tracking and checks): moving them into Ray tasks would
  ship every source and header out and every executable back, for no gain on the single node
  this was written on, where tasks and the pool would share the same cores. The actors read
  each build where the driver's compile cache holds it, so GPU actors need the driver's file
  system (one node, or a shared file system); replay devices need nothing (nothing is built).
* The baseline, a retried failure and the final interleaved check run on one device, the
  first live one (interleaving needs one device); so does the drift check.
* Faults: an actor that dies (`RayActorError`, or an error raised in it) is marked lost and the
  work it held is measured by the others; nothing recorded is lost, because every measurement
  is committed by the driver as it lands. A configuration whose device was lost twice while it
  ran is recorded as a runtime error (it may be what kills them; `--retry-failed` measures it
  again). When no device is left the tune stops, keeps what was measured and says so; running
  it again resumes from the database.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from annotune.annotate import Problem, problem_space
from annotune.annotate.problem import chosen_kernel
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Measurement, Number
from annotune.session.concurrent import DeviceRate, DevicesLost, Work
from annotune.session.device_actor import DeviceActor, DeviceInfo, DeviceRecipe
from annotune.session.loop import tune_on
from annotune.session.measurers import run_environment, run_key
from annotune.session.options import TuneOptions
from annotune.session.plan import Devices
from annotune.session.replay_device import ReplayTable, load_table
from annotune.session.report import NoCudaDevice, ProgressCallback, TuneReport

DEPTH = 2
"""Pieces of work each device holds at once: the one it measures and the next, so that it
never waits for the driver to search, record or compile between two measurements."""

LOSSES_TO_FAIL = 2
"""Devices lost while measuring one configuration before it is recorded as a failure."""

INSTALL_HINT = "pip install 'annotune[ray]'"


def import_ray() -> ModuleType:
    """The `ray` module; AnnotuneError saying how to install it when it is missing."""
    try:
        import ray
    except ImportError:
        raise AnnotuneError("--ray needs Ray, which is not installed", hint=INSTALL_HINT) from None
    return ray


@dataclass
class _Device:
    """A device as the pool tracks it: its actor, its calls in order, what it measured."""

    name: str
    actor: Any
    actor_name: str
    started: float = field(default_factory=time.monotonic)
    running: list[Any] = field(default_factory=list)  # object refs, oldest (measuring) first
    measured: int = 0
    lost: str = ""


class RayPool:
    """The devices of one kind as the concurrent search's `DevicePool`: each holds at most
    `depth` pieces of work; more wait in a queue on the driver until a device is free.

    A device whose call fails is lost: its work goes back to the head of the queue, to be
    measured by the others, and it is killed (an error raised in it may have left it broken).
    Work that was being measured (the oldest call of its device) when `LOSSES_TO_FAIL` devices
    were lost is returned as a runtime error instead."""

    def __init__(self, ray: ModuleType, devices: list[_Device], depth: int = DEPTH):
        self.ray = ray
        self.members = devices
        self.depth = depth
        self.queue: deque[Work] = deque()
        self.running: dict[Any, tuple[_Device, Work]] = {}  # object ref -> device, work
        self.losses: dict[int, int] = {}  # work key -> devices lost while measuring it
        self.failed: list[tuple[Work, Measurement]] = []
        self.last_loss = ""

    def live(self) -> list[_Device]:
        live = [d for d in self.members if not d.lost]
        if not live:
            raise DevicesLost(
                f"every device was lost (the last: {self.last_loss}); what was measured is "
                "kept in the database, and running the same command again resumes"
            )
        return live

    def devices(self) -> int:
        return len(self.live())

    def outstanding(self) -> int:
        return len(self.running) + len(self.queue) + len(self.failed)

    def submit(self, work: Work) -> None:
        self.queue.append(work)
        self._assign()

    def wait(self, timeout: float | None) -> list[tuple[Work, Measurement]]:
        done, self.failed = self.failed, []
        if self.running and not done:
            refs = list(self.running)
            ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
            if ready and rest:
                more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                if ref not in self.running:  # given back when its device was lost
                    continue
                device, work = self.running.pop(ref)
                device.running.remove(ref)
                try:
                    measurement = self.ray.get(ref)
                except self.ray.exceptions.RayError as error:
                    self._lose(device, work, error)
                    continue
                device.measured += 1
                done.append((work, measurement))
        self._assign()
        return done

    def call(self, method: str, *args: Any) -> Any:
        """`method` of the first live device's actor, waited for; on the next one if that
        device is lost meanwhile (DevicesLost when none is left)."""
        while True:
            device = self.live()[0]
            try:
                return self.ray.get(getattr(device.actor, method).remote(*args))
            except self.ray.exceptions.RayError as error:
                self._lose(device, None, error)

    def broadcast(self, method: str, *args: Any) -> None:
        """`method` on every live device, waited for; a device that fails is lost."""
        calls = [(d, getattr(d.actor, method).remote(*args)) for d in self.live()]
        for device, ref in calls:
            try:
                self.ray.get(ref)
            except self.ray.exceptions.RayError as error:
                self._lose(device, None, error)
        self.live()

    def rates(self) -> tuple[DeviceRate, ...]:
        now = time.monotonic()
        return tuple(
            DeviceRate(
                d.name,
                d.actor_name,
                d.measured,
                60.0 * d.measured / max(now - d.started, 1e-9),
                d.lost,
            )
            for d in self.members
        )

    def close(self) -> None:
        """End every actor (their work, if any, is dropped: the tune is over)."""
        for device in self.members:
            self.ray.kill(device.actor)
            device.lost = device.lost or "the tune ended"

    def _assign(self) -> None:
        """Hand queued work to devices with room, least loaded first (pinned work to its
        device while that one lives)."""
        while self.queue:
            live = [d for d in self.live() if len(d.running) < self.depth]
            if not live:
                return
            work = self.queue[0]
            pinned = self.members[work.pinned] if work.pinned is not None else None
            if pinned is not None and not pinned.lost:
                if pinned not in live:
                    return
                device = pinned
            else:
                device = min(live, key=lambda d: len(d.running))
            self.queue.popleft()
            ref = device.actor.measure.remote(work.build, work.stop_above)
            device.running.append(ref)
            self.running[ref] = (device, work)

    def _lose(self, device: _Device, work: Work | None, error: Exception) -> None:
        """Mark `device` lost; its work goes back to the queue (`work`, when given, was its
        oldest call: the one it was measuring)."""
        reason = _reason(error)
        device.lost = reason
        self.last_loss = f"{device.name}: {reason}"
        back = [self.running.pop(ref)[1] for ref in device.running if ref in self.running]
        device.running.clear()
        if work is not None:
            back.insert(0, work)
        if back:
            measuring = back[0]
            self.losses[measuring.key] = self.losses.get(measuring.key, 0) + 1
            if self.losses[measuring.key] >= LOSSES_TO_FAIL:
                back.pop(0)
                error_text = (
                    f"{LOSSES_TO_FAIL} devices were lost while measuring it (the last: {reason})"
                )
                failure = Measurement(
                    dict(measuring.build.params), "runtime_error", error=error_text
                )
                self.failed.append((measuring, failure))
        self.queue.extendleft(reversed(back))
        self.ray.kill(device.actor)


def _reason(error: Exception) -> str:
    """A Ray error's own message in one line (Ray's text holds a traceback and advice)."""
    cause = getattr(error, "cause", None) or error.__cause__
    text = str(cause) if cause is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else 'no message'}"


class _ActorMeasurer:
    """The tune's measurer for the steps that take one device (the baseline, retries, the
    final check): the first live device of the pool. `adopt_baseline` reaches every device,
    since each checks outputs against its own run of the baseline."""

    def __init__(self, pool: RayPool, info: DeviceInfo, warnings: tuple[str, ...]):
        self.pool = pool
        self.info = info
        self.warnings = info.warnings + warnings
        self.run_dir = info.run_dir

    def to_json(self) -> dict:
        return self.info.study

    def environment(self, params: Mapping[str, Number]) -> str:
        spec = self.info.run_spec
        return "" if spec is None else run_environment(spec, params)

    def run_of(self, params: Mapping[str, Number]) -> str | None:
        """Computed here: a device's calls wait behind the work it holds."""
        spec = self.info.run_spec
        return None if spec is None else run_key(spec, params)

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        return self.pool.call("measure", build, stop_above)

    def sample(self, build: BuildResult) -> Measurement:
        return self.pool.call("sample", build)

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        if self.info.run_spec is not None:  # a recording has no outputs
            self.pool.broadcast("adopt_baseline", measurement, rebuild())


@dataclass
class _Kind:
    """The devices of one kind, their pool and the recording they serve (replay)."""

    name: str
    pool: RayPool
    info: DeviceInfo
    table: ReplayTable | None = None
    warnings: tuple[str, ...] = ()


def tune_devices(
    problem: Problem,
    options: TuneOptions,
    on_progress: ProgressCallback | None = None,
    *,
    one_kind: bool = False,
) -> list[TuneReport]:
    """Tune `problem` on the devices of a Ray cluster (module docstring): one report per
    kind of device, in the order the kinds were found. AnnotuneError when Ray is missing,
    the cluster cannot be joined or has too few devices, or (`one_kind`) its devices are of
    several kinds; NoCudaDevice when it has no GPU and no recording is given; before Ray starts,
    an AnnotuneError when `--mode kernel` or `--kernel` names no declared kernel."""
    chosen_kernel(problem, options.mode, options.kernel)
    ray = import_ray()
    with _cluster(ray, options.ray_address):
        kinds = _start_kinds(ray, problem, options)
        try:
            if one_kind and len(kinds) > 1:
                raise AnnotuneError(
                    f"{len(kinds)} kinds of device ({', '.join(k.name for k in kinds)}): "
                    "tune_devices tunes each and returns each report"
                )
            return _tune_kinds(problem, options, kinds, on_progress)
        finally:
            for kind in kinds:
                kind.pool.close()


@contextmanager
def _cluster(ray: ModuleType, address: str | None) -> Iterator[None]:
    """Ray connected: the caller's connection when there is one, else the cluster at
    `address` (None: a new local one), disconnected at the end."""
    if ray.is_initialized():
        yield
        return
    settings: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
    }
    if address is None:
        settings["num_cpus"] = os.cpu_count() or 1
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=address, **settings)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise AnnotuneError(f"cannot start or join {where}: {error}") from None
    if on_sigterm is not None and threading.current_thread() is threading.main_thread():
        # Ray's driver takes SIGTERM over (it prints a stack trace and dies): the handler the
        # process had, the CLI's clean stop or the default, is put back.
        signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        ray.shutdown()


def _start_kinds(ray: ModuleType, problem: Problem, options: TuneOptions) -> list[_Kind]:
    """Start the actors and group them by kind: one kind per recording, else one per GPU
    name. AnnotuneError when none starts."""
    token = uuid.uuid4().hex[:8]
    remote = ray.remote(DeviceActor)
    if options.replay:
        names = problem_space(problem).names
        count = options.devices if isinstance(options.devices, int) else 1
        kinds = []
        for k, path in enumerate(options.replay):
            table = load_table(path, names)
            if any(kind.name == table.device for kind in kinds):
                raise AnnotuneError(
                    f"{path}: another --replay recording is of {table.device} too; "
                    "one recording per kind of device"
                )
            recipe = DeviceRecipe(table=table, delay=options.replay_delay)
            started = _start(ray, remote, recipe, count, f"annotune-{token}-{k}", {"num_cpus": 0})
            (kind,) = _grouped(ray, started)
            kinds.append(replace(kind, table=table))
        return kinds
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus == 0:
        raise NoCudaDevice(
            "the Ray cluster has no GPU: there is nothing to measure on",
            hint="--replay FILE measures on replay devices serving a recorded run",
        )
    count = options.devices if isinstance(options.devices, int) else gpus
    if count > gpus:
        raise AnnotuneError(f"--devices {count}: the Ray cluster has {gpus} GPUs")
    run = replace(options.run, cwd=options.run.cwd or Path.cwd())  # the driver's, not Ray's
    settings = replace(options.measuring(), run=run)
    recipe = DeviceRecipe(problem=problem, settings=settings, device=options.device)
    started = _start(ray, remote, recipe, count, f"annotune-{token}", {"num_gpus": 1})
    return _grouped(ray, started)


def _start(
    ray: ModuleType, remote: Any, recipe: DeviceRecipe, count: int, prefix: str, needs: dict
) -> list[tuple[str, Any, DeviceInfo | Exception]]:
    """`count` actors from `recipe`, each with what it said about its device or why it
    could not start."""
    actors = []
    for i in range(count):
        name = f"{prefix}-{i}"
        actors.append((name, remote.options(name=name, **needs).remote(recipe)))
    started: list[tuple[str, Any, DeviceInfo | Exception]] = []
    for name, actor in actors:
        try:
            started.append((name, actor, ray.get(actor.describe.remote())))
        except ray.exceptions.RayError as error:
            started.append((name, actor, error))
    return started


def _grouped(
    ray: ModuleType, started: list[tuple[str, Any, DeviceInfo | Exception]]
) -> list[_Kind]:
    """The started actors by device name; those that failed to start become a warning of
    every kind (AnnotuneError when none started)."""
    failed = [(name, error) for name, _, error in started if isinstance(error, Exception)]
    for _, actor, info in started:
        if isinstance(info, Exception):
            ray.kill(actor)
    good = [(name, actor, info) for name, actor, info in started if isinstance(info, DeviceInfo)]
    if not good:
        name, error = failed[0]
        raise AnnotuneError(f"no device could start: {name}: {_reason(error)}")
    warnings = tuple(f"device {name} did not start: {_reason(error)}" for name, error in failed)
    by_name: dict[str, list[tuple[str, Any, DeviceInfo]]] = {}
    for entry in good:
        by_name.setdefault(entry[2].name, []).append(entry)
    kinds = []
    for kind_name, entries in by_name.items():
        devices = [
            _Device(f"{kind_name} #{i}", actor, actor_name)
            for i, (actor_name, actor, _) in enumerate(entries)
        ]
        info = entries[0][2]
        kinds.append(_Kind(kind_name, RayPool(ray, devices), info, warnings=warnings))
    return kinds


def _devices(kind: _Kind, stop: threading.Event | None, learn_live: bool = False) -> Devices:
    return Devices(
        kind.name,
        _ActorMeasurer(kind.pool, kind.info, kind.warnings),
        compiler=kind.info.compiler,
        nvrtc_arch=kind.info.nvrtc_arch,
        pool=kind.pool,
        replay=kind.table,
        stop=stop,
        learn_live=learn_live,
    )


def _tune_kinds(
    problem: Problem,
    options: TuneOptions,
    kinds: list[_Kind],
    on_progress: ProgressCallback | None,
) -> list[TuneReport]:
    """One tune per kind: in this thread when there is one; else one thread each, Ctrl-C
    here interrupting all of them (each keeps what it measured)."""
    if len(kinds) == 1:
        return [tune_on(problem, options, _devices(kinds[0], None), on_progress)]
    if options.device is not None:
        raise AnnotuneError(
            f"--device names one device, and {len(kinds)} kinds of device measure: "
            + ", ".join(kind.name for kind in kinds)
        )
    stop = threading.Event()
    lock = threading.Lock()

    def report(progress: Any) -> None:
        if on_progress is not None:
            with lock:
                on_progress(progress)

    with ThreadPoolExecutor(len(kinds)) as threads:
        futures = [
            threads.submit(tune_on, problem, options, _devices(kind, stop, True), report)
            for kind in kinds
        ]
        try:
            return [future.result() for future in futures]
        except KeyboardInterrupt:
            stop.set()
            return [future.result() for future in futures]
