"""`annotune.predict` and `annotune.predict_size`: the best configuration for a GPU with no
measurements of its own (zero-shot transfer from other GPUs' results), or for a problem size
never tuned (from the sizes tuned on the device), as `annotune predict` gives them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from annotune.annotate import read_problem
from annotune.api.paths import optional_path
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import check_headers_writable
from annotune.emit.sizes import parse_sizes
from annotune.run.device import current_device_name
from annotune.transfer.prior import PredictReport
from annotune.transfer.prior import predict as predict_device
from annotune.transfer.resolve import user_table
from annotune.transfer.sizes import SizePrediction
from annotune.transfer.sizes import predict_size as predict_at_size


def predict(
    source: str | Path,
    *,
    device: str,
    transfer_from: Sequence[str | Path] = (),
    seed: int = 0,
    write: bool = False,
    force: bool = False,
    out_dir: str | Path | None = None,
    db: str | Path | None = None,
    config: str | Path | None = None,
    gpus: str | Path | None = None,
) -> PredictReport:
    """Predict `source`'s best configuration for `device` from the results of other GPUs
    (the results database's and `transfer_from` files). `write`: write the header `tune`
    would, marked "predicted, not measured" (a measured one only with `force`). Its
    `prior.warnings` say what the user should know (a GPU known nowhere, a weak source).
    Raises AnnotuneError when no other GPU's results can be used."""
    file, headers = Path(source), optional_path(out_dir)
    if write:
        check_headers_writable(file, headers)
    problem = read_problem(file, config_path=optional_path(config))
    table = user_table(
        optional_path(gpus), Path(problem.config_file) if problem.config_file else None
    )
    return predict_device(
        problem,
        device,
        db_path=optional_path(db),
        files=tuple(Path(f) for f in transfer_from),
        seed=seed,
        write=write,
        force=force,
        out_dir=headers,
        gpus=table,
    )


def predict_size(
    source: str | Path,
    *,
    size: str,
    device: str | None = None,
    seed: int = 0,
    write: bool = False,
    force: bool = False,
    out_dir: str | Path | None = None,
    db: str | Path | None = None,
    config: str | Path | None = None,
) -> SizePrediction:
    """Predict `source`'s best configuration at `size` ("N=2048", one size) on `device`
    (default: this machine's) from the other sizes tuned there (`tune_sizes`); `write` adds
    it to the size-aware header. Raises AnnotuneError when fewer than two sizes were tuned."""
    file, headers = Path(source), optional_path(out_dir)
    if write:
        check_headers_writable(file, headers)
    name, values = parse_sizes(size, "--size")
    if len(values) != 1:
        raise AnnotuneError(f"--size {size!r}: one size at a time, e.g. --size {name}={values[0]}")
    return predict_at_size(
        file,
        name,
        values[0],
        device or current_device_name(),
        config_path=optional_path(config),
        db_path=optional_path(db),
        seed=seed,
        write=write,
        force=force,
        out_dir=headers,
    )
