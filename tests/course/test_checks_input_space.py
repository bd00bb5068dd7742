"""Checkers cover their input space (issue 31, item 3).

Every checker draws its inputs per check across the kinds a correct answer must handle,
and every argument the exercise takes (eps, d_model, dtype, rope_theta, the widths, dim)
is drawn too. So an answer special-cased to the kinds the checker used to send — θ written
in as 10000, a softmax that subtracts the maximum only when some entry is large, an RMSNorm
with d_model written in — fails. And nan or inf never passes a numeric answer.

Each special-cased answer is checked several times: a check draws afresh, and each
draw must catch it (the ones that can only be caught on some draws say how often).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from prenorm_lib import functional
from prenorm_lib.checks import Hint, attention, block, ffn, rmsnorm, rope
from prenorm_lib.checks.core import expect_choice, finite_number
from prenorm_lib.layers import Linear
from prenorm_lib.rope import RotaryPositionalEmbedding

pytest_plugins = ["learner_wire"]

DRAWS = 4  # checks per special-cased answer: every one must fail


def fails_every_time(check, learner, pattern: str, draws: int = DRAWS) -> list[str]:
    """Run ``check`` ``draws`` times; each must end in a Hint matching ``pattern``. Returns the hints."""
    hints = []
    for _ in range(draws):
        with pytest.raises(Hint, match=pattern) as info:
            check.core(learner)
        hints.append(info.value.hint)
    return hints


# --- nan and inf never answer a numeric question ----------------------------------------------


@pytest.mark.parametrize("answer", [float("nan"), float("inf"), -float("inf"), torch.tensor(float("nan")),
                                    np.float64("nan"), np.float32("inf")])
def test_nan_and_inf_never_pass_the_spread_of_q_dot_k(answer, via):
    with pytest.raises(Hint, match=r"^Exercise 4\.2: answer with one number.*is not a finite number"):
        attention.score_spread.core(via(answer))


@pytest.mark.parametrize("answer", [float("nan"), float("inf"), torch.tensor(float("-inf"))])
def test_nan_and_inf_never_pass_the_long_range_pair(answer, via):
    """int(nan) raised ValueError inside the checker before; now it is a hint."""
    with pytest.raises(Hint, match=r"^Exercise 3\.3: answer with one whole number.*is not a finite number"):
        rope.long_range_pair.core(via(answer))


def test_finite_number_reads_numbers_and_nothing_else():
    assert finite_number(8) == 8.0 and finite_number(np.float32(2.5)) == 2.5 and finite_number(torch.tensor(3)) == 3
    for value in (float("nan"), float("inf"), True, "8", [8], torch.ones(2), torch.tensor(1 + 2j), np.bool_(True),
                  torch.empty((), device="meta"), np.complex128(8), None):
        assert finite_number(value) is None, value


def test_a_prediction_may_still_name_inf():
    """Exercise 1.3's choices include "inf": there float('inf') is that choice, not a number."""
    expect_choice("1.3", float("inf"), ("inf", "nan", "0"), "inf", "why")


# --- 1.1 and 1.2: eps, d_model and dtype are drawn ----------------------------------------------


def kernel_with_d_model_8(x, weight, eps):
    """Divides the sum of squares by 8, the width of the notebook's example, instead of taking the mean."""
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).sum(-1, keepdim=True) / 8 + eps) * weight.float()).to(x.dtype)


def kernel_with_the_old_eps_values(x, weight, eps):
    """Reads eps only when it is the 0.5 the checker used to send; 1e-5 otherwise."""
    eps = eps if eps == 0.5 else 1e-5
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def test_an_rms_norm_kernel_with_d_model_written_in_fails(via):
    fails_every_time(rmsnorm.rms_norm, via(kernel_with_d_model_8), r"^Exercise 1\.1: ")


def test_an_rms_norm_kernel_reading_only_the_old_eps_fails(via):
    fails_every_time(rmsnorm.rms_norm, via(kernel_with_the_old_eps_values),
                     r"^Exercise 1\.1: on eps = .*ignores the `eps` argument")


def norm_module(d_of=lambda d: d, eps_of=lambda eps: eps, dtype_of=lambda dtype: dtype):
    """A correct RMSNorm module, except for what the three functions do to its arguments."""

    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.eps = eps_of(eps)
            self.weight = nn.Parameter(torch.ones(d_of(d_model), device=device, dtype=dtype_of(dtype)))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)

    return Norm


def test_an_rms_norm_module_with_d_model_written_in_fails(via):
    fails_every_time(rmsnorm.rms_norm_module, via(norm_module(d_of=lambda d: 8)),
                     r"^Exercise 1\.2: self\.weight has shape \(8,\), expected \(\d+,\)")


def test_an_rms_norm_module_reading_only_the_old_eps_fails(via):
    fails_every_time(rmsnorm.rms_norm_module, via(norm_module(eps_of=lambda eps: eps if eps == 0.5 else 1e-5)),
                     r"^Exercise 1\.2: the module ignores eps")


def test_an_rms_norm_module_honouring_only_float64_fails():
    """The dtype asked for is one of three per check, so this is caught on two draws in three: of 20 checks,
    all pass with probability (1/3)^20 < 1e-9."""
    learner = norm_module(dtype_of=lambda dtype: dtype if dtype == torch.float64 else None)
    outcomes = []
    for _ in range(20):
        try:
            rmsnorm.rms_norm_module.core(learner)
            outcomes.append("passed")
        except Hint as hint:
            assert "was ignored — pass dtype= on to torch.ones" in hint.hint
            outcomes.append("hint")
    assert "hint" in outcomes


# --- 2.2: the widths are drawn ------------------------------------------------------------------


def swiglu_to_width_8(x, w1, w2, w3):
    """Right, then reshaped to the notebook's d_model = 8."""
    out = (functional.silu(x @ w1.T) * (x @ w3.T)) @ w2.T
    return out.reshape(*x.shape[:-1], 8)


def test_a_swiglu_with_the_width_written_in_fails(via):
    fails_every_time(ffn.swiglu, via(swiglu_to_width_8), r"^Exercise 2\.2: ")


# --- 3.1, 3.2: d_k and Θ are drawn ----------------------------------------------------------------


def cache_with_d_k_8(theta, d_k, max_seq_len):
    """The speeds of d_k = 8 whatever d_k is asked for."""
    speeds = theta ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), speeds)
    return angles.cos().float(), angles.sin().float()


def test_a_cache_with_d_k_written_in_fails(via):
    fails_every_time(rope.cos_sin_cache, via(cache_with_d_k_8), r"^Exercise 3\.1: returned shape")


def rotation_with_theta_10000(x, cos, sin):
    """Ignores the cos/sin it is given and rebuilds them with Θ = 10000 for positions 0 … T−1."""
    angles = functional.rope_angles(10000.0, x.shape[-1], x.shape[-2])
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def test_a_rotation_with_theta_written_in_fails(via):
    fails_every_time(rope.rotate_pairs, via(rotation_with_theta_10000), r"^Exercise 3\.2: ")


# --- 4.1: rows of large negative and of large positive logits -----------------------------------


def softmax_shifting_only_large_inputs(x, dim):
    """Subtracts the maximum only when some entry is large: 0/0 on a row of large negative logits."""
    if x.amax() > 50:
        x = x - x.amax(dim=dim, keepdim=True)
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_shifting_only_large_rows(x, dim):
    """Subtracts each row's maximum only in rows whose maximum is large."""
    peak = x.amax(dim=dim, keepdim=True)
    exp = torch.exp(torch.where(peak > 50, x - peak, x))
    return exp / exp.sum(dim=dim, keepdim=True)


@pytest.mark.parametrize("learner", [softmax_shifting_only_large_inputs, softmax_shifting_only_large_rows])
def test_a_softmax_that_subtracts_the_maximum_only_when_it_is_large_fails(learner, via):
    for hint in fails_every_time(attention.stable_softmax, via(learner), r"^Exercise 4\.1: "):
        assert "rows near 0 and near −100 … −1000" in hint
        assert "underflows to 0 for a row of very negative ones" in hint


def softmax_sum_without_keepdim(x, dim):
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim)


def test_a_softmax_whose_sum_dropped_its_dimension_gets_a_hint(via):
    """Issue 28, item 3: a raw RuntimeError before; now the dimension the sum dropped is named."""
    for hint in fails_every_time(attention.stable_softmax, via(softmax_sum_without_keepdim), r"^Exercise 4\.1: "):
        assert "dropped" in hint, hint


# --- 4.3: the sizes are drawn ---------------------------------------------------------------------


def attention_scaled_by_sqrt_8(Q, K, V, mask=None):
    """Divides by √8, the d_k of the old first case, instead of √d_k."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(8)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V


def test_attention_with_d_k_written_in_fails(via):
    fails_every_time(attention.attention, via(attention_scaled_by_sqrt_8), r"^Exercise 4\.3: ")


# --- 4.4: every constructor argument is drawn -------------------------------------------------------


def layer(theta_of=lambda theta: theta, heads_of=lambda h: h, transpose=True):
    """A correct CausalSelfAttention (the notebook's solution), except for what it does to θ and the head count,
    or (``transpose=False``) heads reshaped straight to (B, H, T, d_head) and back, or (``"left behind"``) split
    to (B, T, H, d_head) and never transposed."""

    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
            super().__init__()
            self.num_heads = heads_of(num_heads)
            self.d_head = d_model // self.num_heads
            self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
            self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)
            self.rope = RotaryPositionalEmbedding(theta_of(rope_theta), self.d_head, max_seq_len)

        def forward(self, x, token_positions=None):
            B, T, d_model = x.shape
            positions = torch.arange(T) if token_positions is None else token_positions

            def split(t):
                if transpose == "left behind":  # heads split off d_model but left behind the tokens
                    return t.view(B, T, self.num_heads, self.d_head)
                if not transpose:
                    return t.reshape(B, self.num_heads, T, self.d_head)
                return t.view(B, T, self.num_heads, self.d_head).transpose(1, 2)

            q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
            q, k = self.rope(q, positions), self.rope(k, positions)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            scores = scores.masked_fill(~functional.causal_mask(T), float("-inf"))
            heads = torch.softmax(scores, dim=-1) @ v
            merged = heads.transpose(1, 2).reshape(B, T, d_model) if transpose is True else heads.reshape(B, T, d_model)
            return self.output_proj(merged)

    return CausalSelfAttention


def test_the_attention_layer_solution_passes_every_draw(via, capsys):
    for _ in range(DRAWS):
        attention.causal_self_attention(via(layer()))
    assert capsys.readouterr().out.count("Exercise 4.4 passed: ") == DRAWS


def test_a_layer_with_theta_10000_written_in_fails(via):
    """Issue 31: a RoPE built with θ = 10000 instead of rope_theta passed, because the checker never varied θ."""
    fails_every_time(attention.causal_self_attention, via(layer(theta_of=lambda theta: 10000.0)),
                     r"^Exercise 4\.4: the rotation uses θ = 10000, not the layer's rope_theta")


def test_a_layer_with_three_heads_written_in_fails(via):
    """Three heads are the old fixed count; drawn counts of 2 or 4 fail (a draw of 3 would pass: 12 checks)."""
    outcomes = []
    for _ in range(12):
        try:
            attention.causal_self_attention.core(via(layer(heads_of=lambda h: 3)))
            outcomes.append("passed")
        except Hint:
            outcomes.append("hint")
    assert "hint" in outcomes


def test_heads_reshaped_without_the_transpose_get_their_hint(via):
    """Issue 28, item 3: 4.4 answered "does not match" for the mistake its prose warns of."""
    fails_every_time(attention.causal_self_attention, via(layer(transpose=False)),
                     r"^Exercise 4\.4: the heads were reshaped without a transpose")


# --- 5.1 / 5.2: the block's widths are drawn --------------------------------------------------------


def test_block_widths_are_drawn_and_never_the_notebooks():
    seen = {block._sizes(torch.Generator().manual_seed(seed)) for seed in range(200)}
    assert len({s.d_model for s in seen}) >= 4
    assert all(s.d_model != 16 and s.d_model % s.num_heads == 0 for s in seen)


def test_heads_left_behind_the_tokens_get_their_hint(via):
    """Split to (B, T, H, d_head) and never transposed: RoPE's shape error now says where the heads went."""
    fails_every_time(attention.causal_self_attention, via(layer(transpose="left behind")),
                     r"^Exercise 4\.4: your code raised .* — the token axis is not where RoPE and the scores look")
