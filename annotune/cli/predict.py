"""`annotune predict FILE --device NAME`: the best configuration for a GPU with no measurements.

Zero-shot transfer: a model of the results of FILE on other GPUs (the results database's, and
`--transfer-from` files) predicts for NAME from its device features; `--write` writes the
header `tune` would, marked "predicted, not measured" (a measured one only with `--force`).
A GPU annotune does not know is described by `--gpus FILE` or `[[gpu]]` entries in the config
file; without either it is predicted for from what its name tells and the nearest known GPU of
its vendor and architecture, with a warning. Exit codes: 0 success, 2 bad input (no other GPU's
results, a malformed GPU table, a measured header in the way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from annotune.api.predict import predict, predict_size
from annotune.cli.app import (
    ConfigPath,
    DbPath,
    JsonFlag,
    app,
    print_json,
    stderr,
    stdout,
    user_errors,
)
from annotune.cli.params import MAX_SEED, GpusOption, device_name, output_dir
from annotune.core.diagnostics import AnnotuneError
from annotune.transfer.sizes import SizePrediction


@app.command("predict")
def predict_command(
    file: Annotated[Path, typer.Argument(help="The annotated source.")],
    device: Annotated[
        str | None,
        typer.Option(
            callback=device_name,
            help="The GPU to predict for, e.g. 'NVIDIA A100-PCIE-40GB' (with --size: default "
            "this machine's).",
        ),
    ] = None,
    size: Annotated[
        str | None,
        typer.Option(
            help="A problem size not tuned, e.g. N=2048: predicted from the sizes "
            "`tune --sizes` measured on the device; --write adds it to the size-aware header.",
        ),
    ] = None,
    transfer_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--transfer-from",
            help="A T4 (annotune export) or Kernel Tuner cache file of this space measured on "
            "another GPU (repeatable).",
        ),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Write tuned/<device>/<stem>.h, marked as predicted.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="With --write: replace a measured header too.")
    ] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option(callback=output_dir, help="Where headers go (default: tuned/ beside FILE)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="Random seed of the model.")] = 0,
    db: DbPath = None,
    config: ConfigPath = None,
    gpus: GpusOption = None,
    json: JsonFlag = False,
) -> None:
    """Predict the best configuration of FILE for a GPU from other GPUs' results alone, or
    for a problem size from the other sizes tuned (--size)."""
    with user_errors():
        if size is not None:
            if transfer_from or gpus is not None:
                raise AnnotuneError(
                    "--size learns from this device's other sizes in the results database; "
                    "--transfer-from and --gpus are for predicting another GPU"
                )
            _print_size(
                predict_size(
                    file,
                    size=size,
                    device=device,
                    seed=seed,
                    write=write,
                    force=force,
                    out_dir=out_dir,
                    db=db,
                    config=config,
                ),
                json,
            )
            return
        if device is None:
            raise AnnotuneError(
                "--device names the GPU to predict for", hint="or --size N=... for a size"
            )
        report = predict(
            file,
            device=device,
            transfer_from=tuple(transfer_from or ()),
            seed=seed,
            write=write,
            force=force,
            out_dir=out_dir,
            db=db,
            config=config,
            gpus=gpus,
        )
    for warning in report.prior.warnings:
        stderr.print(f"annotune: warning: {warning}", markup=False, highlight=False)
    if json:
        print_json(report.to_json())
        return
    features = report.prior.selection.describe() if report.prior.selection else "none"
    stdout.print(f"device        {report.device} (predicted, not measured)")
    stdout.print(f"learned from  {', '.join(report.prior.sources)} (device features: {features})")
    stdout.print(f"best          {report.params}")
    stdout.print(f"performance   {report.performance:.2f} of the best (predicted)")
    if report.header is not None:
        stdout.print(f"header        {report.header}")


def _print_size(report: SizePrediction, json: bool) -> None:
    if json:
        print_json(report.to_json())
        return
    name = report.name
    learned = ", ".join(f"{name}={s}" for s in report.tuned_sizes)
    stdout.print(f"device        {report.device}", markup=False, highlight=False)
    stdout.print(
        f"size          {name} = {report.size} (predicted, not measured)",
        markup=False,
        highlight=False,
    )
    stdout.print(f"learned from  {learned}", markup=False, highlight=False)
    stdout.print(f"best          {report.params}", markup=False, highlight=False)
    stdout.print(
        f"performance   {report.performance:.2f} of the best (predicted)",
        markup=False,
        highlight=False,
    )
    if report.header is not None:
        stdout.print(f"header        {report.header}", markup=False, highlight=False)
