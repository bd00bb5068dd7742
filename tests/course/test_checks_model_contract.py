"""Notebook 06's checks look at the whole contract of each module (issue 36 item 1, issue 37 items 1-2).

Each class below is one of the handout's modules made wrong in one way that the checks used to
miss (they ran in eval mode, in float32, on sorted positions 0 … T−1 of contexts ≤ 32, 3-D inputs,
a few calls, a gradient step on the parameters only, and named 3 of 4.4's 12 attention mistakes).
Each now gets its own hint, locally and through the grader's wire; the handout's modules pass
(tests/course/test_checks_model.py). Seen failing on the old checker: see the module docstring of
each test's class (every one passed `check` before this change).
"""

from __future__ import annotations

import math
from typing import ClassVar

import pytest
import torch
import torch.onnx.ops as onnx_ops
from test_checks_model import MyAttention, MyBlock, MyEmbedding, MyLinear, MyLM, MyRoPE
from torch import nn
from torch.nn import functional as F

from prenorm_lib.checks import Hint
from prenorm_lib.checks import model as check

pytest_plugins = ["learner_wire"]


class Attention(MyAttention):
    """MyAttention written out with switches for the mistakes of 4.4's catalogue and the contract's."""

    wrong: ClassVar[dict] = {}

    def forward(self, x, token_positions=None):
        w = self.wrong
        T, H, d = x.shape[-2], self.num_heads, self.d_head
        if w.get("only_3d"):
            _, T, _ = x.shape  # the contract's near miss: breaks on (T, d) and (2, B, T, d)
        positions = torch.arange(T) if token_positions is None else token_positions

        def heads(t):
            if w.get("split") == "head_last":
                return t.unflatten(-1, (d, H)).transpose(-1, -2).transpose(-3, -2)
            if w.get("split") == "no_transpose":
                return t.reshape(*t.shape[:-2], H, T, d)
            return t.unflatten(-1, (H, d)).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if self.rope is not None:
            at = positions.unsqueeze(-2)
            q, k = self.rope(q, at), self.rope(k, at)
            if w.get("rope_on_values"):
                v = self.rope(v, at)
        scale = math.sqrt(self.d_head * (H if w.get("scale_d_model") else 1))
        scores = q @ k.transpose(-2, -1) / scale
        future = torch.ones(T, T, dtype=torch.bool).triu({"strict": 0, "one_ahead": 2}.get(w.get("mask"), 1))
        if w.get("mask") == "from_positions":
            future = positions[..., None, :] > positions[..., :, None]
            future = future.unsqueeze(-3) if future.ndim > 2 else future
        if w.get("mask") == "inference_only" and self.training:
            future = torch.zeros(T, T, dtype=torch.bool)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        if w.get("dropout"):
            weights = F.dropout(weights, p=0.1, training=self.training)
        out = weights @ v
        if w.get("merge") == "no_transpose":
            return self.output_proj(out.reshape(*out.shape[:-3], T, H * d))
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


def attention(**wrong):
    return type("Wrong" + "".join(k.title() for k in wrong), (Attention,), {"wrong": wrong})


class AttentionBySdpa(MyAttention):
    """Torch's fused attention under the learner's projections: right values, refused by the notebook's rule."""

    def forward(self, x, token_positions=None):
        T = x.shape[-2]
        positions = (torch.arange(T) if token_positions is None else token_positions).unsqueeze(-2)
        q, k, v = (t.unflatten(-1, (self.num_heads, self.d_head)).transpose(-3, -2)
                   for t in (self.q_proj(x), self.k_proj(x), self.v_proj(x)))
        if self.rope is not None:
            q, k = self.rope(q, positions), self.rope(k, positions)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


class RoPETable32(MyRoPE):
    """A cos/sin table of 32 rows whatever max_seq_len says (the old checks never reached position 32)."""

    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__(theta, d_k, 32, device=device)


class RoPEFloat32Out(MyRoPE):
    mistakes: ClassVar[dict] = {"float32_out": True}


class RoPEByOnnx(MyRoPE):
    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        *lead, T, D = x.shape
        c, s = cos.expand(*lead, T, D // 2).reshape(-1, T, D // 2), sin.expand(*lead, T, D // 2).reshape(-1, T, D // 2)
        return onnx_ops.rotary_embedding(x.reshape(-1, 1, T, D), c, s, interleaved=True).reshape(x.shape)


class LinearIgnoringDtype(MyLinear):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__(in_features, out_features, device=device)


class LinearIgnoringDevice(MyLinear):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__(in_features, out_features, dtype=dtype)


class LinearDetachingInput(MyLinear):
    def forward(self, x):
        return x.detach() @ self.weight.T


class LinearRightOnFirstCalls(MyLinear):
    """Right for its first five calls, then 1 % off (a cache or a counter gone wrong)."""

    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return x @ self.weight.T * (1.0 if self.calls <= 5 else 1.01)


class EmbeddingWithPaddingIdx(MyEmbedding):
    """nn.Embedding's padding_idx=0: the same lookups, but row 0 never learns."""

    def forward(self, token_ids):
        return F.embedding(token_ids, self.weight, padding_idx=0)


class BlockDetachingResidual(MyBlock):
    def forward(self, x, token_positions=None):
        h = x.detach() + self.attn(self.ln1(x), token_positions)
        return h + self.ffn(self.ln2(h))


class BlockWithValuesRotated(MyBlock):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__(d_model, num_heads, d_ff, max_seq_len, theta, device=device, dtype=dtype)
        self.attn = attention(rope_on_values=True)(d_model, num_heads, max_seq_len, theta)


class LMSharingOneBlock(MyLM):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
        self.layers = nn.ModuleList([self.layers[0]] * num_layers)


class LMWithMaskOnlyAtInference(MyLM):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for layer in self.layers:
            old = layer.attn
            layer.attn = attention(mask="inference_only")(old.q_proj.weight.shape[1], old.num_heads, 96, 1.0)
            layer.attn.rope = old.rope


NEAR_MISSES = [
    # issue 36 item 1: outside the corner the checks looked at
    (check.attention, attention(dropout=True), r"in training mode \(module\.train\(\).*no dropout"),
    (check.attention, attention(mask="inference_only"), r"in training mode the causal mask is missing"),
    (check.attention, attention(mask="from_positions"), r"the causal mask was built from token_positions"),
    (check.rope, RoPETable32, r"a position reached past your cos/sin table"),
    (check.rope, RoPEFloat32Out, r"returned float32 — keep the input's dtype: a bfloat16 input"),
    (check.linear, LinearIgnoringDtype, r"the constructor's dtype= is ignored"),
    (check.linear, LinearIgnoringDevice, r"the constructor's device= is ignored"),
    (check.embedding, EmbeddingWithPaddingIdx, r"after one gradient step the output is wrong.*padding_idx"),
    (check.block, BlockDetachingResidual, r"the gradient with respect to the input differs"),
    (check.linear, LinearDetachingInput, r"the gradient with respect to the input differs"),
    (check.linear, LinearRightOnFirstCalls, r"the output differs from the library's"),
    (check.attention, attention(only_3d=True), r"any number of batch dimensions, or none"),
    (check.language_model, LMWithMaskOnlyAtInference, r"in training mode \(module\.train\(\)"),
    # issue 37 item 1: every mistake of 4.4's catalogue, named in 6.5 and, through the block, in 6.6
    (check.attention, attention(rope_on_values=True), r"RoPE was applied to the values too"),
    (check.attention, attention(split="no_transpose"), r"heads were made with reshape\(B, H, T, d_head\)"),
    (check.attention, attention(split="head_last"), r"heads split along the wrong axis"),
    (check.attention, attention(merge="no_transpose"), r"the heads were merged without moving them back"),
    (check.attention, attention(scale_d_model=True), r"divided by √d_model"),
    (check.attention, attention(mask="strict"), r"your mask excludes the diagonal"),
    (check.attention, attention(mask="one_ahead"), r"the causal mask is off by one"),
    (check.block, BlockWithValuesRotated, r"the error is in attn, your attention: RoPE was applied to the values"),
    # issue 37 item 2: no shared block, no borrowed attention; issue 36 item 2: torch's rotary op
    (check.language_model, LMSharingOneBlock, r"the layers share one block"),
    (check.attention, AttentionBySdpa, r"your code calls `scaled_dot_product_attention`.*the attention itself "
                                            r"is yours"),
    (check.rope, RoPEByOnnx, r"your code calls `rotary_embedding`"),
]


@pytest.mark.parametrize(("checker", "cls", "pattern"), NEAR_MISSES,
                         ids=lambda v: v.__name__ if isinstance(v, type) else (None if callable(v) else ""))
def test_each_near_miss_gets_its_hint(checker, cls, pattern, via):
    with pytest.raises(Hint, match=rf"^Exercise {checker.exercise_id}: .*{pattern}"):
        checker.core(via(cls))


def test_torchs_softmax_is_allowed_in_06(via, capsys):
    """The notebook's rule, stated in its section 4: torch.softmax stands for exercise 4.1's own."""
    check.attention(via(attention()))
    assert capsys.readouterr().out.startswith("Exercise 6.5 passed: ")
