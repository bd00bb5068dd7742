"""Notebook 04's measurements and figures: the numbers behind the pictures, and sliders fast enough to drag."""

import math
import time

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from prenorm_lib.lab.figures import attention as fig
from prenorm_lib.lab.plotting import use_house_style


def test_score_spread_grows_like_sqrt_d_k():
    result = fig.saturation(d_ks=(4, 64, 256), n_rows=4000)
    for d_k, std in zip(result["d_k"], result["score_std"], strict=True):
        assert abs(std / math.sqrt(d_k) - 1) < 0.05, (d_k, std)


def test_scale_keeps_entropy_and_gradient_while_no_scale_loses_them():
    result = fig.saturation(d_ks=(1, 1024), n_rows=2000)
    scaled, unscaled = result["scaled"], result["unscaled"]
    assert abs(scaled["entropy"][1] - scaled["entropy"][0]) < 0.1  # the scale keeps the spread at 1
    assert unscaled["entropy"][1] < 0.1 * scaled["entropy"][1]  # nearly one-hot
    assert unscaled["gradient"][1] < 0.2 * scaled["gradient"][1]  # and flat


def test_jacobian_norm_matches_autograd():
    scores = torch.randn(5, dtype=torch.float64, requires_grad=True)
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores)  # (5, 5)
    p = torch.softmax(scores.detach(), -1)
    torch.testing.assert_close(fig.softmax_jacobian_norm(p), jacobian.norm())


def test_entropy_of_uniform_and_one_hot():
    assert fig.entropy(torch.full((8,), 1 / 8)).item() == pytest.approx(math.log(8))
    assert fig.entropy(torch.tensor([1.0, 0.0, 0.0])).item() == pytest.approx(0.0)


@pytest.mark.parametrize("make", [fig.sharpness_slider, fig._example_maps])
def test_slider_redraws_within_100_ms(make):
    use_house_style()
    live = make()
    name, control = next(iter(live.controls.items()))
    values = list(control.options) if hasattr(control, "options") else [control.min, control.max]
    frames = []
    for value in values * 3:  # CPU time of this process, fastest frame: the machine may be shared
        start = time.process_time()
        live.set(**{name: value})
        live.frame()
        frames.append(time.process_time() - start)
    assert min(frames) < 0.1, f"{min(frames) * 1e3:.0f} ms of CPU per redraw at best"


def test_map_slider_shows_the_chosen_weight():
    maps = np.zeros((2, 3, 4, 4))
    maps[1, 2, 3, 1] = 0.75
    live = fig.attention_map_slider(maps, ["a", "b", "c", "d"], query=3, key=1)
    live.set(layer=1, head=2)
    title = live.fig.axes[0].get_title()
    assert "layer 1, head 2" in title and "0.75" in title


def test_mask_figure_labels_every_cell():
    figure = fig.draw_mask(4)
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert texts.count("True") == 10 and texts.count("False") == 6
