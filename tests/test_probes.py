"""Probes read a model without changing it, and see what Xiong et al. (2020) describe."""

import itertools
import math

import pytest
import torch

from prenorm_lib.data import get_batch, make_corpus
from prenorm_lib.ffn import FeedForward, SwiGLU
from prenorm_lib.probes import (
    agreement_accuracy,
    dead_relu_fraction,
    ffn_grad_norms_by_layer,
    grad_norms_at_init,
    recording_residual_norms,
    residual_norms,
)
from prenorm_lib.train import build_model


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train_sentences=300, n_val_sentences=50)


@pytest.fixture(scope="module")
def batch(corpus):
    return get_batch(corpus.train_ids, 4, 32, torch.Generator().manual_seed(0))


def hook_count(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_residual_norms_cover_embedding_and_every_block(corpus, batch):
    model = build_model(corpus, seed=0, num_layers=3)
    norms = residual_norms(model, batch[0])
    assert len(norms) == 4 and all(n > 0 for n in norms)
    embedded = model.token_embeddings(batch[0])
    assert norms[0] == pytest.approx(embedded.pow(2).sum(-1).mean().item())
    assert hook_count(model) == 0


def test_hooks_are_removed_even_when_forward_fails(corpus):
    model = build_model(corpus, seed=0)
    with pytest.raises(ValueError, match="context_length"):
        residual_norms(model, torch.zeros(1, 40, dtype=torch.long))
    assert hook_count(model) == 0
    with pytest.raises(TypeError, match="token_embeddings"), recording_residual_norms(torch.nn.Linear(2, 2)):
        pass


def test_pre_norm_stream_grows_with_depth_post_norm_stays_flat(corpus, batch):
    """Xiong et al. Lemma 2: pre-norm blocks add to the stream; post-norm renormalises it."""
    pre = residual_norms(build_model(corpus, seed=0, num_layers=8, norm="pre"), batch[0])
    post = residual_norms(build_model(corpus, seed=0, num_layers=8, norm="post"), batch[0])
    assert len(pre) == len(post) == 9
    assert all(b > a for a, b in itertools.pairwise(pre))
    assert pre[-1] > 3 * pre[0]
    d_model = 64  # an RMSNorm with unit gain outputs vectors of squared norm ≈ d_model
    assert post[1:] == pytest.approx([d_model] * 8, rel=1e-3)


def test_grad_norms_at_init_cover_every_parameter_and_leave_grad_alone(corpus, batch):
    model = build_model(corpus, seed=0)
    before = {name: p.clone() for name, p in model.named_parameters()}
    norms = grad_norms_at_init(model, *batch)
    assert set(norms) == {name for name, _ in model.named_parameters()}
    assert all(math.isfinite(v) and v > 0 for v in norms.values())
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def test_grad_norms_match_a_plain_backward(corpus, batch):
    model = build_model(corpus, seed=0)
    norms = grad_norms_at_init(model, *batch)
    logits = model(batch[0])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[1].flatten()).backward()
    for name, p in model.named_parameters():
        assert norms[name] == pytest.approx(p.grad.norm().item(), rel=1e-5)


def test_ffn_grad_norms_one_per_block(corpus, batch):
    model = build_model(corpus, seed=0, num_layers=3)
    every = ffn_grad_norms_by_layer(model, *batch)
    w2 = ffn_grad_norms_by_layer(model, *batch, weight="w2")
    assert len(every) == len(w2) == 3
    assert all(a > b > 0 for a, b in zip(every, w2, strict=True))
    per_parameter = grad_norms_at_init(model, *batch)
    assert w2[1] == pytest.approx(per_parameter["layers.1.ffn.w2.weight"], rel=1e-5)
    with pytest.raises(ValueError, match="block 0 has no FFN weight 'w3'"):
        ffn_grad_norms_by_layer(build_model(corpus, seed=0, ffn="relu"), *batch, weight="w3")


def test_dead_relu_fraction_is_zero_when_every_pre_activation_is_positive():
    ffn = FeedForward(4, 6, activation="relu")
    with torch.no_grad():
        ffn.w1.weight.copy_(torch.rand(6, 4) + 0.1)
    x = torch.rand(3, 5, 4) + 0.1  # positive inputs times positive weights: all units active
    assert dead_relu_fraction(ffn, x) == 0.0
    with torch.no_grad():
        ffn.w1.weight[:3] *= -1  # the first three units now see only negative pre-activations
    assert dead_relu_fraction(ffn, x) == 0.5


def test_dead_relu_fraction_on_models(corpus, batch):
    relu_model = build_model(corpus, seed=0, ffn="relu")
    fraction = dead_relu_fraction(relu_model, batch[0])
    assert 0.0 <= fraction <= 1.0
    assert hook_count(relu_model) == 0
    assert dead_relu_fraction(build_model(corpus, seed=0, ffn="swiglu"), batch[0]) == 0.0
    assert dead_relu_fraction(SwiGLU(8, 16), torch.randn(10, 8)) == 0.0
    with pytest.raises(TypeError, match="model_or_ffn"):
        dead_relu_fraction(torch.nn.Linear(2, 2), torch.randn(3, 2))


def test_agreement_accuracy_is_a_fraction_near_chance_at_init(corpus):
    model = build_model(corpus, seed=0)
    overall = agreement_accuracy(model, corpus, n_sentences=64)
    hard = agreement_accuracy(model, corpus, n_sentences=64, attractors_only=True)
    assert 0.2 < overall < 0.8 and 0.0 <= hard <= 1.0
    assert model.training
