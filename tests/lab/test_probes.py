"""Probes read a model without changing it, and see what Xiong et al. (2020) describe."""

import itertools
import math

import pytest
import torch

from prenorm_lib.ffn import FeedForward, SwiGLU
from prenorm_lib.functional import causal_mask
from prenorm_lib.lab import probes
from prenorm_lib.lab.data import get_batch, make_corpus
from prenorm_lib.lab.probes import (
    adam_first_step,
    agreement_accuracy,
    branch_gains,
    dead_relu_fraction,
    expected_grad_norms_by_layer,
    ffn_grad_norms_by_layer,
    grad_norms_at_init,
    head_max_logits,
    hidden_state_stats,
    max_attention_logit,
    next_token_loss,
    output_logit_stats,
    recording_residual_norms,
    residual_norms,
    shared_fraction_by_depth,
    stream_gradient_norms,
)
from prenorm_lib.lab.train import build_model


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


def test_stream_gradient_norms_match_retained_gradients(corpus, batch):
    model = build_model(corpus, seed=0, num_layers=3, norm="post")
    norms = stream_gradient_norms(model, *batch)
    h = model.token_embeddings(batch[0])
    streams = [h]
    for layer in model.layers:
        h = layer(h)
        streams.append(h)
    for stream in streams:
        stream.retain_grad()
    logits = model.lm_head(model.ln_final(h))
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[1].flatten()).backward()
    assert norms == pytest.approx([s.grad.norm().item() for s in streams], rel=1e-5)
    assert hook_count(model) == 0
    assert all(p.grad is None for p in build_model(corpus, seed=0).parameters())


def test_branch_gains_match_an_explicit_vector_jacobian_product(corpus, batch):
    model = build_model(corpus, seed=1, num_layers=2, ffn="relu")
    gains = branch_gains(model, *batch)
    assert set(gains) == {"attn_forward", "attn_backward", "ffn_forward", "ffn_backward"}
    assert all(len(v) == 2 for v in gains.values())
    # block 1's FFN, by hand: its input u, the loss gradient g at its output, then Jᵀg by torch.func
    layer = model.layers[1]
    with torch.no_grad():
        h = model.layers[0](model.token_embeddings(batch[0]))
        u = layer.ln2(h + layer.attn(layer.ln1(h)))
    out = layer.ffn(u.requires_grad_())
    h_out = (h + layer.attn(layer.ln1(h))).detach() + out
    loss = torch.nn.functional.cross_entropy(model.lm_head(model.ln_final(h_out)).flatten(0, 1), batch[1].flatten())
    (g,) = torch.autograd.grad(loss, out, retain_graph=True)
    _, vjp = torch.func.vjp(layer.ffn, u.detach())
    (jt_g,) = vjp(g)
    assert gains["ffn_forward"][1] == pytest.approx((out.pow(2).sum() / u.pow(2).sum()).item(), rel=1e-4)
    assert gains["ffn_backward"][1] == pytest.approx((jt_g.pow(2).sum() / g.pow(2).sum()).item(), rel=1e-4)
    assert hook_count(model) == 0


def test_branch_gains_see_the_degree_of_homogeneity(corpus, batch):
    """Euler: a ReLU branch's backward gain ≈ its forward gain; a SwiGLU branch's is about twice it."""
    relu = branch_gains(build_model(corpus, seed=0, num_layers=4, ffn="relu", norm="post"), *batch)
    swiglu = branch_gains(build_model(corpus, seed=0, num_layers=4, ffn="swiglu", norm="post"), *batch)
    relu_ratio = sum(relu["ffn_backward"]) / sum(relu["ffn_forward"])
    swiglu_ratio = sum(swiglu["ffn_backward"]) / sum(swiglu["ffn_forward"])
    assert 0.8 < relu_ratio < 1.2
    assert 1.6 < swiglu_ratio < 2.5


def test_adam_first_step_moves_every_weight_by_the_learning_rate(corpus, batch):
    model = build_model(corpus, seed=0, num_layers=2)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = adam_first_step(model, *batch, lr=1e-3)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # untouched
    assert all(p.grad is None for p in model.parameters())
    assert hook_count(model) == 0
    # Adam's first step is lr · g/(|g| + eps): every weight with a gradient moves by ≈ lr
    block = {name: p for name, p in before.items() if name.startswith("layers.1.")}
    expected = 1e-3 * math.sqrt(sum(p.numel() for p in block.values())) / math.sqrt(
        sum(p.pow(2).sum().item() for p in block.values()))
    assert result["update_ratio"]["layers.1"] == pytest.approx(expected, rel=0.02)
    assert result["gradient"] == pytest.approx(grad_norms_by_layer_of(model, batch), rel=1e-4)
    small = adam_first_step(model, *batch, lr=1e-5)["output_change"]
    assert 0 < small < result["output_change"]
    assert result["output_change"] / small == pytest.approx(100, rel=0.1)  # linear for small steps


def grad_norms_by_layer_of(model, batch):
    from prenorm_lib.lab.probes import gradient_norms_by_layer

    model.zero_grad(set_to_none=True)
    next_token_loss(model, *batch).backward()
    norms = gradient_norms_by_layer(model)
    model.zero_grad(set_to_none=True)
    return norms


def test_max_attention_logit_is_the_largest_visible_score(corpus, batch):
    model = build_model(corpus, seed=0, num_layers=2, qk_norm=True)
    model.train()
    x = batch[0]
    largest = 0.0
    with torch.no_grad():
        h = model.token_embeddings(x)
        for layer in model.layers:
            logits = layer.attn.attention_logits(layer.ln1(h))  # (B, H, T, T)
            visible = logits.abs().masked_fill(~causal_mask(x.shape[-1]), 0)
            largest = max(largest, visible.max().item())
            h = layer(h)
    assert max_attention_logit(model, x) == pytest.approx(largest, rel=1e-6)
    assert model.training and hook_count(model) == 0


def test_head_max_logits_is_each_heads_largest_visible_signed_score(corpus, batch):
    attn = build_model(corpus, seed=0, num_layers=1).layers[0].attn
    x = torch.randn(3, 8, 64, generator=torch.Generator().manual_seed(2))
    logits = attn.attention_logits(x).detach()  # (3, H, 8, 8)
    future = ~causal_mask(8)
    with torch.no_grad():
        logits[:, :, future] = 1e6  # a future key's score is never a candidate
    expected = logits.masked_fill(future, -math.inf).permute(1, 0, 2, 3).reshape(attn.num_heads, -1).max(dim=1).values
    monkey = pytest.MonkeyPatch()
    monkey.setattr(attn, "attention_logits", lambda *_: logits)
    try:
        found = head_max_logits(attn, x)
    finally:
        monkey.undo()
    assert found.shape == (attn.num_heads,) and torch.equal(found, expected)


def test_hidden_state_stats_are_each_depths_channel_variance_and_largest_entry(corpus, batch):
    x = batch[0]
    for norm in ("pre", "post", "sandwich"):
        model = build_model(corpus, seed=0, num_layers=3, norm=norm)
        with torch.no_grad():
            states = [model.token_embeddings(x)]
            for layer in model.layers:
                states.append(layer(states[-1]))
        stats = hidden_state_stats(model, x)
        expected = [((h - h.mean(-1, keepdim=True)) ** 2).mean(-1).mean().item() for h in states]
        assert stats["variance"] == pytest.approx(expected, rel=1e-5)
        assert stats["max_abs"] == pytest.approx([h.abs().max().item() for h in states], rel=1e-6)
        assert hook_count(model) == 0
        if norm == "post":  # RMSNorm with unit gains: mean square 1 per token, so variance just below 1
            assert all(0.9 < v <= 1.0 + 1e-5 for v in stats["variance"][1:])


def test_output_logit_stats_are_the_mean_absolute_log_partition_and_the_largest_logit():
    logits = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    logits[0] -= 40.0  # log Z far below 0 in one sequence, near +2 in the other: |log Z| is not log Z

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.anchor = torch.nn.Parameter(torch.zeros(()))  # a parameter, so the probe finds a device

        def forward(self, _ids):
            return logits

    log_z = logits.exp().sum(-1).log()  # (2, 5), written out
    stats = output_logit_stats(Fixed(), torch.zeros(2, 5, dtype=torch.long))
    assert stats["log_z"] == pytest.approx(log_z.abs().mean().item(), rel=1e-6)  # float32 inside
    assert stats["max_logit"] == pytest.approx(logits.abs().max().item(), rel=1e-6)


def test_expected_grad_norms_by_layer_pool_the_batches_gradients(corpus):
    model = build_model(corpus, seed=0, num_layers=2)
    batches = [get_batch(corpus.train_ids, 2, 16, torch.Generator().manual_seed(s)) for s in range(3)]
    model.zero_grad(set_to_none=True)
    for x, y in batches:  # .grad accumulates the sum of the three gradients
        next_token_loss(model, x, y).backward()
    expected = {}
    for name, p in model.named_parameters():
        key = probes.layer_name(name)
        expected[key] = expected.get(key, 0.0) + (p.grad / 3).pow(2).sum().item()
    model.zero_grad(set_to_none=True)
    found = expected_grad_norms_by_layer(model, batches)
    assert found == pytest.approx({k: math.sqrt(v) for k, v in expected.items()}, rel=1e-5)
    assert all(p.grad is None for p in model.parameters())
    one = expected_grad_norms_by_layer(model, batches[:1])
    assert one["layers.0"] > found["layers.0"]  # one batch's noise adds; the mean cancels some of it
    with pytest.raises(ValueError, match="batches"):
        expected_grad_norms_by_layer(model, [])


def test_stream_gradient_norms_by_sub_layer(corpus, batch):
    """Post-norm: 2L + 1 gradients; every second one is the block boundary of the plain call."""
    model = build_model(corpus, seed=2, num_layers=3, norm="post")
    by_block = stream_gradient_norms(model, *batch)
    by_sublayer = stream_gradient_norms(model, *batch, sublayers=True)
    assert len(by_sublayer) == 7
    assert by_sublayer[::2] == pytest.approx(by_block, rel=1e-6)
    z = model.layers[0].ln1(model.token_embeddings(batch[0]) + model.layers[0].attn(model.token_embeddings(batch[0])))
    z.retain_grad()
    h = model.layers[0].ln2(z + model.layers[0].ffn(z))
    for layer in model.layers[1:]:
        h = layer(h)
    torch.nn.functional.cross_entropy(model.lm_head(model.ln_final(h)).flatten(0, 1), batch[1].flatten()).backward()
    assert by_sublayer[1] == pytest.approx(z.grad.norm().item(), rel=1e-5)
    with pytest.raises(ValueError, match=r"sublayers=True needs post-norm blocks, but layers\.0 has norm='pre'"):
        stream_gradient_norms(build_model(corpus, seed=0), *batch, sublayers=True)


def test_shared_fraction_is_one_for_identical_positions_and_small_for_random_ones(corpus):
    model = build_model(corpus, seed=0, num_layers=2, norm="post")
    same_token = torch.full((2, 16), 5)
    assert shared_fraction_by_depth(model, same_token)[0] == pytest.approx(1.0)
    random_tokens = torch.randint(0, corpus.vocab_size, (4, 32), generator=torch.Generator().manual_seed(0))
    shares = shared_fraction_by_depth(model, random_tokens)
    assert len(shares) == 3 and 0 < shares[0] < 0.2
    assert hook_count(model) == 0


def test_evaluating_restores_the_mode_even_on_error():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="on purpose"), probes.evaluating(model):
        assert not model.training and not torch.is_grad_enabled()
        raise RuntimeError("on purpose")
    assert model.training and torch.is_grad_enabled()
    model.eval()
    with probes.evaluating(model):
        pass
    assert not model.training


def test_expected_ffn_gradient_is_the_gradient_of_the_batches_pooled(corpus):
    # The mean of equal-sized batches' gradients is the gradient of their pooled mean loss:
    # one backward pass on the concatenated batch is an independent reference.
    model = build_model(corpus, seed=3, ffn="relu", num_layers=2)
    generator = torch.Generator().manual_seed(5)
    batches = [get_batch(corpus.train_ids, 4, 16, generator) for _ in range(3)]
    expected = probes.expected_ffn_grad_norms(model, batches)
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    for matrix in ("w1", "w2"):
        pooled = probes.ffn_grad_norms_by_layer(model, x, y, weight=matrix)
        assert expected[matrix] == pytest.approx(pooled, rel=1e-5)
    one = probes.expected_ffn_grad_norms(model, batches[:1])["w1"]
    assert one == pytest.approx(probes.ffn_grad_norms_by_layer(model, *batches[0], weight="w1"), rel=1e-6)
    assert sorted(expected) == ["w1", "w2"]
    with pytest.raises(ValueError, match="batches must hold at least one"):
        probes.expected_ffn_grad_norms(model, [])
