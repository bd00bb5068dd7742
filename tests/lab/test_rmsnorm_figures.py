"""Notebook 01's pictures show what their captions say (their legibility: test_figure_layout.py)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prenorm_lib.lab import timing
from prenorm_lib.lab.figures import rmsnorm as figs
from prenorm_lib.lab.plotting import use_house_style


@pytest.fixture(autouse=True)
def _style():
    use_house_style()
    yield
    plt.close("all")


def _bar_heights(live, label):
    container = next(c for c in live.fig.axes[0].containers if c.get_label() == label)
    return np.array([bar.get_height() for bar in container])


def test_zero_mean_vector_has_mean_zero_and_rms_one():
    a = figs.zero_mean_vector(16)
    assert abs(a.mean().item()) < 1e-6
    assert a.pow(2).mean().sqrt().item() == pytest.approx(1.0, abs=1e-6)


def test_shift_slider_shows_layer_norm_still_and_rms_norm_moving():
    live = figs.shift_slider(shift=0.0)
    a = figs.zero_mean_vector(16)
    layer = _bar_heights(live, "LayerNorm (no bias)")
    np.testing.assert_allclose(layer, F.layer_norm(a, (16,), eps=1e-5).numpy(), atol=1e-6)
    np.testing.assert_allclose(_bar_heights(live, "RMSNorm"), layer, atol=1e-6)  # zero mean: the same
    assert live.fig.axes[0].get_title().endswith("= 0.00")
    first = live.frame()

    live.set(shift=2.5)
    rms = _bar_heights(live, "RMSNorm")
    np.testing.assert_allclose(rms, F.rms_norm(a + 2.5, (16,), eps=1e-5).numpy(), atol=1e-6)
    np.testing.assert_allclose(_bar_heights(live, "input a + s"), (a + 2.5).numpy(), atol=1e-6)
    np.testing.assert_allclose(_bar_heights(live, "LayerNorm (no bias)"), layer)  # LayerNorm ignores the shift
    gap = np.abs(rms - layer).max()
    assert gap > 1.0 and live.fig.axes[0].get_title().endswith(f"= {gap:.2f}")
    assert (rms > 0).all(), "a large positive shift pushes every RMSNorm output positive"
    assert live.frame() != first


@pytest.mark.parametrize("shift", [3.5, -4.0, float("nan"), "1"])
def test_shift_slider_refuses_a_start_off_the_slider(shift):
    with pytest.raises(ValueError, match=r"shift must be a number in \[-3, 3\], got"):
        figs.shift_slider(shift=shift)


def test_timing_chart_shows_every_ratio_with_its_quartiles():
    gen = torch.Generator().manual_seed(0)
    samples = {name: (1 + 0.1 * torch.rand(9, generator=gen)).tolist() for name in timing.NORM_KERNELS}
    fig = figs.draw_timing_ratios(samples, "a title")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    for label, (q1, median, q3) in timing.norm_ratios(samples).items():
        assert f"{median:.2f}× [{q1:.2f}–{q3:.2f}]" in texts, label
    assert [t.get_text() for t in ax.get_yticklabels()][::-1] == [
        label.replace(", ", "\n") for label in timing.NORM_RATIOS]
    assert ax.get_xscale() == "log"


def test_fp16_figure_keeps_its_legend_off_the_axes_and_every_marker_inside():
    fig = figs.rmsnorm_scale_and_overflow()
    fig.canvas.draw()
    ax = fig.axes[1]
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 >= ax.get_window_extent().x1, "the legend sits right of the fp16 panel, not on it"
    low, high = ax.get_ylim()
    for line in ax.get_lines():
        assert low < np.min(line.get_ydata()) and np.max(line.get_ydata()) < high
