"""Notebook 03's test of its own reason (issue 39, item 8): the texts, one seed's record, the readers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prenorm_lib.lab import experiments
from prenorm_lib.lab.experiments import rope_extension

TINY = {**rope_extension.CONFIG, "seeds": [0], "steps": {"grammar": 3, "repeat": 3}, "factors": [2, 4],
        "position_windows": 4, "finetune_steps": 2, "yarn_betas": [2.0, 32.0]}


def test_a_repeated_stream_repeats_every_chunk_once():
    ids = torch.arange(10)
    assert rope_extension.repeated_stream(ids, 3).tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 5, 3]
    stream = rope_extension.repeated_stream(torch.randint(0, 50, (1000,)), 16)
    pairs = stream[:992].reshape(-1, 32)  # (31, 32): each row a chunk and its repeat
    assert torch.equal(pairs[:, :16], pairs[:, 16:]) and len(stream) == 1000
    with pytest.raises(ValueError, match="period must be a positive int, got 0"):
        rope_extension.repeated_stream(ids, 0)


def test_the_repeats_are_as_far_back_as_in_training_or_half_the_window():
    config = rope_extension.CONFIG
    as_trained = rope_extension.reading_text(config, "repeat 16 back", 4).val_ids
    growing = rope_extension.reading_text(config, "repeat half the window", 4).val_ids  # 32 · 4 / 2 = 64 back
    assert torch.equal(as_trained[16:32], as_trained[:16]) and not torch.equal(as_trained[16:32], as_trained[32:48])
    assert torch.equal(growing[64:128], growing[:64])
    assert rope_extension.reading_text(config, "grammar", 8) is rope_extension.text("grammar")
    with pytest.raises(ValueError, match="name must be one of"):
        rope_extension.reading_text(config, "repeat 3 back", 2)


@pytest.fixture(scope="module")
def tiny_record():
    return experiments.run("rope_extension", config=TINY, log=lambda _: None)


@pytest.mark.slow
def test_one_seed_records_every_text_factor_and_method(tiny_record):
    result = tiny_record.runs["0"]
    assert set(result["trained_loss"]) == {"grammar", "repeat"}
    cells = {f"{text}/{factor}" for text in TINY["texts"] for factor in TINY["factors"]}
    assert set(result["yarn_beta"]) == set(result["yarn_tuning"]) == cells
    for cell in cells:
        assert set(result["yarn_tuning"][cell]) == {"2.0", "32.0"}
        assert result["yarn_beta"][cell] == float(min(result["yarn_tuning"][cell], key=result["yarn_tuning"][cell].get))
        factor = int(cell.split("/")[1])
        for method in TINY["methods"]:
            curves = result["beyond"][f"{cell}/{method}"]
            assert len(curves["before"]) == len(curves["after"]) == 32 * factor


@pytest.mark.slow
def test_the_readers_follow_the_seeds(tiny_record):
    curve = tiny_record.runs["0"]["beyond"]["repeat half the window/4/yarn"]["after"]
    beyond = rope_extension.mean_loss(tiny_record, "repeat half the window", 4, "yarn", "after")
    inside = rope_extension.mean_loss(tiny_record, "repeat half the window", 4, "yarn", "after", span="inside")
    assert beyond.tolist() == pytest.approx([np.mean(curve[32:])])
    assert inside.tolist() == pytest.approx([np.mean(curve[:32])])
    assert rope_extension.chosen_betas(tiny_record, "grammar", 2) == [tiny_record.runs["0"]["yarn_beta"]["grammar/2"]]
