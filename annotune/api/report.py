"""`annotune.report`: a picture of a source's tune from the results database (`annotune
report`): an image, or one self-contained HTML page, beside the tuned header by default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from annotune.api.paths import optional_path
from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import refuse_overwrite
from annotune.emit import tuned_header_path
from annotune.emit.picture import TunePicture, picture_path, write_picture
from annotune.results.workspace import default_db_path
from annotune.session.picture import tune_picture
from annotune.session.recheck import Verdict


@dataclass(frozen=True)
class Report:
    """Where the picture was written, and what it shows (`picture.to_json()`)."""

    path: Path
    picture: TunePicture

    def to_json(self) -> dict:
        return {"output": str(self.path), **self.picture.to_json()}


def report(
    source: str | Path,
    *,
    output: str | Path | None = None,
    html: bool = False,
    device: str | None = None,
    size: int | None = None,
    out_dir: str | Path | None = None,
    db: str | Path | None = None,
    config: str | Path | None = None,
) -> Report:
    """Draw `source`'s newest tune (on `device`; at `size` for a size-aware header) into
    `output` (default: `tuned/<device>/<stem>.tune.png`, `.html` with `html`). Nothing is
    measured. Raises AnnotuneError when nothing of this version of the source was measured,
    when `output` is an input, or when matplotlib (the `plot` extra) is missing."""
    return draw(
        Path(source),
        output=optional_path(output),
        html=html,
        device=device,
        size=size,
        out_dir=optional_path(out_dir),
        db=optional_path(db),
        config=optional_path(config),
    )


def draw(
    source: Path,
    *,
    output: Path | None,
    html: bool,
    device: str | None,
    size: int | None,
    out_dir: Path | None,
    db: Path | None,
    config: Path | None,
    verdict: Verdict | None = None,
) -> Report:
    """`report`, with the final check a tune just ran (`verdict`: `tune --plot`)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise AnnotuneError(
            "a picture needs matplotlib", hint="pip install 'annotune[plot]'"
        ) from None
    picture = tune_picture(
        source,
        db_path=db,
        device=device,
        config_path=config,
        out_dir=out_dir,
        verdict=verdict,
        size=size,
    )
    header = tuned_header_path(source, picture.device, out_dir)
    path = output if output is not None else picture_path(header, html=html)
    refuse_overwrite(
        path,
        "-o" if output is not None else "the picture",
        {
            "the source": source,
            "the results database": db or default_db_path(source),
            "the header": header,
        },
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_picture(picture, path, html=html or path.suffix.lower() in (".html", ".htm"))
    except OSError as error:
        raise AnnotuneError(f"cannot write {path}: {error.strerror or error}") from None
    return Report(path, picture)
