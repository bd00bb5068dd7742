"""Gemma 2's logit soft-capping in attention: c·tanh(s/c) on every score, written out and checked."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib.attention import MultiHeadSelfAttention, soft_cap


def attention_pair(cap: float | None, seed: int = 0, theta: float | None = 10000.0):
    """The same weights with and without a cap."""
    torch.manual_seed(seed)
    free = MultiHeadSelfAttention(16, 4, max_seq_len=12, rope_theta=theta)
    capped = MultiHeadSelfAttention(16, 4, max_seq_len=12, rope_theta=theta, logit_softcap=cap)
    capped.load_state_dict(free.state_dict())
    return free, capped


@settings(deadline=None, max_examples=25)
@given(cap=st.floats(0.5, 60.0), scale=st.floats(0.1, 30.0), t=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_capped_attention_is_the_written_out_formula(cap, scale, t, seed):
    _, attn = attention_pair(cap, seed)
    with torch.no_grad():
        attn.q_proj.weight.mul_(scale)  # large weights: scores far beyond the cap
    x = torch.randn(2, t, 16, generator=torch.Generator().manual_seed(seed))
    q, k = attn.queries_and_keys(x)  # (2, 4, t, 4) each, rotated
    v = x @ attn.v_proj.weight.T  # (2, t, 16)
    v = v.view(2, t, 4, 4).transpose(1, 2)  # (2, 4, t, 4)
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / 2.0  # √d_head = 2
    capped = cap * torch.tanh(scores / cap)
    capped = capped.masked_fill(torch.ones(t, t).triu(1).bool(), -math.inf)
    heads = torch.softmax(capped, dim=-1) @ v  # (2, 4, t, 4)
    expected = heads.transpose(1, 2).reshape(2, t, 16) @ attn.output_proj.weight.T
    assert_close(attn(x), expected, rtol=1e-4, atol=1e-5)


def test_a_cap_far_above_every_score_changes_nothing():
    free, capped = attention_pair(1e6)
    x = torch.randn(3, 10, 16, generator=torch.Generator().manual_seed(1))
    assert_close(capped(x), free(x), rtol=1e-5, atol=1e-6)


def test_a_tight_cap_changes_the_output_and_bounds_what_the_softmax_sees():
    free, capped = attention_pair(1.0)
    x = torch.randn(3, 10, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for module in (free, capped):
            module.q_proj.weight.mul_(20.0)
    assert (free(x) - capped(x)).abs().max() > 1e-2
    raw = capped.attention_logits(x)  # before the cap: free to grow
    assert raw.abs().max() > 10 and soft_cap(raw, 1.0).abs().max() <= 1.0  # tanh rounds to 1 in float32


def test_soft_cap_is_near_the_identity_for_small_scores_and_bounded_for_large():
    x = torch.tensor([-1e4, -1.0, -1e-3, 0.0, 1e-3, 1.0, 1e4])
    y = soft_cap(x, 30.0)
    assert (y.abs() <= 30.0).all() and y[0] == pytest.approx(-30.0) and y[-1] == pytest.approx(30.0)
    assert_close(y[2:5], x[2:5], rtol=1e-6, atol=0.0)
    assert y[5] == pytest.approx(30.0 * math.tanh(1 / 30.0))


@pytest.mark.parametrize("t", [2, 7])
def test_capped_attention_is_causal(t):
    _, attn = attention_pair(5.0)
    x = torch.randn(1, t, 16)
    changed = x.clone()
    changed[:, t - 1] += 3.0
    assert torch.equal(attn(x)[:, : t - 1], attn(changed)[:, : t - 1])


@pytest.mark.parametrize(("cap", "error"), [(0.0, ValueError), (-5.0, ValueError), (True, TypeError),
                                            (float("inf"), ValueError)])
def test_a_bad_cap_is_named(cap, error):
    with pytest.raises(error, match="logit_softcap"):
        MultiHeadSelfAttention(16, 4, max_seq_len=8, logit_softcap=cap)


def lm_pair(**caps):
    """A TransformerLM with ``caps`` and the same weights without them."""
    from prenorm_lib.model import TransformerLM

    options = dict(vocab_size=40, context_length=12, d_model=16, num_layers=2, num_heads=4, d_ff=48)
    torch.manual_seed(0)
    free = TransformerLM(**options)
    capped = TransformerLM(**options, **caps)
    capped.load_state_dict(free.state_dict())
    return free, capped


def test_the_final_cap_is_soft_cap_of_the_uncapped_logits():
    free, capped = lm_pair(final_logit_softcap=2.0)
    ids = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        free.lm_head.weight.mul_(25.0)
        capped.lm_head.weight.mul_(25.0)  # logits well beyond the cap
    raw = free(ids)
    assert raw.abs().max() > 4.0
    assert_close(capped(ids), 2.0 * torch.tanh(raw / 2.0))
    assert capped(ids).abs().max() <= 2.0


def test_the_attention_cap_reaches_every_block_and_only_attention():
    free, capped = lm_pair(attn_logit_softcap=7.0)
    assert [layer.attn.logit_softcap for layer in capped.layers] == [7.0, 7.0]
    assert [layer.attn.logit_softcap for layer in free.layers] == [None, None]
    assert capped.config.final_logit_softcap is None
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(2))
    x = capped.token_embeddings(ids)
    layer = capped.layers[0]
    expected = layer.attn(layer.ln1(x))  # the block's attention: the module's own (tested above) capped path
    reference = MultiHeadSelfAttention(16, 4, max_seq_len=12, rope_theta=10000.0, logit_softcap=7.0)
    reference.load_state_dict(layer.attn.state_dict())
    assert_close(expected, reference(layer.ln1(x)))


@pytest.mark.parametrize("field", ["attn_logit_softcap", "final_logit_softcap"])
@pytest.mark.parametrize(("value", "error"), [(0.0, ValueError), (-30.0, ValueError), ("30", TypeError)])
def test_a_bad_config_cap_is_named(field, value, error):
    from prenorm_lib.config import ModelConfig

    with pytest.raises(error, match=field):
        ModelConfig(vocab_size=40, context_length=12, d_model=16, num_layers=2, num_heads=4, d_ff=48, **{field: value})
