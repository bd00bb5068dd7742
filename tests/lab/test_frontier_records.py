"""Notebook 05's frontier records: what their designs rest on, checked on small runs."""

from __future__ import annotations

import dataclasses

import pytest

from prenorm_lib.lab.data import make_corpus
from prenorm_lib.lab.experiments import depth_lr_transfer, frontier_lr_sweep
from prenorm_lib.lab.train import TrainConfig, build_model, train


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train_sentences=400, n_val_sentences=60)


@pytest.mark.parametrize("scaling", ["depth_mup", "completep"])
def test_at_the_base_depth_a_depth_parametrisation_trains_as_the_standard_model(corpus, scaling):
    """depth_lr_transfer stores the standard model's runs for every parametrisation at L₀: they are the same run."""
    config = TrainConfig(steps=6, lr=3e-2, warmup_steps=2, eval_every=3, eval_batches=1)
    standard = train(build_model(corpus, 0, num_layers=2), corpus, config, progress=False)
    scaled = train(build_model(corpus, 0, num_layers=2, residual_scaling=scaling, base_depth=2), corpus, config,
                   progress=False)
    assert scaled.val_loss == standard.val_loss and scaled.train_loss == standard.train_loss
    deeper = train(build_model(corpus, 0, num_layers=4, residual_scaling=scaling, base_depth=2), corpus, config,
                   progress=False)
    assert deeper.val_loss != train(build_model(corpus, 0, num_layers=4), corpus, config, progress=False).val_loss


def test_the_base_depth_runs_are_shared_and_the_others_are_not():
    config = {**depth_lr_transfer.CONFIG, **depth_lr_transfer.FINGERPRINT, "steps": 3, "eval_every": 3}
    runs = depth_lr_transfer.run_seed(config, 0)
    key = depth_lr_transfer.cell_key
    for name in config["parametrisations"]:
        assert runs[key(name, 2, 3e-3)] == runs[key("standard", 2, 3e-3)]
    assert runs[key("CompleteP (1/L)", 4, 3e-3)] != runs[key("standard", 4, 3e-3)]


def test_every_sweep_row_builds_and_trains(corpus):
    """Each row's options are a model's and, under "train", a TrainConfig's: a typo fails here, not an hour in."""
    for name, row in frontier_lr_sweep.CONFIG["blocks"].items():
        options = {key: value for key, value in row.items() if key != "train"}
        model = build_model(corpus, 0, num_layers=1, context_length=8, **options)
        config = dataclasses.replace(TrainConfig(steps=2, warmup_steps=0, eval_every=2, eval_batches=1,
                                                 batch_size=2, context_length=8), **row.get("train", {}))
        assert train(model, corpus, config, progress=False).diverged_at is None, name


def test_the_sweeps_figure_tells_every_row_apart_without_colour():
    """Each row of the sweep has its own dash or marker: printed in grey, eleven lines stay eleven."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from prenorm_lib.lab import plotting
    from prenorm_lib.lab.figures.placement import plot_lr_sweep

    lrs = frontier_lr_sweep.CONFIG["lrs"]
    losses = np.linspace(2.2, 3.0, 2 * len(lrs)).reshape(2, len(lrs))  # (seeds, lrs), made up
    summary = {block: {"loss": losses, "loss_mean": losses.mean(axis=0), "logit": 10 * losses,
                       "logit_median": 10 * losses.mean(axis=0)} for block in frontier_lr_sweep.CONFIG["blocks"]}
    with plt.rc_context(plotting.HOUSE_STYLE):
        fig = plot_lr_sweep(summary, lrs)
    try:
        assert plotting.legend_entries_alike(fig) == []
    finally:
        plt.close(fig)
