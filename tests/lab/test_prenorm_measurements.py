"""Notebook 05's measurements: the numbers behind its figures, and how the records are read."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import numpy as np
import pytest

from prenorm_lib.lab import placement_measurements as measure
from prenorm_lib.lab.data import make_corpus
from prenorm_lib.lab.experiments import Record, warmup_grid
from prenorm_lib.lab.figures import placement_diagrams as diagrams


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train_sentences=300, n_val_sentences=50)


def test_mean_over_finite_skips_nan_without_a_warning():
    runs = np.array([[1.0, np.nan, np.nan], [3.0, 4.0, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "Mean of empty slice" warning would land in the notebook's stderr
        means = measure.mean_over_finite(runs)
    assert means[:2].tolist() == [2.0, 4.0] and math.isnan(means[2])


def test_depth_profiles_agree_with_the_direct_measurements(corpus):
    profiles = measure.depth_profiles(corpus, (1, 3), seeds=range(2))
    assert profiles["d_model"] == 64 and profiles["depths"] == [1, 3]
    for placement in ("pre", "post"):
        direct = measure.ffn_grad_norms_over_seeds(corpus, placement, num_layers=3, seeds=range(2), ffn="relu")
        assert profiles["grads"][placement][1] == pytest.approx(direct.mean(axis=0))
        assert profiles["last"][placement][:, 1] == pytest.approx(direct[:, -1])
        stream = measure.residual_norms_over_seeds(corpus, placement, num_layers=3, seeds=range(2), ffn="relu")
        assert profiles["stream"][placement][1] == pytest.approx(stream.mean(axis=0))
        assert [len(g) for g in profiles["grads"][placement]] == [1, 3]


def test_branch_gains_over_seeds_splits_each_block_into_its_sub_layers(corpus):
    gains = measure.branch_gains_over_seeds(corpus, "relu", seeds=range(2), num_layers=3)
    assert {k: v.shape for k, v in gains.items()} == {
        "attn_forward": (2, 3), "attn_backward": (2, 3), "ffn_forward": (2, 3), "ffn_backward": (2, 3),
        "shared": (2, 4), "attn_factor": (2, 3), "ffn_factor": (2, 3),
    }
    assert (gains["ffn_factor"] > 0.5).all() and (gains["ffn_factor"] < 2).all()
    assert "ffn_factor" not in measure.branch_gains_over_seeds(corpus, "relu", seeds=range(1), placement="pre")


def test_first_update_by_depth_shapes(corpus):
    result = measure.first_update_by_depth(corpus, {"pre": {"norm": "pre"}}, (1, 2), seeds=range(2))
    assert result["pre"]["output_change"].shape == (2, 2)
    assert [len(r) for r in result["pre"]["update_ratio"][0]] == [1, 2]


def test_unigram_loss_is_the_entropy_of_the_word_frequencies(corpus):
    counts = Counter(corpus.train_ids.tolist())
    total = sum(counts.values())
    entropy = -sum(n / total * math.log(n / total) for n in counts.values())
    assert warmup_grid.unigram_loss(corpus) == pytest.approx(entropy, rel=1e-9)


def fake_grid_record() -> Record:
    config = {"blocks": {"pre": {}, "post": {}}, "lrs": [0.01], "warmups": [0], "seeds": [0, 1]}

    def cell(outcome, loss):
        return {"outcome": outcome, "final_val_loss": loss, "diverged_at": None if loss else 3,
                "val_steps": [0], "val_loss": [4.0]}

    runs = {"0": {"unigram_loss": 3.8, "cells": {"pre|0.01|0": cell("trains", 2.5),
                                                  "post|0.01|0": cell("stalls", 3.8)}},
            "1": {"unigram_loss": 3.8, "cells": {"pre|0.01|0": cell("trains", 2.6),
                                                  "post|0.01|0": cell("diverges", None)}}}
    return Record("warmup_grid", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=warmup_grid")


def test_grid_summary_counts_outcomes_per_cell():
    summary = measure.grid_summary(fake_grid_record())
    assert summary[("pre", 0, 0.01)]["label"] == "trains 2/2"
    post = summary[("post", 0, 0.01)]
    assert post["label"] == "stalls 1/2\ndiverges 1/2"
    assert post["outcomes"] == ["stalls", "diverges"] and math.isnan(post["losses"][1])
    assert warmup_grid.cell_key("post", 0.01, 20) == "post|0.01|20"


# ---- the block diagram: no arrowhead runs into a box's label ------------------------------


def arrowheads_inside_boxes(ax) -> list[str]:
    """Each arrow whose head ends inside a box (where the box's label is), by the box's label."""
    from matplotlib.patches import FancyBboxPatch
    from matplotlib.text import Annotation

    boxes = [patch.get_window_extent() for patch in ax.patches if isinstance(patch, FancyBboxPatch)]
    labels = {id(box): "" for box in boxes}
    for text in ax.texts:
        if isinstance(text, Annotation):
            continue
        x, y = ax.transData.transform(text.get_position())
        for box in boxes:
            if box.contains(x, y):
                labels[id(box)] = text.get_text()
    problems = []
    for arrow in (t for t in ax.texts if isinstance(t, Annotation)):
        tip = ax.transData.transform(arrow.xy)
        problems += [f"an arrow ends inside {labels[id(box)]!r}" for box in boxes if box.contains(*tip)]
    return problems


def test_no_arrowhead_runs_into_a_box():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = diagrams.prenorm_vs_postnorm_diagram()
    fig.canvas.draw()
    for ax in fig.axes:
        assert arrowheads_inside_boxes(ax) == []
    plt.close(fig)


def test_an_arrow_into_a_box_is_reported():
    """The check above fires: an arrow drawn to the centre of a box is caught."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set(xlim=(-2, 2), ylim=(-2, 2))
    diagrams._box(ax, 0, 0, "lm_head → logits", "#eeeeee")
    diagrams._arrow(ax, (0, -1.5), (0, 0))
    fig.canvas.draw()
    assert arrowheads_inside_boxes(ax) == ["an arrow ends inside 'lm_head → logits'"]
    plt.close(fig)


def test_depth_slider_starts_where_asked_and_its_picture_shows_that_depth(corpus):
    """The stored picture is the first frame; it must show the depth the stored slider holds."""
    from prenorm_lib.lab.figures import placement as figs

    profiles = measure.depth_profiles(corpus, (1, 2, 3), seeds=range(1))
    live = figs.depth_slider(profiles, initial=3)
    assert live.values["L"] == 3
    assert live.fig.axes[0].get_title() == "Residual stream, L = 3"
    live.set(L=1)
    assert live.fig.axes[0].get_title() == "Residual stream, L = 1"
