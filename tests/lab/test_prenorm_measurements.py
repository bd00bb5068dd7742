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


def fake_sweep_record() -> Record:
    config = {"blocks": {"a": {}, "b": {}}, "lrs": [0.01, 0.1], "seeds": [0, 1]}

    def cell(loss, logit, diverged=None):
        return {"final_val_loss": None if diverged else loss, "diverged_at": diverged, "val_steps": [0, 5],
                "val_loss": [4.0, loss], "max_logit": [1.0, logit], "log_z": [3.0, logit / 10],
                "max_output_logit": [2.0, logit / 2], "qk_clipped": 0}

    runs = {"0": {"a|0.01": cell(2.0, 10.0), "a|0.1": cell(1.5, 100.0), "b|0.01": cell(2.2, 5.0),
                  "b|0.1": cell(9.0, 7.0, diverged=3)},
            "1": {"a|0.01": cell(2.1, 12.0), "a|0.1": cell(1.7, 300.0), "b|0.01": cell(2.3, 6.0),
                  "b|0.1": cell(2.0, 8.0)}}
    return Record("frontier_lr_sweep", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=frontier_lr_sweep")


def test_lr_sweep_summary_reads_the_end_of_every_run_and_marks_divergence():
    summary = measure.lr_sweep_summary(fake_sweep_record())
    a, b = summary["a"], summary["b"]
    assert a["loss"].tolist() == [[2.0, 1.5], [2.1, 1.7]] and a["logit"].tolist() == [[10.0, 100.0], [12.0, 300.0]]
    assert a["log_z"][0].tolist() == [1.0, 10.0] and a["output_logit"][1].tolist() == [6.0, 150.0]
    assert math.isnan(b["loss"][0, 1]) and math.isnan(b["logit"][0, 1]) and b["diverged"].tolist() == [0, 1]
    assert b["loss_mean"].tolist() == [2.25, 2.0]  # the seeds that finished
    assert a["logit_median"].tolist() == [11.0, 200.0]


def test_best_lr_is_the_lowest_mean_loss_and_a_diverged_seed_disqualifies_a_rate():
    summary = measure.lr_sweep_summary(fake_sweep_record())
    lr, losses = measure.best_lr_losses(summary["a"], [0.01, 0.1])
    assert lr == 0.1 and losses.tolist() == [1.5, 1.7]
    lr, losses = measure.best_lr_losses(summary["b"], [0.01, 0.1])  # 0.1 is lower for seed 1, but seed 0 diverged
    assert lr == 0.01 and losses.tolist() == [2.2, 2.3]


def test_theorem1_arrays_and_log_log_slopes():
    config = {"seeds": [0, 1], "depths": [2, 8], "widths": [64], "placements": ["pre", "post"]}
    runs = {str(s): {"d64": {"pre": {"one_batch": [1.0, 0.5], "expected": [0.9, 0.45]},
                             "post": {"one_batch": [1.0 + s, 1.0 + s], "expected": [1.0, 1.0]}}} for s in (0, 1)}
    record = Record("theorem1_depth", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=theorem1_depth")
    arrays = measure.theorem1_arrays(record)
    assert arrays[64]["post"].tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert measure.theorem1_arrays(record, "expected")[64]["pre"].tolist() == [[0.9, 0.45], [0.9, 0.45]]
    assert measure.log_log_slopes([2, 8], arrays[64]["pre"]) == pytest.approx([-0.5, -0.5])  # 1/√L: ×½ over ×4
    assert measure.log_log_slopes([2, 8], arrays[64]["post"]) == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="kind"):
        measure.theorem1_arrays(record, "mean")


def test_hidden_variance_summary_reads_one_evaluation_of_every_run():
    config = {"placements": {"pre-norm": {}, "Peri-LN (sandwich)": {}}, "lrs": [0.01, 0.1], "num_layers": 1,
              "seeds": [0]}

    def cell(start, end, diverged=None):
        return {"final_val_loss": None if diverged else 2.0, "diverged_at": diverged, "val_steps": [0, 50],
                "val_loss": [4.0, 2.0], "variance": [start, end], "max_abs": [[3.0, 4.0], [5.0, 6.0]]}

    runs = {"0": {"pre-norm|0.01": cell([1.0, 2.0], [1.0, 8.0]), "pre-norm|0.1": cell([1.0, 2.0], [1.0, 80.0], 70),
                  "Peri-LN (sandwich)|0.01": cell([1.0, 1.5], [1.0, 2.5]),
                  "Peri-LN (sandwich)|0.1": cell([1.0, 1.5], [1.0, 3.0])}}
    record = Record("periln_variance", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=periln_variance")
    end, init = measure.hidden_variance_summary(record), measure.hidden_variance_summary(record, at=0)
    assert end["pre-norm"]["variance"].shape == (1, 2, 2)
    assert end["pre-norm"]["variance"][0, 0].tolist() == [1.0, 8.0]
    assert np.isnan(end["pre-norm"]["variance"][0, 1]).all()  # diverged: nothing at the end
    assert init["pre-norm"]["variance"][0, 1].tolist() == [1.0, 2.0]  # but its start is a start
    assert end["Peri-LN (sandwich)"]["max_abs"][0, 1].tolist() == [5.0, 6.0]
    assert end["pre-norm"]["loss"][0, 0] == 2.0 and math.isnan(end["pre-norm"]["loss"][0, 1])


def test_gradient_by_layer_arrays_read_init_and_a_training_step():
    config = {"placements": {"pre-norm": {}, "Mix-LN": {}}, "num_layers": 2, "lrs": [0.01], "seeds": [0, 1]}

    def entry(init, trained, diverged=None):
        return {"init": init, "0.01": {"final_val_loss": None if diverged else 2.0, "diverged_at": diverged,
                                       "val_loss": [4.0], "norm_steps": [1, 50], "grad_norms": trained}}

    runs = {"0": {"pre-norm": entry([1.0, 0.5], [[2.0, 1.0], [4.0, 1.0]]),
                  "Mix-LN": entry([0.7, 0.7], [[1.0, 1.0], [3.0, 3.0]])},
            "1": {"pre-norm": entry([1.2, 0.6], [[2.0, 1.0]], diverged=30),
                  "Mix-LN": entry([0.8, 0.8], [[1.0, 1.0], [5.0, 5.0]])}}
    record = Record("gradient_by_layer", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=gradient_by_layer")
    init = measure.gradient_by_layer_arrays(record)
    assert init["pre-norm"].tolist() == [[1.0, 0.5], [1.2, 0.6]]
    last = measure.gradient_by_layer_arrays(record, lr=0.01)
    assert last["Mix-LN"].tolist() == [[3.0, 3.0], [5.0, 5.0]] and np.isnan(last["pre-norm"][1]).all()
    assert measure.gradient_by_layer_arrays(record, lr=0.01, step=0)["pre-norm"][0].tolist() == [2.0, 1.0]
    slopes = measure.log_slopes_by_layer(np.array([[1.0, 0.1, 0.01], [2.0, 2.0, 2.0]]))
    assert slopes == pytest.approx([-1.0, 0.0])  # a tenth per block: −1 decade per block; uniform: 0


def test_depth_transfer_losses_and_the_optimal_learning_rate():
    config = {"parametrisations": {"standard": {}}, "depths": [2, 8], "lrs": [0.01, 0.1], "seeds": [0]}
    runs = {"0": {"standard|2|0.01": {"final_val_loss": 2.5, "diverged_at": None},
                  "standard|2|0.1": {"final_val_loss": 2.2, "diverged_at": None},
                  "standard|8|0.01": {"final_val_loss": 2.1, "diverged_at": None},
                  "standard|8|0.1": {"final_val_loss": None, "diverged_at": 40}}}
    record = Record("depth_lr_transfer", "test", config, runs, {}, 0.0, "abc", "make experiment NAME=depth_lr_transfer")
    losses = measure.depth_transfer_losses(record)["standard"]
    assert losses.shape == (1, 2, 2) and losses[0, 0].tolist() == [2.5, 2.2] and math.isnan(losses[0, 1, 1])
    lrs = [1e-3, 1e-2, 1e-1, 1.0]
    grid = np.array([[3.0, 2.0, 2.0, 3.0],  # symmetric around the middle: the vertex at 10^-1.5
                     [1.0, 2.0, 3.0, 4.0],  # best at the edge: the edge
                     [3.0, 2.5, 2.0, np.nan]])  # a diverged neighbour: the grid point itself
    assert measure.optimal_log_lr(grid, lrs) == pytest.approx([-1.5, -3.0, -1.0])
    steep = np.array([[10.0, 2.0, 2.1, 2.2]])  # a parabola whose vertex lies outside: clipped to the neighbours
    assert -3.0 <= measure.optimal_log_lr(steep, lrs)[0] <= -1.0
