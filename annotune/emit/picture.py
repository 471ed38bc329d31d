"""A picture of one tune: what a user looks at instead of reading the report's numbers.

Four panels, drawn with matplotlib (the `plot` extra) into one PNG, or into one self-contained
HTML page (the PNG inlined as base64, with the same figures as tables, so the page works from
a CI artifact without a server or a second file):

- **progress**: the best time so far against the measurements made, the default's time as a
  line, and the final check's interval for the winner as a band (time = default / speedup);
- **configurations by time**: every valid measurement, fastest first, the default and the
  winner marked; invalid ones counted in the title;
- **which knobs mattered**: each knob's share of the error removed by the partition tree's
  splits (Starchart's tree over the measured configurations, as `annotune explain` draws);
- **per problem size** (a header of several sizes): the default's and the best time of each.

The record drawn (`TunePicture`) is plain data: the session gathers it from the results
database, this module only draws it.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotune.core.files import write_file
from annotune.core.records import Number

PANELS = ("progress", "configurations by time", "which knobs mattered", "per problem size")
"""The panels' titles, in drawing order; the last only when there are sizes."""


@dataclass(frozen=True)
class FinalCheck:
    """The final check's claim: the winner's speedup over the default and its interval (None
    when no contender was significantly faster: the default is kept)."""

    speedup: float | None
    interval: tuple[float, float] | None
    rounds: int | None  # None: not known (the claim was read from the tuned header)
    kept_default: bool


@dataclass(frozen=True)
class SizePoint:
    """One problem size of a size-aware header: the default's and the best time (ms)."""

    size: int
    default_time: float | None
    best_time: float | None
    predicted: bool = False


@dataclass(frozen=True)
class TunePicture:
    """What a picture of a tune shows: `times` in the order measured (ms; None: invalid),
    the default's and the winner's configurations, and what the final check found."""

    title: str
    device: str
    names: tuple[str, ...]
    params: tuple[Mapping[str, Number], ...]
    times: tuple[float | None, ...]
    default: Mapping[str, Number] | None
    winner: Mapping[str, Number] | None
    check: FinalCheck | None = None
    importance: tuple[tuple[str, float], ...] = ()
    sizes: tuple[SizePoint, ...] = ()
    size_name: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if len(self.params) != len(self.times):
            raise ValueError("one time per measured configuration")

    @property
    def valid(self) -> int:
        return sum(t is not None for t in self.times)

    def time_of(self, config: Mapping[str, Number] | None) -> float | None:
        """The measured time of `config` (its first measurement), None when not measured."""
        if config is None:
            return None
        wanted = {k: float(v) for k, v in config.items()}
        for params, time in zip(self.params, self.times, strict=True):
            if all(k in params and float(params[k]) == v for k, v in wanted.items()):
                return time
        return None

    def best_so_far(self) -> list[float | None]:
        """After each measurement, the fastest valid time yet (None before the first)."""
        best: float | None = None
        out: list[float | None] = []
        for time in self.times:
            if time is not None and (best is None or time < best):
                best = time
            out.append(best)
        return out

    def to_json(self) -> dict[str, Any]:
        check = self.check
        return {
            "title": self.title,
            "device": self.device,
            "measurements": len(self.times),
            "valid": self.valid,
            "default": dict(self.default) if self.default is not None else None,
            "default_time": self.time_of(self.default),
            "winner": dict(self.winner) if self.winner is not None else None,
            "winner_time": self.time_of(self.winner),
            "final_check": None
            if check is None
            else {
                "speedup": check.speedup,
                "interval": list(check.interval) if check.interval else None,
                "rounds": check.rounds,
                "kept_default": check.kept_default,
            },
            "importance": [{"parameter": n, "importance": s} for n, s in self.importance],
            "sizes": [
                {
                    "size": p.size,
                    "default_time": p.default_time,
                    "best_time": p.best_time,
                    "predicted": p.predicted,
                }
                for p in self.sizes
            ],
            "notes": list(self.notes),
        }


def picture_path(header: Path, *, html: bool = False) -> Path:
    """Where the picture of the tune behind `header` goes by default: beside it,
    `<stem>.tune.png` (or `.tune.html`), so it is committed, or not, with the header."""
    return header.with_name(f"{header.stem}.tune.{'html' if html else 'png'}")


def write_picture(picture: TunePicture, path: Path, *, html: bool = False) -> None:
    """Write `picture` to `path`: one HTML page when `html`, else a PNG."""
    if html:
        write_html(picture, path)
    else:
        write_png(picture, path)


def panels_of(picture: TunePicture) -> tuple[str, ...]:
    """The panels `picture` is drawn with: the size panel only when it has sizes."""
    return PANELS if picture.sizes else PANELS[:3]


def figure(picture: TunePicture) -> Any:
    """The matplotlib figure of `picture` (the Agg backend: no display is needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = panels_of(picture)
    fig, axes = plt.subplots(1, len(titles), figsize=(5.2 * len(titles), 4.4), squeeze=False)
    drawers = (_progress, _by_time, _importance, _sizes)
    for ax, title, draw in zip(axes[0], titles, drawers, strict=False):
        draw(ax, picture)
        if not ax.get_title():
            ax.set_title(title)
    fig.suptitle(picture.title, fontsize=11)
    fig.tight_layout()
    return fig


def png_bytes(picture: TunePicture, *, dpi: int = 100) -> bytes:
    """`picture` drawn as PNG."""
    import matplotlib.pyplot as plt

    fig = figure(picture)
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()
    finally:
        plt.close(fig)


def write_png(picture: TunePicture, path: Path) -> None:
    """Write `picture` to `path` as PNG (atomically: `write_file`)."""
    write_file(path, png_bytes(picture))


def write_html(picture: TunePicture, path: Path) -> None:
    """Write `picture` to `path` as one self-contained HTML page: the figure inlined, and
    its numbers as tables (readable where the image is not)."""
    write_file(path, html_page(picture).encode("utf-8"))


def html_page(picture: TunePicture) -> str:
    image = base64.b64encode(png_bytes(picture)).decode("ascii")
    esc = html.escape
    rows = _summary_rows(picture)
    summary = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    importance = "".join(
        f"<tr><td>{esc(name)}</td><td>{100 * share:.1f}%</td></tr>"
        for name, share in picture.importance
    )
    ranked = sorted(
        ((t, p) for p, t in zip(picture.params, picture.times, strict=True) if t is not None),
        key=lambda item: item[0],
    )
    head = "".join(f"<th>{esc(n)}</th>" for n in picture.names)
    measured = "".join(
        "<tr>"
        + "".join(f"<td>{esc(_number(p.get(n)))}</td>" for n in picture.names)
        + f"<td>{t:.4g}</td></tr>"
        for t, p in ranked
    )
    sizes = "".join(
        f"<tr><td>{p.size}</td><td>{_ms(p.default_time)}</td><td>{_ms(p.best_time)}</td>"
        f"<td>{'predicted' if p.predicted else 'measured'}</td></tr>"
        for p in picture.sizes
    )
    size_table = (
        f"<h2>Per {esc(picture.size_name or 'size')}</h2><table><tr><th>size</th>"
        f"<th>default</th><th>best</th><th></th></tr>{sizes}</table>"
        if sizes
        else ""
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in picture.notes)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{esc(picture.title)}</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>{esc(picture.title)}</h1>"
        f"<img alt='{esc(', '.join(panels_of(picture)))}' src='data:image/png;base64,{image}'>"
        f"<table>{summary}</table>"
        + (f"<ul>{notes}</ul>" if notes else "")
        + "<h2>Which knobs mattered</h2><table><tr><th>knob</th><th>share of the error "
        f"removed</th></tr>{importance}</table>"
        + size_table
        + f"<h2>Configurations by time (ms)</h2><table><tr>{head}<th>time</th></tr>"
        f"{measured}</table></body></html>\n"
    )


def _summary_rows(picture: TunePicture) -> list[tuple[str, str]]:
    rows = [
        ("measurements", f"{len(picture.times)} ({picture.valid} valid)"),
        ("default", f"{_config(picture.default)}: {_ms(picture.time_of(picture.default))}"),
        ("winner", f"{_config(picture.winner)}: {_ms(picture.time_of(picture.winner))}"),
    ]
    check = picture.check
    if check is None:
        rows.append(("final check", "none stored"))
    elif check.kept_default or check.speedup is None or check.interval is None:
        rows.append(("final check", f"no contender significantly faster{_rounds(check)}"))
    else:
        low, high = check.interval
        rows.append(
            (
                "final check",
                f"{check.speedup:.2f}x the default (95% interval {low:.2f}-{high:.2f})"
                f"{_rounds(check)}",
            )
        )
    return rows


def _progress(ax: Any, picture: TunePicture) -> None:
    steps = range(1, len(picture.times) + 1)
    best = picture.best_so_far()
    ax.step(
        list(steps), [math.nan if b is None else b for b in best], where="post", label="best so far"
    )
    valid = [(i, t) for i, t in zip(steps, picture.times, strict=True) if t is not None]
    if valid:
        ax.scatter(*zip(*valid, strict=True), s=10, color="grey", alpha=0.6, label="measured")
    default = picture.time_of(picture.default)
    if default is not None:
        ax.axhline(default, color="tab:red", ls="--", lw=1, label=f"default {default:.3g} ms")
        check = picture.check
        if check is not None and check.interval is not None and not check.kept_default:
            low, high = check.interval
            ax.axhspan(
                default / high,
                default / low,
                color="tab:green",
                alpha=0.2,
                label=f"final check {low:.2f}-{high:.2f}x",
            )
    invalid = len(picture.times) - picture.valid
    ax.set_title(f"progress ({invalid} invalid)" if invalid else "progress")
    ax.set_xlabel("measurements")
    ax.set_ylabel("time (ms)")
    if valid:
        ax.legend(fontsize=8)


def _by_time(ax: Any, picture: TunePicture) -> None:
    ranked = sorted(t for t in picture.times if t is not None)
    ax.plot(range(1, len(ranked) + 1), ranked, marker=".", lw=0.8)
    for config, label, color in (
        (picture.default, "default", "tab:red"),
        (picture.winner, "winner", "tab:green"),
    ):
        time = picture.time_of(config)
        if time is not None:
            rank = 1 + sum(t < time for t in ranked)
            ax.scatter([rank], [time], s=60, color=color, zorder=3, label=label)
    ax.set_title(f"configurations by time ({len(ranked)} valid)")
    ax.set_xlabel("rank (fastest first)")
    ax.set_ylabel("time (ms)")
    if ranked:
        ax.legend(fontsize=8)


def _importance(ax: Any, picture: TunePicture) -> None:
    ranked = list(picture.importance)[::-1]
    ax.barh([n for n, _ in ranked], [100 * s for _, s in ranked], color="tab:blue")
    ax.set_title("which knobs mattered")
    ax.set_xlabel("share of the error removed (%)")
    if not ranked:
        ax.text(0.5, 0.5, "too few measurements", ha="center", transform=ax.transAxes)


def _sizes(ax: Any, picture: TunePicture) -> None:
    points = picture.sizes
    x = list(range(len(points)))
    width = 0.4
    ax.bar(
        [i - width / 2 for i in x],
        [p.default_time or 0 for p in points],
        width,
        label="default",
        color="tab:red",
    )
    ax.bar(
        [i + width / 2 for i in x],
        [p.best_time or 0 for p in points],
        width,
        label="best",
        color="tab:green",
    )
    ax.set_xticks(x, [f"{p.size}{'*' if p.predicted else ''}" for p in points])
    ax.set_title(f"per problem size ({picture.size_name})" if picture.size_name else "")
    ax.set_xlabel(f"{picture.size_name} (* predicted)")
    ax.set_ylabel("time (ms)")
    ax.legend(fontsize=8)


def _rounds(check: FinalCheck) -> str:
    return "" if check.rounds is None else f" ({check.rounds} rounds)"


def _config(config: Mapping[str, Number] | None) -> str:
    if config is None:
        return "-"
    return ", ".join(f"{k}={_number(v)}" for k, v in config.items())


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _ms(time: float | None) -> str:
    return "-" if time is None else f"{time:.4g} ms"


__all__: Sequence[str] = (
    "PANELS",
    "FinalCheck",
    "SizePoint",
    "TunePicture",
    "figure",
    "html_page",
    "panels_of",
    "picture_path",
    "write_picture",
    "png_bytes",
    "write_html",
    "write_png",
)
