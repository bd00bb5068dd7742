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


def test_long_term_decay_is_roformers_sum_written_out():
    # RoFormer §3.4.3: S_j = Σ_{i=0}^{j−1} e^{i(m−n)θ_i}, θ_i = 10000^{−2i/d};
    # the bound is (1/(d/2))·Σ_{j=1}^{d/2} |S_j|.
    import cmath

    d, distances = 8, (0, 1, 5, 30)
    theta = [10000.0 ** (-2 * i / d) for i in range(d // 2)]
    by_hand = [sum(abs(sum(cmath.exp(1j * r * theta[i]) for i in range(j))) for j in range(1, d // 2 + 1)) / (d // 2)
               for r in distances]
    computed = rope.long_term_decay(d, max(distances))
    assert [round(computed[r].item(), 12) for r in distances] == [round(v, 12) for v in by_hand]
    assert rope.long_term_decay(128, 0)[0].item() == pytest.approx(32.5)  # every |S_j| = j at distance 0
