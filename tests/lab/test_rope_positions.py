"""Notebook 03's experiment: what one seed records, and the helpers the notebook reads it with."""

from __future__ import annotations

import numpy as np
import pytest

from prenorm_lib.lab import experiments
from prenorm_lib.lab.experiments import rope_positions

TINY = {**rope_positions.CONFIG, "seeds": [0], "steps": 4, "eval_every": 2, "probe_sentences": 8, "other_lrs": [3e-3],
        "long_steps": 4, "long_eval_every": 4, "position_windows": 4, "finetune_steps": 2}


@pytest.fixture(scope="module")
def tiny_record():
    return experiments.run("rope_positions", config=TINY, log=lambda _: None)


@pytest.mark.slow
def test_one_seed_records_every_part(tiny_record):
    result = tiny_record.runs["0"]
    assert result["val_steps"] == [0, 2, 4] and result["long_val_steps"] == [0, 4]
    for positions in ("rope", "sinusoidal", "none"):
        assert set(result["main"][positions]) == {"val_loss", "agreement", "attractor"}
        assert all(len(curve) == 3 for curve in result["main"][positions].values())
        assert set(result["lr_sweep"][positions]) == {"0.003"}
        assert len(result["long"][positions]["val_loss"]) == 2
    assert set(result["beyond"]) == {"rope/none", "rope/interpolation", "rope/ntk", "sinusoidal/none", "none/none"}
    for curves in result["beyond"].values():
        assert len(curves["before"]) == len(curves["after"]) == 64


@pytest.mark.slow
def test_reading_helpers_follow_the_seeds(tiny_record):
    loss = rope_positions.finals(tiny_record, "val_loss")
    assert loss["rope"].tolist() == [tiny_record.runs["0"]["main"]["rope"]["val_loss"][-1]]
    late = rope_positions.mean_loss(tiny_record, "rope/ntk", "before", 32, 64)
    assert late.tolist() == pytest.approx([np.mean(tiny_record.runs["0"]["beyond"]["rope/ntk"]["before"][32:])])


@pytest.mark.slow
def test_finals_at_lr_reads_the_main_run_or_the_sweep(tiny_record):
    assert rope_positions.finals_at_lr(tiny_record, TINY["lr"])["rope"].tolist() == \
        rope_positions.finals(tiny_record, "val_loss")["rope"].tolist()
    swept = rope_positions.finals_at_lr(tiny_record, 3e-3)
    assert swept["none"].tolist() == [tiny_record.runs["0"]["lr_sweep"]["none"]["0.003"]["val_loss"]]
    with pytest.raises(ValueError, match="lr must be one the record trained at"):
        rope_positions.finals_at_lr(tiny_record, 0.5)


def test_within_seed_spread_widens_the_range_by_the_std():
    seeds = np.array([1.0, 2.0, 3.0])  # std 1: the band is [1 − 3, 3 + 3]
    assert rope_positions.within_seed_spread(-1.99, seeds) and rope_positions.within_seed_spread(5.99, seeds)
    assert not rope_positions.within_seed_spread(-2.01, seeds)
    assert not rope_positions.within_seed_spread(6.01, seeds)
    assert rope_positions.within_seed_spread(3.5, seeds, widen=0.5)
    assert not rope_positions.within_seed_spread(3.6, seeds, widen=0.5)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        rope_positions.within_seed_spread(1.0, [1.0])
