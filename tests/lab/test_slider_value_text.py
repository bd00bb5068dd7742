"""A slider says what it is set to in words: its name and the value its readout shows."""

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from prenorm_lib.lab.sliders import LiveFigure, value_text


def test_selection_and_log_sliders_announce_the_value_not_an_index_or_exponent():
    theta = widgets.SelectionSlider(options=[("10 000", 10_000.0), ("500 000", 500_000.0)], value=10_000.0,
                                    description="Θ")
    assert theta.index == 0 and value_text("theta", theta) == "Θ = 10 000"
    depth = widgets.SelectionSlider(options=[2, 4, 6], value=6, description="depth L")
    assert depth.index == 2 and value_text("depth", depth) == "depth L = 6"
    beta = widgets.FloatLogSlider(value=10.0, base=10, min=-1, max=1, description="β")
    assert value_text("beta", beta) == "β = 10"
    assert value_text("shift", widgets.FloatSlider(value=1.5)) == "shift = 1.5"  # no description: its name


def test_a_live_figure_keeps_each_control_s_text_current():
    fig, ax = plt.subplots()
    (line,) = ax.plot([0, 1], [0, 0])
    depth = widgets.SelectionSlider(options=[2, 4, 6], value=4, description="depth L")
    live = LiveFigure(fig, lambda depth: line.set_ydata([0, depth]), {"depth": depth}, "a line (slider: depth)")
    assert depth.tooltip == "depth L = 4"
    live.set(depth=6)
    assert depth.tooltip == "depth L = 6"
