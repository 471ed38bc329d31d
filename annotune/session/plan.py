"""Everything a tune needs, resolved once before it measures anything: the space and its legal
configurations with the baseline (`Ground`), the device and where results go (`Place`), the
measurer, builder and study (`Instruments`), and the search with what it learns from (`Search`).
Each is a small record; the loop (`annotune.session.loop`) only asks, builds, measures, tells
and stores with them. Bad input found here (a reference outside the space, a --db in no
directory) is an AnnotuneError before any compile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from threading import Event

import numpy as np

from annotune.annotate import Problem, problem_space
from annotune.builder import Builder, CompilerCommand
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Candidates, Measurement, Number
from annotune.results.database import Database, Study, StudyKey
from annotune.results.storage import Storage
from annotune.results.workspace import workspace
from annotune.run.device import current_device_name
from annotune.run.protocol import Measurer
from annotune.search import TRANSFER_STRATEGIES, Strategy, create
from annotune.session.concurrent import DevicePool
from annotune.session.learning import LiveTransfer
from annotune.session.measurers import open_measurer
from annotune.session.options import MeasureSettings
from annotune.session.replay_device import ReplayBuilder, ReplayMeasurer, ReplayTable, load_table
from annotune.space import Space
from annotune.transfer.features import DeviceFeatures
from annotune.transfer.prior import Prior, gather_prior
from annotune.transfer.resolve import GpuTable, resolve, user_table


@dataclass(frozen=True)
class Devices:
    """Where a tune measures when not on this machine's own GPU (a Ray cluster's devices, or
    a replay device): the device name its study and header go by; the measurer of the steps
    that take one device (the baseline, retried failures, the final check), which also keys
    the study; the compile settings its GPU needs; and the pool the search measures on
    concurrently (None: the sequential loop on `measurer`). With `replay` nothing is compiled.
    `stop`, once set, interrupts the tune as Ctrl-C does (a tune in another thread)."""

    name: str
    measurer: Measurer  # a measurer of `annotune.session.measurers`, a ReplayMeasurer or a proxy
    compiler: CompilerCommand | None = None
    nvrtc_arch: tuple[int, int] | None = None
    pool: DevicePool | None = None
    replay: ReplayTable | None = None
    stop: Event | None = None
    learn_live: bool = False  # other kinds tune at the same time: learn from them as they go


def replay_devices(problem: Problem, recordings: tuple[Path, ...], delay: float | None) -> Devices:
    """The one replay device of a tune without Ray: the one recording of `recordings`."""
    if len(recordings) != 1:
        raise AnnotuneError("several --replay recordings are several kinds of device: add --ray")
    table = load_table(recordings[0], problem_space(problem).names)
    measurer = ReplayMeasurer(table, delay)
    return Devices(table.device, measurer, replay=table)


@dataclass(frozen=True)
class Ground:
    """What is tuned: the space, its legal configurations (in the order the search refers to
    them by row; all of them, or a sample when too many to count), and the baseline."""

    space: Space
    legal: np.ndarray
    legal_count: int | None
    candidates: Candidates

    @classmethod
    def of(cls, problem: Problem, rng: np.random.Generator) -> Ground:
        space = problem_space(problem)
        legal, legal_count = space.search_rows(rng)
        return cls(space, legal, legal_count, Candidates(space.decode(legal), space.names))

    def rows(self, configs: Sequence[Mapping[str, Number]]) -> list[int]:
        return rows_of(self.space, self.legal, configs)

    def unrecorded(self, devices: Devices | None) -> tuple[str, ...]:
        """A warning when the replay recording lacks legal configurations of the space (each
        is a failure, "not in the recording", if the search asks for it)."""
        table = devices.replay if devices is not None else None
        missing = table.missing(self.space.to_dicts(self.legal)) if table is not None else 0
        if not missing:
            return ()
        return (
            f"{missing} of the {len(self.legal)} legal configurations are not in the recording "
            f"{table.name}: each fails as 'not in the recording' when the search asks for it",
        )


@dataclass(frozen=True)
class Place:
    """Which device the tune is for, its features when known (for learning from other GPUs),
    the user's GPU table, and where its results database and compile cache are; `moved` says
    when they went to the user's cache directory (a read-only checkout)."""

    device: str
    gpus: GpuTable
    target: DeviceFeatures | None
    db_path: Path
    cache_dir: Path
    moved: str

    @classmethod
    def of(
        cls,
        problem: Problem,
        device: str,
        gpus: Path | None,
        db_path: Path | None,
        cache_dir: Path | None,
    ) -> Place:
        config = Path(problem.config_file) if problem.config_file else None
        table = user_table(gpus, config)
        resolved = resolve(device, table)
        # A stand-in's features are resolved again by `gather_prior`, which says whose they are.
        target = None if resolved.warnings else resolved.features()
        place = workspace(problem.source)
        if db_path is not None:
            require_db_directory(db_path)
        moved = place.warning if db_path is None or cache_dir is None else ""
        return cls(
            device, table, target, db_path or place.db_path, cache_dir or place.cache_dir, moved
        )


@dataclass(frozen=True)
class Instruments:
    """What measures: the measurer, the builder (a replay table's when nothing is compiled),
    and the study in the results database, with the failures to measure again."""

    measurer: Measurer
    builder: Builder | ReplayBuilder
    db: Storage
    key: StudyKey
    study: Study
    retry: list[Measurement]

    @classmethod
    def open(
        cls,
        problem: Problem,
        devices: Devices | None,
        place: Place,
        resources: ExitStack,
        *,
        settings: MeasureSettings,
        jobs: int | None,
        compile_timeout: float,
        fresh: bool,
        retry_failed: bool,
    ) -> Instruments:
        """Open what measures, on `devices` (None: a measurer of this machine made from
        `settings`), registering what must be closed with `resources`."""
        if devices is None:
            measurer, compiler, nvrtc_arch = open_measurer(problem, settings, resources)
        else:
            measurer, compiler, nvrtc_arch = devices.measurer, devices.compiler, devices.nvrtc_arch
        builder: Builder | ReplayBuilder
        if devices is not None and devices.replay is not None:
            jobs = devices.pool.devices() if devices.pool is not None else 1
            builder = ReplayBuilder(devices.replay, jobs)
        else:
            builder = resources.enter_context(
                Builder(
                    problem,
                    compiler=compiler,
                    cache_dir=place.cache_dir,
                    jobs=jobs,
                    timeout=compile_timeout,
                    nvrtc_arch=nvrtc_arch,
                )
            )
        db = resources.enter_context(Database(place.db_path))
        key = StudyKey.for_problem(
            problem,
            device=place.device,
            build={
                "compiler": builder.identity(),
                "run": measurer.to_json(),
                **({"inputs": inputs} if (inputs := builder.program_inputs()) else {}),
            },
        )
        target = place.target
        study = db.open_study(
            key, fresh=fresh, device_features=target.to_json() if target else None
        )
        retry = db.forget_failures(study) if retry_failed else []
        return cls(measurer, builder, db, key, study, retry)


@dataclass(frozen=True)
class Search:
    """The strategy, what it learned from other GPUs before it started (`prior`), and, while
    other kinds tune at the same time, how it goes on learning from them (`live`)."""

    strategy: Strategy
    prior: Prior
    live: LiveTransfer | None

    @classmethod
    def choose(
        cls,
        ground: Ground,
        instruments: Instruments,
        place: Place,
        devices: Devices | None,
        *,
        strategy: str,
        transfer: bool,
        transfer_from: tuple[Path, ...],
        seed: int,
    ) -> Search:
        """`strategy`, or `transfer` when other GPUs' results (the database's, and the files
        `transfer_from` names) are there to learn from, or will be (other kinds tuned live)."""

        def gather() -> Prior:
            """Other GPUs' results as they are now (again while other kinds tune)."""
            return gather_prior(
                ground.candidates,
                instruments.key,
                place.target,
                db=instruments.db,
                files=transfer_from,
                rng=np.random.default_rng([seed, 1]),
                gpus=place.gpus,
            )

        learns = transfer and strategy in TRANSFER_STRATEGIES
        prior = gather() if learns else Prior()
        live = devices is not None and devices.learn_live and learns
        chosen = create("transfer", **prior.options()) if prior.tasks or live else create(strategy)
        return cls(chosen, prior, LiveTransfer(chosen, prior, gather) if live else None)


def device_name(device: str | None, devices: Devices | None) -> str:
    """The device a tune is for: the user's name, else the devices', else this machine's."""
    return device or (devices.name if devices else current_device_name())


def require_db_directory(db_path: Path) -> None:
    """A database the user names goes in a directory that exists: a mistyped --db is an
    error, not a new directory tree (the default place is made: it is annotune's own)."""
    directory = db_path.parent
    if not directory.is_dir():
        raise AnnotuneError(
            f"{db_path}: there is no directory {directory} to hold the results database",
            hint=f"create it (mkdir -p {directory}), or pick another --db",
        )


def baseline_of(space: Space, reference: dict[str, Number] | None) -> dict[str, Number]:
    """The configuration every other is compared with: the user's reference, else the default.
    AnnotuneError when the reference is not a complete, legal configuration of the space."""
    default = space.to_dicts(space.default_row()[None, :])[0]
    if reference is None:
        return default
    unknown = sorted(set(reference) - set(default))
    if unknown:
        raise AnnotuneError(f"--reference names no parameter {', '.join(unknown)}")
    row = space.index_row({**default, **reference})
    if row is None or not space.is_legal(row[None, :])[0]:
        raise AnnotuneError(
            f"--reference {reference} is not a legal configuration of the space",
            hint="every value must be in its parameter's domain and meet the constraints",
        )
    return space.to_dicts(row[None, :])[0]


def rows_of(space: Space, legal: np.ndarray, configs: Sequence[Mapping[str, Number]]) -> list[int]:
    """The rows of `legal` that hold `configs` (those that are not legal now are skipped): one
    sort of the rows as byte strings, then a binary search for each config, so that resuming
    many configurations in a large space is not configurations x rows."""
    wanted = [row for row in map(space.index_row, configs) if row is not None]
    if not wanted or not len(legal):
        return []

    def keys(rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows, dtype=legal.dtype)
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()

    rows = keys(legal)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    queries = keys(np.array(wanted))
    at = np.minimum(np.searchsorted(ordered, queries), len(ordered) - 1)
    return [int(order[i]) for i, q in zip(at, queries, strict=True) if ordered[i] == q]
