"""Exercises 6.8 (parameters and FLOPs by hand) and 6.9 (grouped-query attention with a KV cache): the right
answers pass, and each typical mistake gets its own hint, locally and through the grader's wire."""

from __future__ import annotations

import math
from typing import ClassVar

import pytest
import torch
from test_checks_model import MyAttention, MyLinear
from torch.nn import functional as F

from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.checks import Hint
from prenorm_lib.checks import model as check

pytest_plugins = ["learner_wire"]


# --- 6.8 ------------------------------------------------------------------------------------------


def count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    return 2 * vocab_size * d_model + num_layers * (4 * d_model**2 + 3 * d_model * d_ff + 2 * d_model) + d_model


def forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    T = context_length
    return {"projections": num_layers * 8 * T * d_model**2, "attention": num_layers * 4 * T * T * d_model,
            "feed-forward": num_layers * 6 * T * d_model * d_ff, "lm_head": 2 * T * d_model * vocab_size}


def params_with(change):
    def count(*shape):
        return count_parameters(*shape) + change(*shape)
    return count


def flops_with(part, change):
    def flops(*shape):
        out = forward_flops(*shape)
        out[part] = change(out[part], *shape)
        return out
    return flops


def flops_halved(*shape):
    return {k: v / 2 for k, v in forward_flops(*shape).items()}


ACCOUNTING_MISTAKES = [
    (params_with(lambda V, T, d, L, H, f: -V * d), forward_flops, "one (vocab_size × d_model) matrix is missing"),
    (params_with(lambda V, T, d, L, H, f: -(2 * L + 1) * d), forward_flops, "the RMSNorm gains are missing"),
    (params_with(lambda V, T, d, L, H, f: T * d), forward_flops, "position-embedding matrix"),
    (params_with(lambda V, T, d, L, H, f: -L * d * f), forward_flops, "three matrices in SwiGLU"),
    (count_parameters, flops_halved, "one multiply-add is 2 FLOPs"),
    (count_parameters, flops_with("attention", lambda v, V, T, d, L, H, f: v / 2), "count both"),
    (count_parameters, flops_with("attention", lambda v, V, T, d, L, H, f: v * H), "d_head = d_model / num_heads"),
    (count_parameters, flops_with("feed-forward", lambda v, V, T, d, L, H, f: v * 2 / 3), "SwiGLU has three matrices"),
    (count_parameters, flops_with("lm_head", lambda v, V, T, d, L, H, f: 0), "lm_head is a matrix multiply too"),
    (count_parameters, flops_with("projections", lambda v, V, T, d, L, H, f: v * 3 / 4), "four projections"),
]


def test_the_handouts_counts_pass(via, capsys):
    check.accounting(via(count_parameters), via(forward_flops))
    assert capsys.readouterr().out.startswith("Exercise 6.8 passed: ")


@pytest.mark.parametrize(("params", "flops", "words"), ACCOUNTING_MISTAKES,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_each_counting_mistake_gets_its_hint(params, flops, words, via):
    with pytest.raises(Hint, match=r"^Exercise 6\.8: ") as info:
        check.accounting.core(via(params), via(flops))
    assert words in str(info.value)


def test_a_measured_count_is_refused(via):
    def by_counter(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
        from torch.utils.flop_counter import FlopCounterMode  # noqa: F401 - the lint reads the source

        return forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff)

    with pytest.raises(Hint, match=r"your code calls `(?:FlopCounterMode|flop_counter)`"):
        check.accounting.core(via(count_parameters), via(by_counter))


# --- 6.9 ------------------------------------------------------------------------------------------


class Cached(MyAttention):
    """Grouped-query attention with a KV cache, with switches for the typical mistakes."""

    wrong: ClassVar[dict] = {}

    def __init__(self, d_model, num_heads, max_seq_len, theta, num_kv_heads=None, device=None, dtype=None):
        super().__init__(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.kv_cache = None
        self.kv = num_heads if (num_kv_heads is None or self.wrong.get("ignore_kv_heads")) else num_kv_heads
        self.k_proj = MyLinear(d_model, self.kv * self.d_head, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, self.kv * self.d_head, device=device, dtype=dtype)

    def forward(self, x, token_positions=None):
        w = self.wrong
        T, g = x.shape[-2], self.num_heads // self.kv
        past = 0 if self.kv_cache is None or w.get("positions_restart") else self.kv_cache.length
        positions = torch.arange(past, past + T) if token_positions is None else token_positions

        def heads(t, n):
            return t.unflatten(-1, (n, self.d_head)).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x), self.num_heads), heads(self.k_proj(x), self.kv), heads(self.v_proj(x), self.kv)
        q, k = self.rope(q, positions.unsqueeze(-2)), self.rope(k, positions.unsqueeze(-2))
        share = (lambda t: t.repeat(1, g, 1, 1)) if w.get("repeat") else (lambda t: t.repeat_interleave(g, dim=-3))
        if w.get("cache_repeated"):
            k, v = share(k), share(v)
        if self.kv_cache is not None and not w.get("cache_unused"):
            k, v = self.kv_cache.update(k, v)
        if not w.get("cache_repeated"):
            k, v = share(k), share(v)
        cached = k.shape[-2] - T
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if w.get("mask_top_left"):
            allowed = torch.ones(T, k.shape[-2], dtype=torch.bool).tril()
        elif w.get("no_mask_after_cache") and cached:
            allowed = torch.ones(T, k.shape[-2], dtype=torch.bool)
        else:
            allowed = torch.arange(k.shape[-2]) <= torch.arange(cached, cached + T)[:, None]
        out = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


class CachedBySdpa(Cached):
    """Fused attention with an explicit mask: the right values, refused by the notebook's rule."""

    def forward(self, x, token_positions=None):
        T, g = x.shape[-2], self.num_heads // self.kv
        past = 0 if self.kv_cache is None else self.kv_cache.length
        positions = torch.arange(past, past + T).unsqueeze(-2)
        q = self.rope(self.q_proj(x).unflatten(-1, (self.num_heads, self.d_head)).transpose(-3, -2), positions)
        k = self.rope(self.k_proj(x).unflatten(-1, (self.kv, self.d_head)).transpose(-3, -2), positions)
        v = self.v_proj(x).unflatten(-1, (self.kv, self.d_head)).transpose(-3, -2)
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(k, v)
        mask = torch.arange(k.shape[-2]) <= torch.arange(past, past + T)[:, None]
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3),
                                             attn_mask=mask)
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


def cached(**wrong):
    return type("Cached" + "".join(k.title() for k in wrong), (Cached,), {"wrong": wrong})


def test_grouped_query_attention_with_a_cache_passes(via, capsys):
    check.cached_attention(via(cached()))
    assert capsys.readouterr().out.startswith("Exercise 6.9 passed: ")


@pytest.mark.parametrize(("cls", "words"), [
    (cached(repeat=True), "shared with .repeat"),
    (cached(positions_restart=True), "their positions continue after the cached ones"),
    (cached(cache_unused=True), "the new tokens attended only to themselves"),
    (cached(mask_top_left=True), "cut from the top-left corner"),
    (cached(no_mask_after_cache=True), "after the first call the mask was left out"),
    (cached(cache_repeated=True), "cache the num_kv_heads key heads"),
    (cached(ignore_kv_heads=True), "k_proj.weight has shape"),
    (CachedBySdpa, "your code calls `scaled_dot_product_attention`"),
    (MultiHeadSelfAttention, "the library's own"),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_each_cache_mistake_gets_its_hint(cls, words, via):
    with pytest.raises(Hint, match=r"^Exercise 6\.9: ") as info:
        check.cached_attention.core(via(cls))
    assert words in str(info.value)
