"""Grouped-query attention and the KV cache (notebook 06, section 10): both default-off options of
``MultiHeadSelfAttention``, checked against a reconstruction with the from-scratch kernel and against
the module run on the whole sequence."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.attention import KVCache, MultiHeadSelfAttention, causal_mask_after
from prenorm_lib.rope import RotaryPositionalEmbedding


def grouped_from_scratch(attn: MultiHeadSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """GQA written out: each key/value head repeated for the query heads of its group, then plain attention."""
    B, T, _ = x.shape
    H, H_kv, d_head = attn.num_heads, attn.num_kv_heads, attn.d_head
    q = F.linear(x, attn.q_proj.weight).view(B, T, H, d_head).transpose(1, 2)
    k = F.linear(x, attn.k_proj.weight).view(B, T, H_kv, d_head).transpose(1, 2)
    v = F.linear(x, attn.v_proj.weight).view(B, T, H_kv, d_head).transpose(1, 2)
    rope = RotaryPositionalEmbedding(10000.0, d_head, max_seq_len=64)
    q, k = rope(q, torch.arange(T)), rope(k, torch.arange(T))
    group = H // H_kv
    k = torch.stack([k[:, h // group] for h in range(H)], dim=1)  # query head h reads key head h // group
    v = torch.stack([v[:, h // group] for h in range(H)], dim=1)
    out = functional.scaled_dot_product_attention(q, k, v, functional.causal_mask(T))
    return F.linear(out.transpose(1, 2).reshape(B, T, -1), attn.output_proj.weight)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4, 8])
def test_grouped_query_attention_equals_its_reconstruction(num_kv_heads):
    attn = MultiHeadSelfAttention(64, 8, max_seq_len=64, rope_theta=10000.0, num_kv_heads=num_kv_heads,
                                  dtype=torch.float64)
    assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (num_kv_heads * 8, 64)
    x = torch.randn(2, 9, 64, dtype=torch.float64)
    assert_close(attn(x), grouped_from_scratch(attn, x))


def test_the_groups_are_contiguous_not_strided():
    """Key head 0 serves query heads 0 and 1 (repeat_interleave), not 0 and 2 (repeat): changing key head 1
    changes query heads 2 and 3 only."""
    attn = MultiHeadSelfAttention(16, 4, max_seq_len=16, rope_theta=10000.0, num_kv_heads=2, dtype=torch.float64)
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    before = attn.attention_logits(x)
    with torch.no_grad():
        attn.k_proj.weight[4:] *= 3  # key head 1's rows
    after = attn.attention_logits(x)
    changed = [(after[0, h] - before[0, h]).abs().max().item() > 1e-9 for h in range(4)]
    assert changed == [False, False, True, True]


def test_mha_is_the_default_and_checks_the_grouping():
    assert MultiHeadSelfAttention(16, 4).num_kv_heads == 4
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=4"):
        MultiHeadSelfAttention(16, 4, num_kv_heads=3)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("chunks", [(1,) * 10, (4, 1, 1, 3, 1), (10,)])
def test_decoding_through_the_cache_equals_the_whole_sequence(num_kv_heads, chunks):
    attn = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=500.0, num_kv_heads=num_kv_heads,
                                  dtype=torch.float64)
    x = torch.randn(2, 10, 32, dtype=torch.float64)
    whole = attn(x)
    attn.kv_cache = KVCache()
    pieces, start = [], 0
    for size in chunks:
        pieces.append(attn(x[:, start:start + size]))
        start += size
    assert_close(torch.cat(pieces, dim=1), whole)
    assert attn.kv_cache.length == 10
    assert attn.kv_cache.keys.shape == (2, num_kv_heads, 10, 8)
    assert attn.kv_cache.nbytes == 2 * 2 * num_kv_heads * 10 * 8 * 8  # keys and values, float64


def test_a_cache_left_out_changes_the_answer():
    """The contrast: one token alone, without what came before, is not the last row of the whole."""
    attn = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=500.0)
    x = torch.randn(1, 6, 32)
    assert (attn(x[:, -1:], torch.tensor([5])) - attn(x)[:, -1:]).abs().max() > 1e-3


def test_the_mask_after_a_cache():
    assert causal_mask_after(2, 3).tolist() == [[True, True, True, False, False],
                                                [True, True, True, True, False],
                                                [True, True, True, True, True]]
    assert torch.equal(causal_mask_after(0, 4), functional.causal_mask(4))


def test_the_cache_refuses_keys_that_do_not_continue_it():
    cache = KVCache()
    cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="only the token axis"):
        cache.update(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(ValueError, match="same leading shape"):
        cache.update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 2, 4))


def test_grouped_heads_with_a_sink_or_a_gate_and_a_cache_with_a_gate():
    """The options of notebook 04 (sink, gate) and 06 (GQA, KV cache) together: GQA takes either path; a cache
    follows the fused path (with a gate too) and a module with a sink refuses it."""
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    sink = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=500.0, num_kv_heads=2, sink=True,
                                  dtype=torch.float64)
    with torch.no_grad():
        sink.sink_logits.fill_(-1e4)  # a sink of weight ~0 is the plain softmax: the fused GQA path's answer
    plain = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=500.0, num_kv_heads=2, dtype=torch.float64)
    plain.load_state_dict({k: v for k, v in sink.state_dict().items() if k != "sink_logits"})
    assert_close(sink(x), plain(x))
    gated = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=500.0, num_kv_heads=2, gate="headwise",
                                   dtype=torch.float64)
    whole = gated(x)
    gated.kv_cache = KVCache()
    assert_close(torch.cat([gated(x[:, :5]), gated(x[:, 5:])], dim=1), whole)
    sink.kv_cache = KVCache()
    with pytest.raises(ValueError, match="a module with sink=True"):
        sink(x)
