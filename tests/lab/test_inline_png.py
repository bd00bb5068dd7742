"""Notebook figures: drawn once and cut to their tight box, as IPython's print_figure would show them."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.core.pylabtools import print_figure
from PIL import Image

from prenorm_lib.lab.plotting import png_with_description, use_house_style
from prenorm_lib.lab.png import png_bytes

TIGHT = {"bbox_inches": "tight"}  # what the inline backend asks for


def picture(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(float)


def ink(pixels: np.ndarray) -> float:
    """Share of pixels that are not the white background."""
    return float((pixels.min(axis=-1) < 250).mean())


@pytest.fixture(autouse=True)
def _style():
    use_house_style()
    yield
    plt.close("all")


def a_figure():
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 2.5))
    left.plot([0, 1, 2], [2, 0, 1], label="a line")
    left.legend()
    right.bar([0, 1], [1, 2])
    right.set_title("bars")
    fig.supxlabel("x")
    return fig


def test_the_picture_is_print_figures_size_and_content():
    fig = a_figure()
    theirs = picture(print_figure(fig, "png", **TIGHT))
    ours_png, metadata = png_with_description(fig, **TIGHT)
    ours = picture(ours_png)
    assert metadata["alt"].startswith("Figure with 2 panels")
    assert abs(ours.shape[0] - theirs.shape[0]) <= 2 and abs(ours.shape[1] - theirs.shape[1]) <= 2
    assert ink(ours) == pytest.approx(ink(theirs), abs=0.005)  # the same drawing, give or take a pixel's shift


def test_it_is_drawn_once(monkeypatch):
    fig = a_figure()
    draws = []
    original = fig.draw
    monkeypatch.setattr(fig, "draw", lambda renderer: draws.append(1) or original(renderer))
    png_with_description(fig, **TIGHT)
    assert len(draws) == 1


def test_base64_for_the_notebook():
    data, _ = png_with_description(a_figure(), base64=True, **TIGHT)
    assert base64.b64decode(data).startswith(b"\x89PNG")


def test_content_past_the_edges_goes_through_print_figure(monkeypatch):
    """print_figure grows the canvas to show it; cutting our one drawing could not."""
    fig = a_figure()
    fig.text(1.15, 0.5, "outside the figure")
    calls = []
    monkeypatch.setattr("IPython.core.pylabtools.print_figure", lambda *a, **k: calls.append(k) or b"png")
    assert png_with_description(fig, **TIGHT)[0] == b"png" and calls


def test_other_options_go_through_print_figure(monkeypatch):
    calls = []
    monkeypatch.setattr("IPython.core.pylabtools.print_figure", lambda *a, **k: calls.append(k) or b"png")
    png_with_description(a_figure(), bbox_inches=None)
    assert calls == [{"base64": False, "bbox_inches": None}]


@pytest.mark.parametrize("shape", [(3, 5, 4), (1, 1, 4), (40, 7, 4)])
def test_png_bytes_round_trip(shape):
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=shape, dtype=np.uint8)
    for opaque in (False, True):
        if opaque:
            rgba[..., 3] = 255
        decoded = np.asarray(Image.open(io.BytesIO(png_bytes(rgba))).convert("RGBA"))
        assert np.array_equal(decoded, rgba)


def test_png_bytes_names_a_wrong_array():
    with pytest.raises(ValueError, match=r"rgba must be a \(height, width, 4\) uint8 array, got float64 \(2, 2, 3\)"):
        png_bytes(np.zeros((2, 2, 3)))
