"""A slider move redraws only what changed, and the picture is the full draw's, pixel for pixel."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from prenorm_lib.lab import blitting
from prenorm_lib.lab.blitting import encode_png
from prenorm_lib.lab.figures import slider_registry
from prenorm_lib.lab.plotting import use_house_style
from prenorm_lib.lab.sliders import LiveFigure, render_png

MOVES = 5  # per control: enough to leave the first value and come back past it


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def differing_pixels(live: LiveFigure) -> int:
    """Pixels where the frame shown differs from a full draw of the figure as it stands."""
    shown, full = pixels(live.frame()), pixels(render_png(live.fig))
    live.blitter.settle()  # the full draw above is the test's, not a move's
    assert shown.shape == full.shape
    return int((shown != full).any(axis=-1).sum())


def step(control: widgets.ValueWidget, i: int) -> None:
    """Move a control as a hand would, somewhere new each time."""
    options = getattr(control, "options", None)
    if options:
        control.index = (control.index + 3) % len(options)
    elif isinstance(control.value, int):
        control.value = control.min + (control.value - control.min + 3) % (control.max - control.min + 1)
    else:  # float or log slider: the value itself
        span = control.max - control.min
        control.value = control.min + span * ((3 * i + 1) % 7) / 7 if not hasattr(control, "base") else \
            control.base ** (control.min + span * ((3 * i + 1) % 7) / 7)


@pytest.fixture(autouse=True)
def _style():
    use_house_style()
    yield
    plt.close("all")


@pytest.mark.parametrize("name", list(slider_registry()))
def test_every_course_slider_frame_is_the_full_draw(name):
    live = slider_registry()[name]()
    for control in live.controls.values():
        for i in range(MOVES):
            step(control, i)
            assert differing_pixels(live) == 0, f"{name}: move {i} of {control.description!r}"
    # one background, at the first move: the rehearsal at construction found every moving artist
    # (03's clocks: a slow clock's "0.00 turns" reads the same for many moves, then changes)
    assert live.blitter.full_draws == 1, live.blitter.full_draws
    assert live.blitter.drawn, "nothing redrawn: the moves changed nothing"


def test_the_pixel_comparison_catches_a_layering_mistake(monkeypatch):
    """A static legend over a moving line must be redrawn over it; skip that and the test above fails."""
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 6, 200)
    (line,) = ax.plot(x, np.sin(x), linewidth=6)
    ax.plot(x, 0 * x, label="a static line with a legend")
    ax.legend(loc="center", framealpha=1.0)
    ax.set_ylim(-1.1, 1.1)
    live = LiveFigure(fig, lambda k: line.set_ydata(np.sin(k * x)), {"k": widgets.FloatSlider(1.0, min=0.1, max=3)},
                      "sin(kx) under a legend (slider: k)")
    live.set(k=0.2)
    assert differing_pixels(live) == 0
    promoted = blitting.Blitter._new_background

    def without_promotion(self, order):
        promoted(self, order)
        self.drawn = [unit for unit in self.drawn if unit in self.moving]  # forget what lies on top

    monkeypatch.setattr(blitting.Blitter, "_new_background", without_promotion)
    live.blitter.background = None
    live.set(k=0.3)
    live.set(k=0.4)  # a fast frame: the line is drawn over the legend
    assert differing_pixels(live) > 0


def test_a_move_that_changes_the_axis_range_or_the_artists_is_still_exact():
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 50)
    (line,) = ax.plot(x, x)
    fills = []

    def update(k: float) -> None:
        line.set_ydata(k * x)
        ax.set_ylim(0, 1.2 * k)  # new tick labels
        for fill in fills:
            fill.remove()
        fills[:] = [ax.fill_between(x, 0, k * x / 2, alpha=0.3)]  # a new artist every move

    live = LiveFigure(fig, update, {"k": widgets.FloatSlider(1.0, min=0.5, max=4.0)}, "a line (slider: k)")
    for k in (2.0, 3.0, 0.5):
        live.set(k=k)
        assert differing_pixels(live) == 0
    assert live.blitter.full_draws == 3  # each move changed the axis range: a new background each time


def test_a_move_that_changes_the_same_things_draws_no_background():
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])
    title = ax.set_title(" ")

    def update(k: float) -> None:
        line.set_ydata([0, k])
        title.set_text(f"k = {k:.1f}")

    live = LiveFigure(fig, update, {"k": widgets.FloatSlider(0.5, min=0.0, max=1.0)}, "a line (slider: k)")
    for k in (0.1, 0.2, 0.3, 0.4):
        live.set(k=k)
    assert live.blitter.full_draws == 1
    assert set(live.blitter.moving) == {line, title}


@pytest.mark.parametrize("transparent", [False, True])
def test_encode_png_keeps_every_pixel(transparent):
    fig, ax = plt.subplots(figsize=(3, 2), dpi=60)
    ax.plot([0, 1], [1, 0])
    if transparent:
        fig.patch.set_alpha(0.0)
        ax.patch.set_alpha(0.0)
    fig.canvas.draw()
    decoded = Image.open(io.BytesIO(encode_png(fig)))
    assert decoded.mode == ("RGBA" if transparent else "RGB") and decoded.size == (180, 120)
    expected = np.asarray(fig.canvas.buffer_rgba())
    assert np.array_equal(np.asarray(decoded.convert("RGBA")), expected)


def test_the_rehearsal_restores_the_first_frame_and_leaves_controls_alone():
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 1])
    text = ax.text(0.5, 0.5, "")
    seen = []

    def update(k: int) -> None:
        seen.append(k)
        line.set_ydata([0, k])
        text.set_text("big" if k > 8 else "small")  # the same text for most moves

    slider = widgets.IntSlider(3, min=0, max=10)
    live = LiveFigure(fig, update, {"k": slider}, "a line (slider: k)")
    assert seen == [3, 0, 10, 3] and slider.value == 3 and text.get_text() == "small"
    assert live.blitter.moving == {line, text}
    for k in (4, 5, 9):
        live.set(k=k)
        assert differing_pixels(live) == 0
    assert live.blitter.full_draws == 1
