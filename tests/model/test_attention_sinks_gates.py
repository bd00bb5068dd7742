"""The attention options of notebook 04's "sinks and gates": gpt-oss's learned sink logit and
Qiu et al.'s sigmoid gate after SDPA, each against its formula written out from the source.

gpt-oss's reference ``sdpa`` (openai/gpt-oss, ``gpt_oss/torch/model.py``) appends the head's
sink logit to every row of scores as one more column, takes the softmax and drops that column;
Qiu et al.'s code (qiuzh20/gated_attention, ``modeling_qwen3.py``) multiplies each head's SDPA
output by ``torch.sigmoid(gate_score)``, the gate scores computed from the layer's input, one
per head (headwise) or per channel (elementwise), before the output projection.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.attention import GATES, MultiHeadSelfAttention

seeds = st.integers(0, 2**16)


def heads_of(layer: MultiHeadSelfAttention, t: torch.Tensor) -> torch.Tensor:
    """(B, T, d_model) → (B, H, T, d_head), written out."""
    B, T, _ = t.shape
    return t.view(B, T, layer.num_heads, layer.d_head).transpose(1, 2)


def gpt_oss_sdpa(q, k, v, sinks, sm_scale):
    """gpt-oss's reference attention with sinks, for (B, H, T, d) tensors: the sink is a last column, dropped."""
    B, H, T, _ = q.shape
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * sm_scale
    scores = scores + torch.triu(q.new_full((T, T), -float("inf")), diagonal=1)
    scores = torch.cat([scores, sinks.reshape(1, H, 1, 1).expand(B, H, T, 1)], dim=-1)
    weights = torch.softmax(scores, dim=-1)[..., :-1]
    return torch.einsum("bhqk,bhkd->bhqd", weights, v)


def reference_forward(layer: MultiHeadSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """The module's computation from the sources' formulas: projections, RoPE, (sink) attention, (gate), output."""
    q, k = layer.queries_and_keys(x)  # projected and rotated, (B, H, T, d_head)
    v = heads_of(layer, F.linear(x, layer.v_proj.weight))
    if layer.sink_logits is not None:
        out = gpt_oss_sdpa(q, k, v, layer.sink_logits, 1 / math.sqrt(layer.d_head))
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = out.transpose(1, 2)  # (B, T, H, d_head), Qiu et al.'s layout before the gate
    if layer.gate is not None:
        gate_score = F.linear(x, layer.gate_proj.weight)  # (B, T, H) or (B, T, d_model)
        gate_score = gate_score.reshape(*x.shape[:2], layer.num_heads, -1)  # (B, T, H, 1 or d_head)
        out = out * torch.sigmoid(gate_score)
    return F.linear(out.reshape(*x.shape), layer.output_proj.weight)


@pytest.mark.parametrize("gate", [None, *GATES])
@pytest.mark.parametrize("sink", [False, True])
@given(seed=seeds, seq_len=st.integers(1, 9), num_heads=st.sampled_from([1, 2, 4]))
@settings(max_examples=15, deadline=None)
def test_module_matches_the_sources_formulas(gate, sink, seed, seq_len, num_heads):
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention(16, num_heads, max_seq_len=16, rope_theta=10000.0, gate=gate, sink=sink)
    if sink:
        with torch.no_grad():
            layer.sink_logits.normal_(0, 2)  # not the initial 0: every head its own logit
    x = torch.randn(2, seq_len, 16)
    assert_close(layer(x), reference_forward(layer, x))


def test_default_module_has_neither_option():
    layer = MultiHeadSelfAttention(16, 4)
    assert layer.gate is None and layer.sink_logits is None
    assert set(layer.state_dict()) == {"q_proj.weight", "k_proj.weight", "v_proj.weight", "output_proj.weight"}


@pytest.mark.parametrize(("gate", "extra"), [("headwise", 64 * 4), ("elementwise", 64 * 64)])
def test_a_gate_adds_d_model_weights_per_head_or_per_channel(gate, extra):
    plain, gated = MultiHeadSelfAttention(64, 4), MultiHeadSelfAttention(64, 4, gate=gate)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(gated) - count(plain) == extra
    assert tuple(gated.gate_proj.weight.shape) == (extra // 64, 64)


def test_a_sink_adds_one_logit_per_head_starting_at_zero():
    layer = MultiHeadSelfAttention(16, 4, sink=True)
    assert tuple(layer.sink_logits.shape) == (4,)
    assert (layer.sink_logits == 0).all()


def test_sink_at_minus_infinity_is_plain_attention():
    torch.manual_seed(0)
    plain = MultiHeadSelfAttention(16, 4, max_seq_len=8, rope_theta=10000.0)
    sunk = MultiHeadSelfAttention(16, 4, max_seq_len=8, rope_theta=10000.0, sink=True)
    sunk.load_state_dict({**plain.state_dict(), "sink_logits": torch.full((4,), -float("inf"))})
    x = torch.randn(3, 8, 16)
    assert_close(sunk(x), plain(x))
    assert_close(sunk.attention_weights(x).sum(-1), torch.ones(3, 4, 8))


def test_the_sink_takes_its_share_of_every_row():
    """Row sums are 1 − exp(s) / (exp(s) + Σ exp(scores)): what the sink holds, no token gets."""
    torch.manual_seed(1)
    layer = MultiHeadSelfAttention(16, 2, sink=True)
    with torch.no_grad():
        layer.sink_logits.copy_(torch.tensor([3.0, -1.0]))
    x = torch.randn(1, 6, 16)
    scores = layer.attention_logits(x).masked_fill(~functional.causal_mask(6), -float("inf"))  # (1, 2, 6, 6)
    sink = layer.sink_logits[:, None, None]
    share = torch.exp(sink) / (torch.exp(sink) + torch.exp(scores).sum(-1, keepdim=True))  # (1, 2, 6, 1)
    assert_close(layer.attention_weights(x).sum(-1), 1 - share.squeeze(-1))
    assert (layer.attention_weights(x).sum(-1) < 1).all()


def test_a_closed_gate_at_zero_weights_halves_every_head():
    """σ(0) = ½: with gate weights 0 the gated layer equals the plain one with its output halved."""
    torch.manual_seed(2)
    plain = MultiHeadSelfAttention(16, 4)
    gated = MultiHeadSelfAttention(16, 4, gate="headwise")
    gated.load_state_dict({**plain.state_dict(), "gate_proj.weight": torch.zeros(4, 16)})
    x = torch.randn(2, 5, 16)
    assert_close(gated(x), plain(x) / 2)


def test_the_headwise_gate_is_one_number_per_head_and_token():
    """Every channel of a head is scaled by the same factor: the ratio gated/ungated is constant within a head."""
    torch.manual_seed(3)
    layer = MultiHeadSelfAttention(16, 4, gate="headwise")
    x = torch.randn(1, 5, 16)
    heads = layer.fused_heads(x)  # (1, 4, 5, 4)
    ratio = layer.gate_heads(x, heads) / heads
    assert_close(ratio, ratio[..., :1].expand_as(ratio))
    assert ((ratio > 0) & (ratio < 1)).all()


@pytest.mark.parametrize(("gate", "sink"), [("headwise", False), ("elementwise", False), (None, True),
                                            ("headwise", True)])
@pytest.mark.parametrize("t", [0, 3, 6])
def test_gated_and_sink_attention_stay_causal(gate, sink, t):
    torch.manual_seed(4)
    layer = MultiHeadSelfAttention(16, 4, max_seq_len=8, rope_theta=10000.0, gate=gate, sink=sink)
    x = torch.randn(2, 8, 16)
    changed = x.clone()
    changed[:, t] = torch.randn(2, 16)
    assert torch.equal(layer(changed)[:, :t], layer(x)[:, :t])


def test_the_new_parameters_receive_gradients():
    layer = MultiHeadSelfAttention(16, 4, gate="headwise", sink=True)
    layer(torch.randn(2, 6, 16)).square().sum().backward()
    assert layer.gate_proj.weight.grad.abs().sum() > 0
    assert layer.sink_logits.grad.abs().sum() > 0


def test_attention_weights_are_what_the_values_are_averaged_with():
    torch.manual_seed(5)
    layer = MultiHeadSelfAttention(16, 4, max_seq_len=8, rope_theta=10000.0)
    x = torch.randn(2, 8, 16)
    weights = layer.attention_weights(x)  # (2, 4, 8, 8)
    assert_close(weights @ layer.split_heads(layer.v_proj(x)), layer.fused_heads(x))
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))  # nothing on the future


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="gate"):
        MultiHeadSelfAttention(16, 4, gate="per_token")
    with pytest.raises(TypeError, match="sink must be True or False"):
        MultiHeadSelfAttention(16, 4, sink="yes")


# ---- the kernel: softmax with a sink -----------------------------------------------------


@given(lead=st.lists(st.integers(1, 3), min_size=1, max_size=3), n=st.integers(1, 9), seed=seeds)
def test_softmax_with_sink_is_a_softmax_over_one_more_column_dropped(lead, n, seed):
    torch.manual_seed(seed)
    x, sink = torch.randn(*lead, n) * 3, torch.randn(*lead[:-1], 1, 1) * 3
    full = torch.softmax(torch.cat([x, sink.expand(*lead, 1)], dim=-1), dim=-1)
    assert_close(functional.softmax_with_sink(x, sink), full[..., :-1])


def test_softmax_with_sink_stays_finite_for_large_logits():
    x = torch.tensor([1000.0, 1001.0, 1002.0])
    for sink in (torch.tensor(1003.0), torch.tensor(-1000.0)):
        weights = functional.softmax_with_sink(x, sink)
        assert torch.isfinite(weights).all()
        assert_close(weights, functional.softmax_with_sink(x - 1000, sink - 1000))


def test_softmax_with_sink_at_minus_infinity_is_softmax_along_any_dim():
    x = torch.randn(3, 4, 5)
    for dim in (0, 1, -1):
        assert_close(functional.softmax_with_sink(x, torch.tensor(-float("inf")), dim=dim), torch.softmax(x, dim))


def test_softmax_with_sink_refuses_a_sink_that_differs_along_dim():
    with pytest.raises(ValueError, match="sink must broadcast against x"):
        functional.softmax_with_sink(torch.randn(2, 5), torch.randn(5))


# ---- the model's config ------------------------------------------------------------------


def test_model_config_builds_the_options_into_every_layer():
    from prenorm_lib.config import ModelConfig
    from prenorm_lib.model import TransformerLM

    model = TransformerLM(50, 16, 32, 3, 4, 64, attn_gate="elementwise", attn_sink=True)
    assert all(layer.attn.gate == "elementwise" and layer.attn.sink_logits is not None for layer in model.layers)
    assert model(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 50)
    plain = TransformerLM(50, 16, 32, 3, 4, 64)
    assert all(layer.attn.gate is None and layer.attn.sink_logits is None for layer in plain.layers)
    with pytest.raises(ValueError, match="attn_gate must be one of"):
        ModelConfig(50, 16, 32, 3, 4, 64, attn_gate="per_token")
    with pytest.raises(TypeError, match="attn_sink must be True or False"):
        ModelConfig(50, 16, 32, 3, 4, 64, attn_sink=1)
