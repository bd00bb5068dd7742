"""Attention: the from-scratch kernel against torch's fused one, the module against the kernel.

Causality is checked end to end: changing token t must leave every output before t
untouched, in the attention module, in a block (all three norm placements) and in the
whole language model.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.model import TransformerLM
from prenorm_lib.rope import RotaryPositionalEmbedding

seeds = st.integers(0, 2**16)
leading_dims = st.lists(st.integers(1, 3), min_size=0, max_size=2)


@given(lead=leading_dims, n_q=st.integers(1, 9), n_k=st.integers(1, 9), d_k=st.integers(1, 16),
       d_v=st.integers(1, 16), seed=seeds)
def test_kernel_matches_torch_without_mask(lead, n_q, n_k, d_k, d_v, seed):
    torch.manual_seed(seed)
    Q, K, V = torch.randn(*lead, n_q, d_k), torch.randn(*lead, n_k, d_k), torch.randn(*lead, n_k, d_v)
    assert_close(functional.scaled_dot_product_attention(Q, K, V), F.scaled_dot_product_attention(Q, K, V))


@given(lead=leading_dims, seq_len=st.integers(1, 9), d_k=st.integers(1, 16), seed=seeds)
def test_kernel_with_causal_mask_matches_torch_is_causal(lead, seq_len, d_k, seed):
    torch.manual_seed(seed)
    Q, K, V = (torch.randn(*lead, seq_len, d_k) for _ in range(3))
    ours = functional.scaled_dot_product_attention(Q, K, V, functional.causal_mask(seq_len))
    assert_close(ours, F.scaled_dot_product_attention(Q, K, V, is_causal=True))


@given(lead=leading_dims, n_q=st.integers(1, 9), n_k=st.integers(1, 9), d_k=st.integers(1, 16), seed=seeds)
def test_kernel_with_random_boolean_mask_matches_torch(lead, n_q, n_k, d_k, seed):
    torch.manual_seed(seed)
    Q, K, V = torch.randn(*lead, n_q, d_k), torch.randn(*lead, n_k, d_k), torch.randn(*lead, n_k, d_k)
    mask = torch.rand(*lead, n_q, n_k) < 0.5
    always_visible = torch.randint(0, n_k, (*lead, n_q, 1))
    mask.scatter_(-1, always_visible, True)  # no query row is fully masked
    ours = functional.scaled_dot_product_attention(Q, K, V, mask)
    assert_close(ours, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask))


def test_kernel_accepts_a_mask_that_broadcasts_like_torchs():
    """The docstring promises a mask "broadcastable to (..., n_queries, n_keys)", e.g. a
    key-padding mask (B, 1, 1, n_keys) shared by every head and query, as torch accepts."""
    Q, K, V = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    key_padding = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]  # (B, 1, 1, n_keys)
    ours = functional.scaled_dot_product_attention(Q, K, V, key_padding)
    assert_close(ours, F.scaled_dot_product_attention(Q, K, V, attn_mask=key_padding))


def test_masked_keys_get_exactly_zero_weight():
    Q, K = torch.randn(1, 4), torch.randn(3, 4)
    V = torch.eye(3)  # output row = attention weights
    weights = functional.scaled_dot_product_attention(Q, K, V, torch.tensor([[True, False, True]]))
    assert weights[0, 1] == 0
    assert_close(weights.sum(), torch.tensor(1.0))


def attention_from_scratch(
    attn: MultiHeadSelfAttention, x: torch.Tensor, positions: torch.Tensor | None, theta: float | None
) -> torch.Tensor:
    """Rebuild the module's forward with its own weights, explicit head reshapes and the from-scratch kernel."""
    B, T, d_model = x.shape
    H = attn.num_heads
    d_head = d_model // H

    def heads(weight):  # (B, T, d_model) → (B, H, T, d_head)
        return F.linear(x, weight).view(B, T, H, d_head).transpose(1, 2)

    q, k, v = heads(attn.q_proj.weight), heads(attn.k_proj.weight), heads(attn.v_proj.weight)
    if theta is not None:
        rope = RotaryPositionalEmbedding(theta, d_head, max_seq_len=64)
        per_row = torch.arange(T).expand(B, T) if positions is None else positions.expand(B, T)
        q = torch.stack([rope(q[b], per_row[b]) for b in range(B)])
        k = torch.stack([rope(k[b], per_row[b]) for b in range(B)])
    out = functional.scaled_dot_product_attention(q, k, v, functional.causal_mask(T))  # (B, H, T, d_head)
    return F.linear(out.transpose(1, 2).reshape(B, T, d_model), attn.output_proj.weight)


@pytest.mark.parametrize("theta", [None, 10000.0])
@pytest.mark.parametrize("positions", ["default", "shared", "per_row"])
def test_module_equals_reconstruction_with_from_scratch_kernel(theta, positions):
    attn = MultiHeadSelfAttention(32, 4, max_seq_len=64, rope_theta=theta, dtype=torch.float64)
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    token_positions = {
        "default": None,
        "shared": torch.arange(5, 12),  # (T,)
        "per_row": torch.stack((torch.arange(7), torch.tensor([9, 3, 4, 40, 41, 0, 1]))),  # (B, T)
    }[positions]
    expected = attention_from_scratch(attn, x, token_positions, theta)
    assert_close(attn(x, token_positions), expected)


def test_rope_positions_change_the_module_output():
    """Without this contrast the previous test would pass for a module that ignored positions."""
    attn = MultiHeadSelfAttention(16, 2, max_seq_len=64, rope_theta=10000.0)
    x = torch.randn(1, 5, 16)
    assert (attn(x) - attn(x, torch.tensor([0, 3, 9, 20, 50]))).abs().max() > 1e-4


def test_module_accepts_unbatched_and_extra_leading_dims():
    attn = MultiHeadSelfAttention(16, 2, max_seq_len=32, rope_theta=10000.0)
    x = torch.randn(2, 3, 6, 16)
    batched = attn(x)
    assert batched.shape == x.shape
    assert_close(attn(x[1, 2]), batched[1, 2])


def assert_causal(run, x_before: torch.Tensor, x_after: torch.Tensor, t: int) -> None:
    """Outputs before position t agree; the output at t (which sees the change) differs."""
    before, after = run(x_before), run(x_after)
    assert_close(after[:, :t], before[:, :t])
    assert (after[:, t] - before[:, t]).abs().max() > 1e-6


@pytest.mark.parametrize("t", [0, 3, 7])
def test_attention_is_causal(t):
    attn = MultiHeadSelfAttention(16, 4, max_seq_len=16, rope_theta=10000.0)
    x = torch.randn(2, 8, 16)
    changed = x.clone()
    changed[:, t] += torch.randn(16)
    assert_causal(attn, x, changed, t)


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("t", [1, 5])
def test_block_is_causal(norm, t):
    block = TransformerBlock(16, 4, 32, max_seq_len=16, norm=norm)
    x = torch.randn(2, 8, 16)
    changed = x.clone()
    changed[:, t] = torch.randn(16)
    assert_causal(block, x, changed, t)


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("t", [2, 6])
def test_language_model_is_causal(norm, t):
    model = TransformerLM(50, 16, 16, 2, 4, 32, norm=norm)
    tokens = torch.randint(0, 50, (2, 8))
    changed = tokens.clone()
    changed[:, t] = (tokens[:, t] + 1) % 50
    assert_causal(model, tokens, changed, t)


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadSelfAttention(30, 4)


# ---- QK-norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("theta", [None, 10000.0])
def test_qk_norm_matches_torch_rms_norm_per_head(theta):
    """QK-norm rebuilt from torch's own rms_norm (per head, over d_head, with the gains) and SDPA."""
    attn = MultiHeadSelfAttention(32, 4, max_seq_len=16, rope_theta=theta, qk_norm=True, dtype=torch.float64)
    with torch.no_grad():
        attn.q_norm.weight.uniform_(0.5, 2.0)
        attn.k_norm.weight.uniform_(0.5, 2.0)
    x = 5 * torch.randn(2, 7, 32, dtype=torch.float64)

    def heads(weight):  # (B, T, d_model) → (B, H, T, d_head)
        return F.linear(x, weight).view(2, 7, 4, 8).transpose(1, 2)

    q = F.rms_norm(heads(attn.q_proj.weight), (8,), attn.q_norm.weight, eps=1e-5)
    k = F.rms_norm(heads(attn.k_proj.weight), (8,), attn.k_norm.weight, eps=1e-5)
    if theta is not None:
        q, k = attn.rope(q), attn.rope(k)
    out = F.scaled_dot_product_attention(q, k, heads(attn.v_proj.weight), is_causal=True)
    expected = F.linear(out.transpose(1, 2).reshape(2, 7, 32), attn.output_proj.weight)
    assert_close(attn(x), expected)


def test_qk_norm_bounds_the_logits_whatever_the_weight_scale():
    """|q·k|/√d_head ≤ √d_head · max|g_q| · max|g_k|: scaling W_q, W_k by 100 leaves the logits bounded."""
    torch.manual_seed(0)
    plain = MultiHeadSelfAttention(32, 4, max_seq_len=16)
    normed = MultiHeadSelfAttention(32, 4, max_seq_len=16, qk_norm=True)
    normed.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():
        for attn in (plain, normed):
            attn.q_proj.weight.mul_(100)
            attn.k_proj.weight.mul_(100)
    x = torch.randn(2, 10, 32)
    assert plain.attention_logits(x).abs().max() > 1e3
    assert normed.attention_logits(x).abs().max() <= 8**0.5 + 1e-4  # d_head = 8, unit gains


def test_attention_logits_are_the_scores_the_softmax_sees():
    attn = MultiHeadSelfAttention(16, 2, max_seq_len=8, rope_theta=10000.0, qk_norm=True, dtype=torch.float64)
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    weights = torch.softmax(attn.attention_logits(x).masked_fill(~functional.causal_mask(5), float("-inf")), -1)
    v = attn.split_heads(attn.v_proj(x))
    expected = attn.output_proj((weights @ v).transpose(1, 2).flatten(-2))
    assert_close(attn(x), expected)


@pytest.mark.parametrize("norm", ["sandwich", "reordered", "deepnorm", "rezero"])
@pytest.mark.parametrize("t", [1, 5])
def test_frontier_blocks_are_causal(norm, t):
    block = TransformerBlock(16, 4, 32, max_seq_len=16, norm=norm, qk_norm=True, num_layers=2)
    if norm == "rezero":
        with torch.no_grad():
            block.alpha_attn.fill_(0.5)
    x = torch.randn(2, 8, 16)
    changed = x.clone()
    changed[:, t] = torch.randn(16)
    assert_causal(block, x, changed, t)
