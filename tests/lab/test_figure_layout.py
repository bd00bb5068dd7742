"""Every figure the library draws can be read on a projector (plotting.layout_problems).

Each topic module of ``prenorm_lib.lab.figures`` lists its key figures in ``FIGURES`` and may
list more drawings in ``EXAMPLES`` (name → a function of no argument that returns a Figure
or a LiveFigure). A LiveFigure is checked at the first frame and with every slider at its
ends, where labels move furthest. The checks themselves are proved to fire on figures
made wrong on purpose.
"""

from __future__ import annotations

import importlib

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from prenorm_lib.lab.figures import TOPICS
from prenorm_lib.lab.plotting import describe_figure, layout_problems, use_house_style
from prenorm_lib.lab.reproducible import seed_everything
from prenorm_lib.lab.sliders import LiveFigure


def _drawings() -> list[tuple[str, object]]:
    found = []
    for topic in TOPICS:
        module = importlib.import_module(f"prenorm_lib.lab.figures.{topic}")
        for registry_name in ("FIGURES", "EXAMPLES"):
            for name, draw in getattr(module, registry_name, {}).items():
                found.append((f"{topic}.{name}", draw))
    return found


def _slider_ends(live: LiveFigure):
    for name, control in live.controls.items():
        low, high = getattr(control, "min", None), getattr(control, "max", None)
        if hasattr(control, "options") and control.options:
            options = list(control.options)
            low, high = options[0], options[-1]
            low, high = (low[1], high[1]) if isinstance(low, tuple) else (low, high)
        for value in (low, high):
            if value is not None:
                yield name, value


@pytest.mark.slow
@pytest.mark.parametrize(("name", "draw"), _drawings(), ids=[name for name, _ in _drawings()])
def test_figure_is_legible(name, draw):
    use_house_style()
    seed_everything()
    drawn = draw()
    if isinstance(drawn, LiveFigure):
        problems = [f"first frame: {p}" for p in layout_problems(drawn.fig)]
        start = drawn.values
        for control, value in _slider_ends(drawn):
            drawn.set(**{control: value})
            problems += [f"{control}={value}: {p}" for p in layout_problems(drawn.fig)]
            drawn.set(**start)
        fig = drawn.fig
    else:
        fig = drawn
        problems = layout_problems(fig)
    if describe_figure(fig) == "Figure.":
        problems.append("no title, axis label or legend to describe it with (its alt text would be empty)")
    plt.close(fig)
    assert not problems, "\n".join(problems)


# ---- the checks fire -------------------------------------------------------------------


@pytest.fixture
def styled():
    use_house_style()
    yield
    plt.close("all")


def test_small_text_is_reported(styled):
    fig, ax = plt.subplots()
    ax.set_title("tiny title", fontsize=6)
    assert any("'tiny title' is" in p and "pt on screen" in p for p in layout_problems(fig))


def test_overlapping_texts_are_reported(styled):
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "first label")
    ax.text(0.5, 0.5, "second label")
    assert "texts 'first label' and 'second label' overlap" in layout_problems(fig)


def test_text_outside_the_figure_is_reported(styled):
    fig, ax = plt.subplots()
    ax.text(1.4, 0.5, "far right", transform=ax.transAxes)
    assert "text 'far right' reaches outside the figure" in layout_problems(fig)


def test_marker_outside_the_axes_is_reported(styled):
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 2.15], "o", label="points", clip_on=False)
    ax.set_ylim(0, 2)
    assert any("marker(s) of 'points' lie outside the axes" in p for p in layout_problems(fig))


def test_legend_on_a_tick_label_is_reported(styled):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a long legend entry")
    ax.legend(loc="lower left", bbox_to_anchor=(-0.2, 0.0))
    assert any("a long legend entry" in p and "overlap" in p for p in layout_problems(fig))


def test_a_clean_figure_has_no_problems(styled):
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4], "o-", label="y = x²")
    ax.set(title="A clean figure", xlabel="x", ylabel="y")
    ax.legend()
    assert layout_problems(fig) == []
