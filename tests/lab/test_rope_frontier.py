"""Notebook 03's frontier record (issue 40, item 3): what one seed records, and the readers."""

from __future__ import annotations

import numpy as np
import pytest

from prenorm_lib.lab import experiments
from prenorm_lib.lab.experiments import rope_frontier

TINY = {**rope_frontier.CONFIG, "seeds": [0], "steps": 3, "other_lrs": [3e-3], "probe_sentences": 8,
        "position_windows": 4, "finetune_steps": 2, "yarn_betas": [2.0, 32.0]}


@pytest.fixture(scope="module")
def tiny_record():
    return experiments.run("rope_frontier", config=TINY, log=lambda _: None)


def test_the_variants_are_the_options_they_name():
    corpus = rope_frontier._corpus()
    models = {name: rope_frontier._model(rope_frontier.CONFIG, corpus, name, seed=0)
              for name in rope_frontier.CONFIG["variants"]}
    assert [block.attn.rope is None for block in models["nope every 4th"].layers] == [False, False, False, True]
    assert {block.attn.rope.rotated_fraction for block in models["p-rope 0.75"].layers} == {0.75}
    assert all(len(model.layers) == 4 for model in models.values())
    first = models["rope"].state_dict()
    for model in models.values():  # no variant owns a parameter: one seed, one set of weights
        assert all(np.array_equal(first[k], v) for k, v in model.state_dict().items())


@pytest.mark.slow
def test_one_seed_records_every_variant_and_reading(tiny_record):
    result = tiny_record.runs["0"]
    assert set(result["final"]) == set(result["lr_sweep"]) == set(TINY["variants"])
    assert all(set(sweep) == {"0.003"} for sweep in result["lr_sweep"].values())
    assert set(result["yarn_tuning"]["2"]) == {"2.0", "32.0"}
    expected = {f"{variant}/{reading}/2" for variant, readings in TINY["readings"].items() for reading in readings}
    assert set(result["beyond"]) == expected
    assert all(len(entry["before"]) == len(entry["after"]) == 64 for entry in result["beyond"].values())


@pytest.mark.slow
def test_the_readers_follow_the_seeds(tiny_record):
    result = tiny_record.runs["0"]
    assert rope_frontier.finals(tiny_record)["p-rope 0.5"].tolist() == [result["final"]["p-rope 0.5"]["val_loss"]]
    assert rope_frontier.finals(tiny_record, "attractor", lr=3e-3)["rope"].tolist() == \
        [result["lr_sweep"]["rope"]["0.003"]["attractor"]]
    curve = result["beyond"]["nope every 4th/temperature/2"]["after"]
    assert rope_frontier.mean_loss(tiny_record, "nope every 4th", "temperature", 2, "after").tolist() == \
        pytest.approx([np.mean(curve[32:])])
    with pytest.raises(ValueError, match="lr must be one the record trained at"):
        rope_frontier.finals(tiny_record, lr=0.5)


def test_a_live_config_without_rope_or_training_at_length_runs():
    live = {**TINY, "variants": {"nope every 4th": {"nope_layer_interval": 4}}, "other_lrs": [],
            "readings": {"nope every 4th": ["as trained", "temperature"]}, "finetune_steps": 0}
    result = rope_frontier.run_seed(live, 0)
    assert set(result["beyond"]) == {"nope every 4th/as trained/2", "nope every 4th/temperature/2"}
    assert all(set(entry) == {"before"} for entry in result["beyond"].values()) and result["yarn_beta"] == {}
