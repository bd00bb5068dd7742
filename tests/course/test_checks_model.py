"""The notebook-06 checkers pass the handout's modules and name each typical mistake.

The learner modules below are the notebook's solutions, with switches that make one
mistake each; every hint test runs on the object itself and through the grader's wire.
"""

from __future__ import annotations

import math
from typing import ClassVar

import pytest
import torch
from torch import nn

from prenorm_lib import Embedding, Linear, MultiHeadSelfAttention, RMSNorm, TransformerLM
from prenorm_lib.checks import Hint
from prenorm_lib.checks import model as check
from prenorm_lib.checks.core import NotDone

pytest_plugins = ["learner_wire"]


class MyLinear(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        m = self.mistakes
        std = {"unit": 1.0, "fan_in": in_features**-0.5}.get(m.get("std"), math.sqrt(2 / (in_features + out_features)))
        shape = (in_features, out_features) if m.get("transposed") else (out_features, in_features)
        self.weight = nn.Parameter(torch.empty(*shape, device=device, dtype=dtype))
        if m.get("untruncated"):
            nn.init.normal_(self.weight, std=std)
        elif m.get("default_cutoffs"):
            nn.init.trunc_normal_(self.weight, std=std)
        else:
            nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)
        if m.get("bias"):
            self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))

    def forward(self, x):
        out = x @ (self.weight if self.mistakes.get("transposed") else self.weight.T)
        return out + self.bias if self.mistakes.get("bias") else out


class MyEmbedding(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2 / (num_embeddings + embedding_dim)) if self.mistakes.get("linear_std") else 1.0
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        if self.mistakes.get("default_cutoffs"):
            nn.init.trunc_normal_(self.weight)
        else:
            nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, token_ids):
        return self.weight[token_ids]


class MySwiGLU(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        names = ("fc1", "fc2", "fc3") if self.mistakes.get("names") else ("w1", "w2", "w3")
        for name, (a, b) in zip(names, ((d_model, d_ff), (d_ff, d_model), (d_model, d_ff)), strict=True):
            setattr(self, name, MyLinear(a, b, device=device, dtype=dtype))

    def forward(self, x):
        m = self.mistakes
        gate, value = (self.w3(x), self.w1(x)) if m.get("gate_on_w3") else (self.w1(x), self.w3(x))
        return self.w2((gate if m.get("no_silu") else nn.functional.silu(gate)) * value)


class MyRoPE(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        speeds = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        angles = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * speeds
        cos, sin = angles.cos().float().to(device), angles.sin().float().to(device)
        if self.mistakes.get("parameter"):
            self.cos, self.sin = nn.Parameter(cos), nn.Parameter(sin)
        elif self.mistakes.get("no_buffer"):
            self.cos_sin = (cos, sin)
        else:
            persistent = bool(self.mistakes.get("persistent"))
            self.register_buffer("cos", cos, persistent=persistent)
            self.register_buffer("sin", sin, persistent=persistent)

    def forward(self, x, token_positions):
        m = self.mistakes
        if m.get("ignore_positions"):
            token_positions = torch.arange(x.shape[-2])
        cos, sin = self.cos_sin if m.get("no_buffer") else (self.cos, self.sin)
        cos, sin = cos[token_positions], sin[token_positions]
        if m.get("half"):
            half = x.shape[-1] // 2
            a, b = x[..., :half], x[..., half:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return rotated if m.get("float32_out") else rotated.to(x.dtype)


class MyAttention(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, d_model, num_heads, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        where = dict(device=device, dtype=dtype)
        self.q_proj, self.k_proj = MyLinear(d_model, d_model, **where), MyLinear(d_model, d_model, **where)
        self.v_proj, self.output_proj = MyLinear(d_model, d_model, **where), MyLinear(d_model, d_model, **where)
        self.rope = None if theta is None else MyRoPE(theta, self.d_head, max_seq_len, device=device)

    def forward(self, x, token_positions=None):
        m = self.mistakes
        T = x.shape[-2]
        if token_positions is None or m.get("ignore_positions"):
            token_positions = torch.arange(T)

        def heads(t):
            return t.unflatten(-1, (self.num_heads, self.d_head)).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        positions = token_positions if m.get("not_broadcast") else token_positions.unsqueeze(-2)
        if not m.get("no_rope") and self.rope is not None:
            q, k = self.rope(q, positions), self.rope(k, positions)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.output_proj((weights @ v).transpose(-3, -2).flatten(-2))


class MyBlock(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        where = dict(device=device, dtype=dtype)
        self.ln1 = RMSNorm(d_model, **where)
        self.attn = MyAttention(d_model, num_heads, max_seq_len, theta, **where)
        if self.mistakes.get("names"):
            self.norm2 = RMSNorm(d_model, **where)
        else:
            self.ln2 = RMSNorm(d_model, **where)
        self.ffn = MySwiGLU(d_model, d_ff, **where)

    def forward(self, x, token_positions=None):
        m = self.mistakes
        if m.get("post_norm"):
            z = self.ln1(x + self.attn(x, token_positions))
            return self.ln2(z + self.ffn(z))
        h = x + self.attn(self.ln1(x), token_positions)
        return h + self.ffn((self.ln1 if m.get("ln1_twice") else getattr(self, "ln2", None) or self.norm2)(h))


class MyLM(nn.Module):
    mistakes: ClassVar[dict] = {}

    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__()
        m = self.mistakes
        where = dict(device=device, dtype=dtype)
        self.token_embeddings = MyEmbedding(vocab_size, d_model, **where)
        self.layers = nn.ModuleList(MyBlock(d_model, num_heads, d_ff, context_length, rope_theta, **where)
                                    for _ in range(num_layers))
        if not m.get("no_final_norm_module"):
            self.ln_final = RMSNorm(d_model, **where)
        self.lm_head = MyLinear(d_model, vocab_size, **where)
        if m.get("tied"):
            self.lm_head.weight = self.token_embeddings.weight

    def forward(self, token_ids, token_positions=None):
        m = self.mistakes
        x = self.token_embeddings(token_ids)
        for layer in self.layers:
            x = layer(x, token_positions)
        if not (m.get("skip_final_norm") or m.get("no_final_norm_module")):
            x = self.ln_final(x)
        logits = self.lm_head(x)
        return torch.softmax(logits, dim=-1) if m.get("softmax") else logits


def wrong(cls, **mistakes):
    return type(f"Wrong{cls.__name__}", (cls,), {"mistakes": mistakes})


RIGHT = [(check.linear, MyLinear), (check.embedding, MyEmbedding), (check.swiglu, MySwiGLU), (check.rope, MyRoPE),
         (check.attention, MyAttention), (check.block, MyBlock), (check.language_model, MyLM)]


@pytest.mark.parametrize(("checker", "cls"), RIGHT, ids=lambda v: getattr(v, "__name__", ""))
def test_the_handouts_modules_pass(checker, cls, via, capsys):
    checker(via(cls))
    assert capsys.readouterr().out.startswith(f"Exercise {checker.exercise_id} passed: ")


@pytest.mark.parametrize(("checker", "cls", "words"), [
    (check.linear, wrong(MyLinear, std="unit"), "that is N(0, 1)"),
    (check.linear, wrong(MyLinear, std="fan_in"), "σ² = 1/in_features"),
    (check.linear, wrong(MyLinear, untruncated=True), "not truncated at ±3σ"),
    (check.linear, wrong(MyLinear, default_cutoffs=True), "not truncated at ±3σ"),
    (check.linear, wrong(MyLinear, transposed=True), "transposed"),
    (check.linear, wrong(MyLinear, bias=True), "unexpected bias"),
    (check.linear, Linear, "the library's own `prenorm_lib.layers.Linear`"),
    (check.embedding, wrong(MyEmbedding, linear_std=True), "Linear's σ²"),
    (check.embedding, wrong(MyEmbedding, default_cutoffs=True), "defaults are −2 and 2"),
    (check.embedding, Embedding, "the library's own"),
    (check.swiglu, wrong(MySwiGLU, gate_on_w3=True), "gates w3's output"),
    (check.swiglu, wrong(MySwiGLU, no_silu=True), "SiLU is missing"),
    (check.swiglu, wrong(MySwiGLU, names=True), "missing w1.weight"),
    (check.rope, wrong(MyRoPE, persistent=True), "persistent=False"),
    (check.rope, wrong(MyRoPE, parameter=True), "not nn.Parameter"),
    (check.rope, wrong(MyRoPE, no_buffer=True), "no buffer"),
    (check.rope, wrong(MyRoPE, half=True), "(k, k + d_k/2)"),
    (check.rope, wrong(MyRoPE, ignore_positions=True), "token_positions was ignored"),
    (check.attention, wrong(MyAttention, not_broadcast=True), "broadcast over the heads"),
    (check.attention, wrong(MyAttention, ignore_positions=True), "token_positions was ignored"),
    (check.attention, wrong(MyAttention, no_rope=True), "no RoPE"),
    (check.attention, MultiHeadSelfAttention, "the library's own"),
    (check.block, wrong(MyBlock, post_norm=True), "post-norm block"),
    (check.block, wrong(MyBlock, ln1_twice=True), "ln1 is used for both"),
    (check.block, wrong(MyBlock, names=True), "missing ln2.weight"),
    (check.language_model, wrong(MyLM, skip_final_norm=True), "final norm is missing"),
    (check.language_model, wrong(MyLM, no_final_norm_module=True), "missing ln_final.weight"),
    (check.language_model, wrong(MyLM, tied=True), "(tied)"),
    (check.language_model, wrong(MyLM, softmax=True), "probabilities"),
    (check.language_model, TransformerLM, "the library's own"),
], ids=lambda v: getattr(v, "__name__", None) if not isinstance(v, str) else v[:24])
def test_each_mistake_gets_its_hint(checker, cls, words, via):
    with pytest.raises(Hint) as info:
        checker(via(cls))
    assert str(info.value).startswith(f"Exercise {checker.exercise_id}: ")
    assert words in str(info.value)


def test_an_unfinished_module_is_not_done(capsys):
    class Unfinished(nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            raise NotImplementedError("Exercise 6.6: the pre-norm Transformer block")

    check.block(Unfinished)
    assert capsys.readouterr().out.startswith("Exercise 6.6 is not done yet")
    with pytest.raises(NotDone):
        check.block.core(Unfinished)
