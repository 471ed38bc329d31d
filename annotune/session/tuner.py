"""`annotune tune`: the strategy, builder, runner and database joined, for this machine's GPU
(or CPU), a replay device, or a Ray cluster's devices.

When the database (or result files the user names) holds measurements of the same source and
space on other GPUs, the search learns from them (`annotune.transfer.prior.gather_prior`): the
`transfer` strategy ranks the space with a model of those GPUs, measures the most promising
configurations first and goes on as IterML (see `annotune.search.transfer`).

The default configuration (or the user's `reference`) is always measured first: its time is
the baseline, and its `annotune-check:` value is the reference every other configuration's
output must match; when it fails, the tune stops, since nothing could be checked or compared
against it. Numbers the report claims are re-measured: the default again every `drift_every`
new measurements (a default that drifts out of its interval marks the tune noisy), and before
the header is written the best few and the baseline interleaved (`annotune.session.recheck`);
the winner and its speedup come from that check alone. In a read-only checkout the database
and the compile cache go to the user's cache directory
(`annotune.results.database.workspace`), and the report says so. The loop itself is
`annotune.session.loop.tune_on`.
"""

from __future__ import annotations

from pathlib import Path

from annotune.annotate import Problem, read_problem
from annotune.annotate.problem import chosen_kernel
from annotune.annotate.summary import require_checked, require_legal
from annotune.emit import check_headers_writable
from annotune.run.device import gpu_name
from annotune.session.distributed import tune_devices
from annotune.session.loop import tune_on
from annotune.session.options import (
    TuneArguments,
    TuneOptions,
    kernel_mode,
    tune_options,
    warm_nvrtc,
)
from annotune.session.plan import replay_devices
from annotune.session.report import NoCudaDevice, ProgressCallback, TuneReport


def tune(
    problem: Problem, options: TuneOptions, on_progress: ProgressCallback | None = None
) -> TuneReport:
    """Tune `problem` on this machine and write the winning configuration's header.

    Ctrl-C (KeyboardInterrupt) stops the search cleanly: what was measured is kept and the
    best-so-far header is still written (with no speedup claimed: nothing was re-checked); the
    report says `interrupted`. NoCudaDevice, before anything is built, for a CUDA program on a
    machine without a GPU. With `options.replay` the one recording is served by a replay
    device here (no GPU needed); with `options.ray` the devices are a Ray cluster's
    (`annotune.session.distributed.tune_devices`), and this is the report of their one kind.
    An AnnotuneError before anything is built when `--mode kernel` or `--kernel` names no
    declared kernel (`annotune.annotate.problem.chosen_kernel`).
    """
    chosen_kernel(problem, options.mode, options.kernel)
    if not kernel_mode(problem, options.mode):
        require_checked(problem)  # a launch a variant rewrites alone would compute less
    if options.ray:
        (report,) = tune_devices(problem, options, on_progress, one_kind=True)
        return report
    if options.replay:
        devices = replay_devices(problem, options.replay, options.replay_delay)
        return tune_on(problem, options, devices, on_progress)
    _require_cuda_device(problem, options.mode)
    return tune_on(problem, options, None, on_progress)


def _require_cuda_device(problem: Problem, mode: str) -> None:
    """Stop a tune of a CUDA program (or a kernel) at once when this machine has no CUDA GPU:
    every run would fail, and the failures would be timed and stored. The driver is asked
    (nvidia-smi), never `ANNOTUNE_DEVICE` or `--device`: they name a GPU, they cannot make one."""
    launches_kernel = kernel_mode(problem, mode) and bool(problem.kernels)
    if (problem.language == "cuda" or launches_kernel) and gpu_name() is None:
        raise NoCudaDevice(
            f"{problem.source} is CUDA, and this machine has no CUDA GPU (nvidia-smi finds "
            "none): every run would fail",
            hint="check that the variants compile with --compile-only (--arch sm_XY picks "
            "the GPU architecture)",
        )


def tune_file(
    source: Path,
    given: TuneArguments,
    *,
    config_path: Path | None = None,
    on_progress: ProgressCallback | None = None,
) -> list[TuneReport]:
    """`annotune tune FILE`: `source` read (its annotations legal, the header's directory
    writable, before anything is built) and tuned with the options `given` and the config
    make; one report per kind of device (several only with `--ray` over several
    recordings). Raises as `tune` does."""
    warm_nvrtc(given.mode == "kernel", given.jobs)  # while libclang parses
    problem = read_problem(source, config_path=config_path, args=given.args or None)
    require_legal(problem)
    options = tune_options(problem, given)
    check_headers_writable(problem.source, options.out_dir)
    if options.ray:
        return tune_devices(problem, options, on_progress)
    return [tune(problem, options, on_progress)]
