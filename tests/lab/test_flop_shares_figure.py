"""Notebook 06's figure of FLOP shares: its lines stay apart without colour, its text fits, it has alt text,
and the shares it draws from torch's FlopCounterMode are those of the handout's §3.6 shapes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from prenorm_lib.lab import accounting
from prenorm_lib.lab.figures.model import plot_flop_shares
from prenorm_lib.lab.plotting import describe_figure, indistinguishable_lines, layout_problems, use_house_style


def flops(d_model: int, context: int, layers: int = 12) -> dict[str, float]:  # the handout's counts, by hand
    return {"projections": layers * 8 * context * d_model**2, "attention": layers * 4 * context**2 * d_model,
            "feed-forward": layers * 24 * context * d_model**2, "lm_head": 2 * context * d_model * 50257}


@pytest.fixture
def figure():
    use_house_style()
    by_size = {name: flops(s.d_model, 1024, s.num_layers) for name, s in accounting.GPT2_SHAPES.items()}
    by_context = {f"{c:,}": flops(1600, c, 48) for c in (1024, 4096, 16384)}
    fig = plot_flop_shares(by_size, by_context)
    yield fig
    plt.close(fig)


def test_lines_apart_and_text_fits(figure):
    assert indistinguishable_lines(figure) == []
    assert layout_problems(figure) == []


def test_alt_text_names_both_panels_and_every_part(figure):
    text = describe_figure(figure)
    assert "larger models" in text and "longer contexts" in text
    assert all(part in text for part in accounting.FLOP_PARTS)


def test_the_measured_counts_are_the_hand_counts_of_gpt2_small():
    """FlopCounterMode over the library's model (meta device) equals the handout's rule, part by part."""
    s = accounting.GPT2_SHAPES["GPT-2 small"]
    assert accounting.measured_flops(s) == flops(768, 1024)
    assert accounting.measured_parameters(s) == 2 * 50257 * 768 + 12 * (16 * 768**2 + 2 * 768) + 768


def test_the_cpu_count_sees_the_attention_too():
    """On the CPU, torch's fused attention kernel is invisible to FlopCounterMode; the math kernel is counted."""
    s = accounting.Shape(97, 16, 24, 2, 3, 40)
    assert accounting.measured_flops(s, device="cpu") == accounting.measured_flops(s)
    assert accounting.measured_flops(s)["attention"] == 2 * 4 * 16**2 * 24
