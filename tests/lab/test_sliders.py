"""LiveFigure: built once, redrawn in place, displayed with a stable line and a PNG fallback."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from prenorm_lib.lab.sliders import LiveFigure, render_png

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def sine_figure():
    fig, ax = plt.subplots()
    x = np.linspace(0, 6, 100)
    (line,) = ax.plot(x, np.sin(x))
    ax.set_ylim(-1.1, 1.1)
    calls = []

    def update(k):
        calls.append(k)
        line.set_ydata(np.sin(k * x))

    slider = widgets.FloatSlider(value=1.0, min=0.5, max=3.0, description="k")
    return fig, update, slider, line, calls


def test_first_frame_is_drawn_with_the_initial_values():
    fig, update, slider, _line, calls = sine_figure()
    live = LiveFigure(fig, update, {"k": slider}, "sin(kx) (slider: k)")
    # the first frame, then a rehearsal of both ends (not drawn) and back to the first value
    assert calls == [1.0, 0.5, 3.0, 1.0]
    assert live.frame().startswith(PNG_SIGNATURE)
    assert live.values == {"k": 1.0}


def test_moving_the_slider_updates_the_artists_and_the_picture():
    fig, update, slider, line, calls = sine_figure()
    live = LiveFigure(fig, update, {"k": slider}, "sin(kx)")
    before = live.frame()
    slider.value = 2.0  # as the browser does
    assert calls[-2:] == [1.0, 2.0]
    assert np.allclose(line.get_ydata(), np.sin(2.0 * line.get_xdata()))
    assert live.frame() != before
    live.set(k=1.0)
    assert np.array_equal(pixels(live.frame()), pixels(before))  # same values, same picture: the layout is frozen
    assert len(live.render_ms) == 3


def test_the_figure_is_not_shown_a_second_time_by_pyplot():
    fig, update, slider, *_ = sine_figure()
    LiveFigure(fig, update, {"k": slider}, "sin(kx)")
    assert fig.number not in plt.get_fignums()


def test_display_bundle_has_a_stable_line_a_png_and_the_widget():
    fig, update, slider, *_ = sine_figure()
    live = LiveFigure(fig, update, {"k": slider}, "sin(kx) (slider: k)")
    bundle, metadata = live._repr_mimebundle_()
    assert bundle["text/plain"] == "sin(kx) (slider: k)"
    assert metadata["image/png"]["alt"].startswith("sin(kx) (slider: k). Figure")
    assert base64.b64decode(bundle["image/png"]) == live.frame()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == live.widget.model_id


def test_render_png_does_not_crop_or_relayout():
    fig, _ax = plt.subplots(figsize=(4, 3), dpi=50)
    png = render_png(fig)
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (200, 150)


def test_a_raising_update_is_not_swallowed_outside_a_kernel():
    fig, _ax = plt.subplots()
    slider = widgets.IntSlider(value=0, min=0, max=3)

    def update(n):
        if n == 2:
            raise ValueError("n must not be 2")

    live = LiveFigure(fig, update, {"n": slider}, "raises at 2")
    with pytest.raises(ValueError, match="n must not be 2"):
        live.set(n=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fig": "not a figure"}, TypeError, "fig must be a matplotlib Figure"),
        ({"update": 3}, TypeError, "update must be a function"),
        ({"controls": {}}, ValueError, "controls must name at least one widget"),
        ({"controls": {"k": 1.0}}, TypeError, r"controls\['k'\] must be an ipywidgets value widget"),
        ({"description": "  "}, ValueError, "description must be a non-empty line"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    fig, update, slider, *_ = sine_figure()
    arguments = {"fig": fig, "update": update, "controls": {"k": slider}, "description": "sin"} | kwargs
    with pytest.raises(error, match=match):
        LiveFigure(**arguments)


def test_set_refuses_an_unknown_control():
    fig, update, slider, *_ = sine_figure()
    live = LiveFigure(fig, update, {"k": slider}, "sin")
    with pytest.raises(ValueError, match=r"no control named \['q'\]; this figure has \['k'\]"):
        live.set(q=1)
