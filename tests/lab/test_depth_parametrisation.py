"""Depth-μP and CompleteP in training: the blocks' learning rate and ε follow the depth rules.

Dey et al.'s reference code (EleutherAI/nanoGPT-mup, branch ``completep``) multiplies each
branch by (L/L₀)^(−a), the blocks' Adam learning rate by (L/L₀)^(a−1) and their ε by
(L/L₀)^(−a), with a = 1/2 for depth-μP and a = 1 for CompleteP; the model's side is tested
in ``tests/model``. Here: the optimizer's side, through one real update.
"""

from __future__ import annotations

import pytest

from prenorm_lib.lab import train
from prenorm_lib.lab.data import make_corpus

LAYERS = 4


@pytest.fixture(scope="module")
def corpus():
    return make_corpus()


def first_update(corpus, **options) -> tuple[dict[str, float], float]:
    """The largest |change| of each parameter in one AdamW update at the run's first rate, and that rate."""
    model = train.build_model(corpus, seed=0, num_layers=LAYERS, **options)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    config = train.TrainConfig(steps=1, warmup_steps=0, weight_decay=0.0, grad_clip=None, eval_every=1,
                               eval_batches=1, batch_size=4, lr=1e-3)
    history = train.train(model, corpus, config, progress=False)
    moves = {name: (p.detach() - before[name]).abs().max().item() for name, p in model.named_parameters()}
    return moves, history.learning_rates[0]


@pytest.mark.parametrize(("residual_scaling", "block_rate"), [("none", 1.0), ("depth_mup", LAYERS**-0.5),
                                                              ("completep", 1.0)])
def test_the_blocks_move_at_the_depth_scaled_rate(corpus, residual_scaling, block_rate):
    """Adam's first update moves every weight by ≈ lr (|g| ≫ ε): lr × (L/L₀)^(a−1) inside the blocks."""
    moves, lr = first_update(corpus, residual_scaling=residual_scaling)
    assert moves["token_embeddings.weight"] == pytest.approx(lr, rel=1e-3)
    assert moves["lm_head.weight"] == pytest.approx(lr, rel=1e-3)
    for name in ("layers.0.attn.q_proj.weight", "layers.3.ffn.w2.weight", "layers.1.ln2.weight"):
        assert moves[name] == pytest.approx(lr * block_rate, rel=1e-3), name


@pytest.mark.parametrize(("residual_scaling", "a"), [("depth_mup", 0.5), ("completep", 1.0)])
def test_the_blocks_get_their_own_groups_and_eps(corpus, residual_scaling, a):
    model = train.build_model(corpus, seed=0, num_layers=LAYERS, residual_scaling=residual_scaling)
    groups = train._parameter_groups(model, 0.01)
    blocks = {id(p) for p in model.layers.parameters()}
    scaled = [g for g in groups if "lr_scale" in g]
    assert {id(p) for g in scaled for p in g["params"]} == blocks
    assert all(g["eps"] == pytest.approx(train.ADAM_EPS * LAYERS**-a) for g in scaled)
    assert all(g["lr_scale"] == pytest.approx(LAYERS ** (a - 1)) for g in scaled)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_without_a_depth_parametrisation_the_groups_are_the_two_of_before(corpus):
    groups = train._parameter_groups(train.build_model(corpus, seed=0), 0.01)
    assert [set(g) for g in groups] == [{"params", "weight_decay"}] * 2
