"""The squared-ReLU record: its fairness (SwiGLU's weights and schedule), and how it is read against SwiGLU's runs."""

from __future__ import annotations

import pytest

from prenorm_lib.lab import prose, train
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.experiments import ffn_ablation as ablation
from prenorm_lib.lab.experiments import ffn_relu2 as relu2


def test_everything_but_the_ffn_and_the_rate_is_the_ablations():
    shared = {key: value for key, value in ablation.CONFIG.items() if key not in ("ffns", "lr")}
    assert {key: value for key, value in relu2.CONFIG.items() if key != "variants"} == shared
    assert relu2.CONFIG["variants"] == {"relu2_lr3e-3": ["relu2", 288, 3e-3], "relu2_lr1e-2": ["relu2", 288, 1e-2],
                                        "relu2_lr3e-2": ["relu2", 288, 3e-2]}
    assert ablation.CONFIG["lr"] in relu2.LEARNING_RATES


def test_squared_relu_at_288_has_swiglus_parameters_in_the_whole_model():
    corpus = prose.make_prose_corpus()
    settings = dict(d_model=64, num_layers=2, num_heads=4, context_length=64)
    squared = train.build_model(corpus, 0, device="meta", ffn="relu2", d_ff=relu2.MATCHED_D_FF, **settings)
    swiglu = train.build_model(corpus, 0, device="meta", ffn="swiglu", **settings)
    assert squared.num_parameters() == swiglu.num_parameters()


def record(name: str, variants: dict[str, list[float]], seeds=(0, 1, 2)) -> Record:
    """A record whose runs hold only final losses (what the comparisons read)."""
    runs = {str(seed): {v: {"final_val_loss": losses[i]} for v, losses in variants.items()}
            for i, seed in enumerate(seeds)}
    return Record(name=name, description="", config={"seeds": list(seeds), "variants": dict.fromkeys(variants)},
                  runs=runs, environment={}, wall_seconds=0.0, commit="", command="")


def test_comparisons_pair_each_rate_and_each_at_its_best():
    squared = record("ffn_relu2", {"relu2_lr3e-3": [1.60, 1.62, 1.61], "relu2_lr1e-2": [1.55, 1.56, 1.57],
                                   "relu2_lr3e-2": [1.50, 1.52, 1.51]})
    controls = record("ffn_controls", {"swiglu_lr3e-3": [1.58, 1.59, 1.60], "swiglu_lr3e-2": [1.53, 1.54, 1.52],
                                       "relu_d288": [1.57, 1.58, 1.59]})
    ablation_record = record("ffn_ablation", {"swiglu": [1.49, 1.50, 1.51]})
    ablation_record.config["ffns"] = ["swiglu"]
    found = relu2.comparisons(squared, ablation_record, controls)
    best = "SwiGLU − ReLU², each at its best (lr 0.01 and 0.03)"  # both at one rate: "(both lr 0.01)"
    assert set(found) == {"SwiGLU − ReLU², both lr 0.003", "SwiGLU − ReLU², both lr 0.01",
                          "SwiGLU − ReLU², both lr 0.03", best, "ReLU² − ReLU, both d_ff 288, lr 0.01"}
    assert found[best].differences == pytest.approx([-0.01, -0.02, 0.0])
    assert found["SwiGLU − ReLU², both lr 0.03"].differences == pytest.approx([0.03, 0.02, 0.01])
    assert found["ReLU² − ReLU, both d_ff 288, lr 0.01"].differences == pytest.approx([-0.02, -0.02, -0.02])


def test_records_with_other_seeds_are_refused():
    squared = record("ffn_relu2", {v: [1.5, 1.5, 1.5] for v in relu2.CONFIG["variants"]})
    controls = record("ffn_controls", {"swiglu_lr3e-3": [1.5] * 2, "swiglu_lr3e-2": [1.5] * 2, "relu_d288": [1.5] * 2},
                      seeds=(0, 1))
    ablation_record = record("ffn_ablation", {"swiglu": [1.5, 1.5, 1.5]})
    ablation_record.config["ffns"] = ["swiglu"]
    with pytest.raises(ValueError, match="ffn_controls has seeds"):
        relu2.comparisons(squared, ablation_record, controls)
