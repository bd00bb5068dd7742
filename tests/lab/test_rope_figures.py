"""Notebook 03's figure module: its figure labels."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from prenorm_lib.lab.figures import rope
from prenorm_lib.lab.sliders import LiveFigure


def _visible_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        texts += [t.get_text() for t in legend.get_texts()] if legend else []
    return [t for t in texts if t]


def _outside_math(text: str) -> str:
    return re.sub(r"\$[^$]*\$", "", text)


@pytest.mark.parametrize("name", sorted(rope.EXAMPLES))
def test_figure_labels_use_mathtext_not_raw_subscripts(name):
    drawn = rope.EXAMPLES[name]()
    fig = drawn.fig if isinstance(drawn, LiveFigure) else drawn
    try:
        fig.canvas.draw()
        raw = [t for t in _visible_texts(fig) if "_" in _outside_math(t) or "·" in _outside_math(t)]
        assert not raw, f"{name}: labels with a raw subscript or a middle dot outside $…$: {raw}"
    finally:
        plt.close(fig)


def test_the_label_check_fires_on_a_raw_subscript():
    fig, ax = plt.subplots()
    ax.set_xlabel("m·θ_k")
    fig.canvas.draw()
    assert [t for t in _visible_texts(fig) if "_" in _outside_math(t)] == ["m·θ_k"]
    plt.close(fig)
