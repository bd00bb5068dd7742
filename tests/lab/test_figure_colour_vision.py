"""Every library figure stays readable with colour-vision deficiency and in greyscale.

Lines are simulated as seen with deuteranopia and protanopia (Machado et al. 2009) and in
greyscale; two labelled lines of one axes that share dash pattern, marker and width must
stay apart in colour for all three. The check is first seen to fire on a figure made wrong
on purpose (red against green, both solid).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from prenorm_lib.lab import plotting
from prenorm_lib.lab.figures import registry
from prenorm_lib.lab.reproducible import seed_everything


@pytest.fixture(autouse=True)
def _house_style():
    with plt.rc_context(plotting.HOUSE_STYLE):
        yield


def test_the_simulation_matches_published_values():
    # Pure red and green as a deuteranope sees them (Machado 2009, severity 1): both a dull
    # olive of almost the same lightness; white stays white.
    red, green = plotting.seen_as("#FF0000", "deuteranopia"), plotting.seen_as("#00FF00", "deuteranopia")
    assert np.linalg.norm(plotting.seen_as("#FFFFFF", "deuteranopia") - [100, 0, 0]) < 1.0
    assert abs(red[0] - green[0]) < 30 and red[2] > 0 and green[2] > 0  # yellowish, not red vs green
    assert np.linalg.norm(plotting.seen_as("#FF0000", "normal") - plotting.seen_as("#00FF00", "normal")) > 100
    assert plotting.seen_as("#777777", "greyscale")[1:] == pytest.approx([0, 0], abs=0.01)
    with pytest.raises(ValueError, match="vision must be"):
        plotting.seen_as("#000000", "tritanope")


def test_the_check_fires_on_a_figure_made_wrong_on_purpose():
    fig, ax = plt.subplots()
    x = np.arange(5)
    ax.plot(x, x, color="#D62728", linestyle="-", label="red")
    ax.plot(x, x + 1, color="#2CA02C", linestyle="-", label="green")
    problems = plotting.indistinguishable_lines(fig)
    assert problems and "'red' and 'green'" in problems[0] and "deuteranopia" in problems[0], problems
    ax.lines[1].set_linestyle("--")  # a second cue fixes it
    assert plotting.indistinguishable_lines(fig) == []
    plt.close(fig)


def test_the_house_cycle_gives_every_line_a_second_cue():
    fig, ax = plt.subplots()
    for k in range(len(plotting.DASHES)):
        ax.plot([0, 1], [k, k], color="#444444", label=f"line {k}")  # same colour on purpose
    assert plotting.indistinguishable_lines(fig) == []
    plt.close(fig)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(registry()))
def test_every_library_figure_reads_with_colour_vision_deficiency(name):
    seed_everything()
    fig = registry()[name]()
    try:
        assert plotting.indistinguishable_lines(fig) == []
    finally:
        plt.close(fig)
