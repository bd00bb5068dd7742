"""Notebook 03's experiment: what one seed records, and the paired claims the notebook prints."""

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


def test_paired_claim_counts_wins_in_the_right_direction():
    lower = rope_positions.paired_claim("A", np.array([1.0, 2.0, 3.0]), "B", np.array([2.0, 2.5, 2.0]), "loss")
    assert lower == "A below B on loss in 2 of 3 paired seeds: False  (difference -0.167 ± 1.041)"
    higher = rope_positions.paired_claim("A", np.array([0.9, 0.8]), "B", np.array([0.5, 0.7]), "probe",
                                         higher_is_better=True)
    assert higher == "A above B on probe in 2 of 2 paired seeds: True  (difference +0.250 ± 0.212)"
