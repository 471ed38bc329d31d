"""The picture of a tune: what it draws is what the record says, in an image a test can open."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from annotune.emit.picture import (
    PANELS,
    FinalCheck,
    SizePoint,
    TunePicture,
    figure,
    html_page,
    panels_of,
    picture_path,
    png_bytes,
)

plt = pytest.importorskip("matplotlib.pyplot")


def picture(**changes) -> TunePicture:
    params = tuple({"B": b, "U": u} for b in (8, 16, 32) for u in (1, 2))
    times = (4.0, 3.0, None, 2.5, 1.0, 1.5)
    fields = dict(
        title="k.c on gpu-a",
        device="gpu-a",
        names=("B", "U"),
        params=params,
        times=times,
        default={"B": 8, "U": 1},
        winner={"B": 32, "U": 1},
        check=FinalCheck(3.8, (3.2, 4.4), 12, False),
        importance=(("B", 0.9), ("U", 0.1)),
    )
    fields.update(changes)
    return TunePicture(**fields)


def test_best_so_far_and_times_of_configurations():
    shown = picture()
    assert shown.best_so_far() == [4.0, 3.0, 3.0, 2.5, 1.0, 1.0]
    assert shown.time_of({"B": 8, "U": 1}) == 4.0
    assert shown.time_of({"B": 16, "U": 1}) is None  # invalid
    assert shown.time_of({"B": 64, "U": 1}) is None  # never measured
    assert shown.valid == 5


def test_a_time_per_configuration():
    with pytest.raises(ValueError):
        picture(times=(1.0,))


def test_the_figure_has_its_panels_with_axes():
    shown = picture()
    fig = figure(shown)
    try:
        axes = fig.get_axes()
        assert len(axes) == 3 == len(panels_of(shown))
        assert axes[0].get_xlabel() == "measurements" and axes[0].get_ylabel() == "time (ms)"
        assert axes[0].get_title().startswith("progress (1 invalid)")
        assert axes[1].get_title() == "configurations by time (5 valid)"
        assert [t.get_text() for t in axes[2].get_yticklabels()] == ["U", "B"]
        labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
        assert "default 4 ms" in labels and "final check 3.20-4.40x" in labels
    finally:
        plt.close(fig)


def test_sizes_add_a_panel():
    shown = picture(sizes=(SizePoint(64, 2.0, 1.0), SizePoint(128, 8.0, 5.0, True)), size_name="N")
    fig = figure(shown)
    try:
        assert [ax.get_title() for ax in fig.get_axes()][3] == "per problem size (N)"
        assert panels_of(shown) == PANELS
    finally:
        plt.close(fig)


def test_the_png_opens_with_every_panel_drawn():
    data = png_bytes(picture())
    image = plt.imread(io.BytesIO(data))
    height, width = image.shape[:2]
    assert (height, width) == (440, 1560)  # 15.6 x 4.4 inches at 100 dpi
    for third in range(3):  # each panel holds more than a blank background
        panel = image[60:400, third * width // 3 : (third + 1) * width // 3, :3]
        assert (panel < 0.5).mean() > 0.01


def test_a_kept_default_draws_no_interval():
    shown = picture(check=FinalCheck(1.0, None, 6, True), winner={"B": 8, "U": 1})
    fig = figure(shown)
    try:
        labels = [t.get_text() for t in fig.get_axes()[0].get_legend().get_texts()]
        assert not any(label.startswith("final check") for label in labels)
    finally:
        plt.close(fig)


def test_html_is_one_self_contained_page():
    page = html_page(picture(title="k<1>.c on gpu-a"))
    assert page.startswith("<!DOCTYPE html>")
    sources = re.findall(r"src='([^']*)'", page)
    assert len(sources) == 1 and sources[0].startswith("data:image/png;base64,")
    assert "k&lt;1&gt;.c" in page and "k<1>.c" not in page  # names are escaped
    assert "3.80x the default (95% interval 3.20-4.40) (12 rounds)" in page
    # the measured configurations, fastest first
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>([\d.]+)</td></tr>", page)
    assert [float(t) for *_, t in rows] == sorted([4.0, 3.0, 2.5, 1.0, 1.5])


def test_an_empty_tune_still_draws():
    shown = picture(times=(None,) * 6, importance=(), check=None, winner=None)
    data = png_bytes(shown)
    assert plt.imread(io.BytesIO(data)).shape[0] == 440
    assert "none stored" in html_page(shown)


def test_the_picture_goes_beside_the_header(tmp_path):
    header = tmp_path / "tuned" / "gpu-a" / "k.h"
    assert picture_path(header) == header.with_name("k.tune.png")
    assert picture_path(header, html=True).name == "k.tune.html"


def test_json_names_what_was_drawn():
    data = picture().to_json()
    assert data["default_time"] == 4.0 and data["winner_time"] == 1.0
    assert data["final_check"]["interval"] == [3.2, 4.4]
    assert np.isclose(sum(row["importance"] for row in data["importance"]), 1.0)
