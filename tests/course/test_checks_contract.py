"""The checkers of 01–05 cover their exercise's contract, not one corner of it (issue 36, item 1).

Each near miss here is right on every input the checkers used to send -- float32, train mode,
sorted positions, 3-D batches, one call each, values only -- and wrong where a learner's
model would go through it: a gradient that never reaches the input, eval mode, another
batch rank, a bfloat16 or float64 input, a shuffled or offset position, a second call. Each
passed its checker before (``NEAR_MISSES`` run on the checkers of the commit before this one
passed them all; see the report); each fails now, with the hint that names the gap, both on
the object and through the grader's wire.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from prenorm_course.exercises.false_hints import NormHandout as Norm
from prenorm_lib.checks import Hint, attention, block, ffn, rmsnorm, rope
from prenorm_lib.layers import Linear

pytest_plugins = ["learner_wire"]


def rms(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


my_rms_norm = rms  # what 1.2's forward calls


def rms_detached(x, weight, eps=1e-5):  # right values; no gradient reaches x
    return rms(x.detach(), weight, eps)


def counting(fn, right_calls):
    """``fn`` for its first ``right_calls`` calls, then the input back: right only on its first calls."""
    calls = [0]

    def learner(x, *rest):
        calls[0] += 1
        return fn(x, *rest) if calls[0] <= right_calls else x

    learner.__name__ = fn.__name__
    return learner


class NormEvalWrong(Norm):  # right in training mode, the checkers' only mode
    def forward(self, x):
        return super().forward(x) if self.training else x


class NormDetached(Norm):
    def forward(self, x):
        return my_rms_norm(x.detach(), self.weight, self.eps)


class NormThreeD(Norm):  # right for (batch, T, d) only
    def forward(self, x):
        b, t, d = x.shape
        return my_rms_norm(x.reshape(b * t, d), self.weight, self.eps).reshape(b, t, d)


class NormFloat32Out(Norm):  # float32 out for a bfloat16 module and input
    def forward(self, x):
        return my_rms_norm(x.float(), self.weight.float(), self.eps)


def silu_detached(x):
    return x.detach() * torch.sigmoid(x)


def swiglu_frozen_w1(x, w1, w2, w3):  # w1 never trained
    gate = x @ w1.detach().T
    return (gate * torch.sigmoid(gate) * (x @ w3.T)) @ w2.T


def rotate_detached(x, cos, sin):
    x1, x2 = x.detach()[..., 0::2], x.detach()[..., 1::2]
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def normalised_exp(x, dim):
    e = torch.exp(x.double() - x.double().amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def exp_detached(x, dim):
    return normalised_exp(x.detach(), dim)


def exp_float32_for_bfloat16(x, dim):  # float16 and float64 come back right; bfloat16 comes back float32
    out = normalised_exp(x, dim)
    return out.float() if x.dtype == torch.bfloat16 else out


def sdpa(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return normalised_exp(scores, -1) @ V


def sdpa_float32_out(Q, K, V, mask=None):  # right on the float32 cases, float32 for any input
    return sdpa(Q.float(), K.float(), V.float(), mask)


def sdpa_frozen_keys(Q, K, V, mask=None):
    return sdpa(Q, K.detach(), V, mask)


class Attention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
        super().__init__()
        self.shape = attention.Layer(d_model, num_heads, max_seq_len, rope_theta)
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)

    def weights(self):
        return {name: getattr(self, name).weight for name in attention.PROJECTIONS}

    def forward(self, x, token_positions=None):
        positions = torch.arange(x.shape[-2]) if token_positions is None else token_positions
        return attention._mhsa(x, self.weights(), positions, self.shape).to(x.dtype)


class AttentionMaskOnlyInTraining(Attention):  # eval mode: no mask
    def forward(self, x, token_positions=None):
        positions = torch.arange(x.shape[-2]) if token_positions is None else token_positions
        mask = "causal" if self.training else "none"
        return attention._mhsa(x, self.weights(), positions, self.shape, mask=mask).to(x.dtype)


class AttentionMaskFromPositions(Attention):  # the causal mask from token_positions, not from the order of tokens
    def forward(self, x, token_positions=None):
        if token_positions is None or bool((token_positions.diff() > 0).all()):
            return super().forward(x, token_positions)
        order = torch.argsort(token_positions)
        return super().forward(x[..., order, :], token_positions[order])[..., torch.argsort(order), :]


class AttentionFloat32(Attention):  # a float64 layer on a float64 input gives float32
    def forward(self, x, token_positions=None):
        return super().forward(x.float(), token_positions).float() if x.dtype == torch.float64 else \
            super().forward(x, token_positions)


class AttentionDetached(Attention):
    def forward(self, x, token_positions=None):
        return super().forward(x.detach(), token_positions)


def pre_norm_detached_residual(x, ln1, attn, ln2, ffn_):
    h = x.detach() + attn(ln1(x))
    return h + ffn_(ln2(h))


NEAR_MISSES = [  # (checker, the near miss, words of the hint)
    (rmsnorm.rms_norm, rms_detached, "no gradient reaches x"),
    (rmsnorm.rms_norm, counting(rms, 9), "keep state between calls"),
    (rmsnorm.rms_norm_module, NormEvalWrong, "in eval mode"),
    (rmsnorm.rms_norm_module, NormDetached, "no gradient reaches x"),
    (rmsnorm.rms_norm_module, NormThreeD, "raised ValueError"),
    (rmsnorm.rms_norm_module, NormFloat32Out, "bfloat16"),
    (ffn.silu, silu_detached, "gradient with respect to x"),
    (ffn.swiglu, swiglu_frozen_w1, "no gradient reaches w1"),
    (rope.rotate_pairs, rotate_detached, "no gradient reaches x"),
    (attention.stable_softmax, exp_detached, "no gradient reaches x"),
    (attention.stable_softmax, exp_float32_for_bfloat16, "bfloat16"),
    (attention.attention, sdpa_float32_out, "float64"),
    (attention.attention, sdpa_frozen_keys, "no gradient reaches K"),
    (attention.causal_self_attention, AttentionMaskOnlyInTraining, "in eval mode"),
    (attention.causal_self_attention, AttentionMaskFromPositions, "shuffled"),
    (attention.causal_self_attention, AttentionFloat32, "float64"),
    (attention.causal_self_attention, AttentionDetached, "no gradient reaches x"),
    (block.pre_norm_forward, pre_norm_detached_residual, "gradient with respect to x"),
]


@pytest.mark.parametrize(("checker", "learner", "words"), NEAR_MISSES,
                         ids=lambda v: getattr(v, "__name__", None) if not isinstance(v, str) else None)
def test_a_near_miss_outside_the_old_corner_fails(checker, learner, words, via):
    if learner.__name__ == "rms" or learner.__name__ == "learner":  # a counting learner: fresh for each place
        learner = counting(rms, 9)
    with pytest.raises(Hint, match=rf"^Exercise {checker.exercise_id}: ") as info:
        checker.core(via(learner))
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize(("checker", "learner"), [
    (rmsnorm.rms_norm, rms), (rmsnorm.rms_norm_module, Norm), (attention.stable_softmax, normalised_exp),
    (attention.attention, sdpa), (attention.causal_self_attention, Attention),
], ids=lambda v: getattr(v, "__name__", None))
def test_the_right_answer_behind_the_near_misses_passes(checker, learner, via, capsys):
    checker.core(via(learner))
    assert f"Exercise {checker.exercise_id} passed" in capsys.readouterr().out
