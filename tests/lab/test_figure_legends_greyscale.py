"""Every legend of every library figure tells its entries apart without colour.

Each pair of entries differs in dash pattern, marker or hatch, for the static figures
(``registry()``), every slider figure (``slider_registry()``) and every public figure
function that draws without arguments. The check is first seen to fire on lines that
differ only by colour, and on the two figures the issue found merged in greyscale as they
were drawn (01's ×1.3 and ×0.7 weight lines, 05's pre- and post-norm stream lines).
"""

from __future__ import annotations

import importlib
import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from prenorm_lib.lab import plotting
from prenorm_lib.lab.figures import TOPICS, placement, registry, rmsnorm, slider_registry
from prenorm_lib.lab.reproducible import seed_everything


def no_argument_figures() -> dict:
    """Public figure functions of the topic modules that draw without arguments, beyond the registries."""
    known = set(registry().values()) | set(slider_registry().values())
    found = {}
    for topic in TOPICS:
        module = importlib.import_module(f"prenorm_lib.lab.figures.{topic}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            parameters = inspect.signature(function).parameters.values()
            if (function.__module__ == module.__name__ and name.startswith("draw_") and function not in known
                    and all(p.default is not p.empty for p in parameters)):
                found[f"{topic}.{name}"] = function
    return found


def figure_of(made) -> Figure:
    return made if isinstance(made, Figure) else made.fig


ALL = {**{f"figure:{n}": f for n, f in registry().items()}, **{f"slider:{n}": f for n, f in slider_registry().items()},
       **no_argument_figures()}


@pytest.fixture(autouse=True)
def _house_style():
    with plt.rc_context(plotting.HOUSE_STYLE):
        yield


def test_the_check_fires_on_lines_that_differ_only_by_colour():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], "-", color="black", label="dark")
    ax.plot([0, 1], [1, 0], "-", color="#DDDDDD", label="light")  # far apart in lightness: still one cue
    ax.bar([0], [1], color="C0", label="bar a")
    ax.bar([1], [1], color="C1", label="bar b")
    ax.legend()
    problems = plotting.legend_entries_alike(fig)
    assert len(problems) == 2 and "'dark' and 'light'" in problems[0] and "'bar a' and 'bar b'" in problems[1]
    ax.lines[1].set_linestyle("--")
    ax.patches[1].set_hatch("//")
    ax.legend()
    assert plotting.legend_entries_alike(fig) == []
    plt.close(fig)


def test_the_check_fires_on_the_lines_the_issue_found(monkeypatch):
    setups = {label: (*setup[:4], "-") for label, setup in rmsnorm.DEPTH_SETUPS.items()}  # as drawn before
    monkeypatch.setattr(rmsnorm, "DEPTH_SETUPS", setups)
    fig = rmsnorm.draw_rms_by_depth(depth=4)
    assert any("×1.3" in p and "×0.7" in p for p in plotting.legend_entries_alike(fig))
    plt.close(fig)
    styles = {**placement.VARIANT_STYLES, "post": (placement.VARIANT_STYLES["post"][0], "-")}  # as drawn before
    monkeypatch.setattr(placement, "VARIANT_STYLES", styles)
    live = placement.SLIDERS["placement_depth"]()
    assert any("'pre-norm' and 'post-norm'" in p for p in plotting.legend_entries_alike(live.fig))
    plt.close(live.fig)


def test_every_figure_function_without_arguments_is_checked():
    assert {"rmsnorm.draw_rms_by_depth", "ffn.draw_gate_surface", "attention.draw_mask"} <= set(ALL)


@pytest.mark.parametrize("name", list(ALL))
def test_every_legend_entry_has_a_cue_besides_colour(name):
    seed_everything()
    fig = figure_of(ALL[name]())
    try:
        assert plotting.legend_entries_alike(fig) == []
    finally:
        plt.close(fig)
