"""Notebook 03's figure module: its figure labels."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

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


def test_partial_rope_in_the_decay_bound_is_the_sum_with_still_pairs():
    # θ_i = 0 for the pairs partial RoPE leaves unrotated: their terms are 1 at every distance.
    import cmath

    d, kept, distances = 8, 2, (0, 3, 40)
    theta = [10000.0 ** (-2 * i / d) if i < kept else 0.0 for i in range(d // 2)]
    by_hand = [sum(abs(sum(cmath.exp(1j * r * theta[i]) for i in range(j))) for j in range(1, d // 2 + 1)) / (d // 2)
               for r in distances]
    computed = rope.long_term_decay(d, max(distances), rotated_fraction=0.5)
    assert [round(computed[r].item(), 12) for r in distances] == [round(v, 12) for v in by_hand]
    assert torch.allclose(rope.long_term_decay(128, 300, rotated_fraction=0.0), torch.tensor(32.5, dtype=torch.float64))
    assert torch.equal(rope.long_term_decay(16, 50, rotated_fraction=1.0), rope.long_term_decay(16, 50))


def test_the_fraction_rotated_slider_is_labelled_and_moves_the_pairs():
    live = rope.theta_slider()
    fraction = live.controls["rotated_fraction"]
    assert fraction.description == "fraction rotated" and fraction.tooltip == "fraction rotated = 1"
    wave, unrotated = (line for line in live.fig.axes[0].get_lines() if line.get_marker() in ("o", "X"))
    assert len(wave.get_xdata()) == 8 and len(unrotated.get_xdata()) == 0
    live.set(rotated_fraction=0.25)
    assert fraction.tooltip == "fraction rotated = 0.25"
    assert list(wave.get_xdata()) == [0, 1] and list(unrotated.get_xdata()) == [2, 3, 4, 5, 6, 7]
    decay = live.fig.axes[1].get_lines()[1]
    assert np.array_equal(decay.get_ydata(), rope.long_term_decay(128, 512, rotated_fraction=0.25).numpy())
    assert "2 of 8 pairs rotated" in live.fig.axes[0].get_title()
    assert "fraction rotated" in live.description
    plt.close(live.fig)
