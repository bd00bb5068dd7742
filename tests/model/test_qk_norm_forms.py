"""The two QK-norm forms: OLMo 2's over the whole projection, Qwen3's per head.

References: torch's own ``F.rms_norm`` over the named shapes and torch's fused attention.
OLMo 2 (Hugging Face ``modeling_olmo2``) normalises ``num_attention_heads * head_dim``
channels before the heads are split; Qwen3 normalises each head over ``head_dim``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from prenorm_lib import MultiHeadSelfAttention, TransformerBlock

B, T, D, H = 2, 7, 32, 4
D_HEAD = D // H


def _reference(attn: MultiHeadSelfAttention, x: torch.Tensor, form: str) -> torch.Tensor:
    def heads(t):  # (B, T, D) → (B, H, T, d_head)
        return t.view(B, T, H, D_HEAD).transpose(1, 2)

    q, k = F.linear(x, attn.q_proj.weight), F.linear(x, attn.k_proj.weight)
    if form == "flat":
        q = heads(F.rms_norm(q, (D,), attn.q_norm.weight, eps=1e-5))
        k = heads(F.rms_norm(k, (D,), attn.k_norm.weight, eps=1e-5))
    else:
        q = F.rms_norm(heads(q), (D_HEAD,), attn.q_norm.weight, eps=1e-5)
        k = F.rms_norm(heads(k), (D_HEAD,), attn.k_norm.weight, eps=1e-5)
    q, k = attn.rope(q), attn.rope(k)
    out = F.scaled_dot_product_attention(q, k, heads(F.linear(x, attn.v_proj.weight)), is_causal=True)
    return F.linear(out.transpose(1, 2).reshape(B, T, D), attn.output_proj.weight)


@pytest.mark.parametrize("form", ["flat", "per_head"])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_form_matches_torch_rms_norm_over_its_channels(form, seed):
    torch.manual_seed(seed)
    attn = MultiHeadSelfAttention(D, H, max_seq_len=16, rope_theta=10000.0, qk_norm=form, dtype=torch.float64)
    with torch.no_grad():
        attn.q_norm.weight.uniform_(0.5, 2.0)
        attn.k_norm.weight.uniform_(0.5, 2.0)
        attn.q_proj.weight[:D_HEAD].mul_(10)  # one head much louder than the others: the forms differ
    x = 3 * torch.randn(B, T, D, dtype=torch.float64)
    assert_close(attn(x), _reference(attn, x, form))
    other = "per_head" if form == "flat" else "flat"
    if form == "flat":  # the gains' shapes differ between the forms, so compare with unit gains
        with torch.no_grad():
            attn.q_norm.weight.fill_(1.0)
            attn.k_norm.weight.fill_(1.0)
        twin = MultiHeadSelfAttention(D, H, max_seq_len=16, rope_theta=10000.0, qk_norm=other, dtype=torch.float64)
        twin.load_state_dict({k: v for k, v in attn.state_dict().items() if "norm" not in k}, strict=False)
        assert not torch.allclose(attn(x), twin(x))


def test_gain_sizes_name_the_form():
    assert MultiHeadSelfAttention(D, H, qk_norm="flat").q_norm.weight.shape == (D,)
    assert MultiHeadSelfAttention(D, H, qk_norm="per_head").q_norm.weight.shape == (D_HEAD,)
    assert MultiHeadSelfAttention(D, H, qk_norm=True).qk_norm == "per_head"
    assert MultiHeadSelfAttention(D, H, qk_norm=False).qk_norm is None
    block = TransformerBlock(D, H, 64, max_seq_len=8, norm="reordered", qk_norm="flat")
    assert block.attn.k_norm.weight.shape == (D,)


def test_flat_form_bounds_the_logits_by_the_whole_width_with_unit_gains():
    """‖q_h‖ ≤ ‖q‖ = √D at unit gains, so |q_h·k_h|/√d_head ≤ D/√d_head whatever W_q, W_k do."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(D, H, max_seq_len=16, qk_norm="flat")
    with torch.no_grad():
        attn.q_proj.weight.mul_(100)
        attn.k_proj.weight.mul_(100)
    logits = attn.attention_logits(torch.randn(B, 10, D))
    assert logits.abs().max() <= D / D_HEAD**0.5 + 1e-3
    with torch.no_grad():  # learnt gains lift the bound: it is the gains', not the weights'
        attn.q_norm.weight.fill_(10.0)
    assert attn.attention_logits(torch.randn(B, 10, D)).abs().max() > D / D_HEAD**0.5


@pytest.mark.parametrize("bad", ["olmo", "Flat", 1, 0.5])
def test_unknown_form_is_refused_with_its_name(bad):
    with pytest.raises((ValueError, TypeError), match="qk_norm"):
        MultiHeadSelfAttention(D, H, qk_norm=bad)
