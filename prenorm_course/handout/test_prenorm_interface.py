"""The prenorm course's interface tests for the CS336 adapters: your code against torch's own operators.

Written into the handout's ``tests/`` by ``make handout``. Every test draws its weights and
inputs from a fixed seed, runs one adapter (``adapters.py``, which calls your code) and
compares with a reference built from torch's operators (``F.linear``, ``F.rms_norm``,
``F.scaled_dot_product_attention``, complex multiplication for RoPE, ...), written here from
the handout's definitions. Only torch and pytest are needed.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from .adapters import (
    run_embedding,
    run_linear,
    run_multihead_self_attention,
    run_multihead_self_attention_with_rope,
    run_rmsnorm,
    run_rope,
    run_scaled_dot_product_attention,
    run_silu,
    run_softmax,
    run_swiglu,
    run_transformer_block,
    run_transformer_lm,
)

D_MODEL, HEADS, D_FF, CONTEXT, THETA, VOCAB, LAYERS = 48, 4, 112, 24, 1234.0, 97, 3


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def weight(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g) / math.sqrt(shape[-1])


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Interleaved pairs (x_2k, x_2k+1) as complex numbers, turned by positions · θ^(−2k/d)."""
    d = x.shape[-1]
    speeds = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[..., None] * speeds  # (..., T, d/2)
    turned = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous()) * torch.polar(
        torch.ones_like(angles), angles)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


def attention(x: torch.Tensor, w: dict[str, torch.Tensor], theta: float | None, positions=None) -> torch.Tensor:
    """Causal multi-head self-attention, optionally with RoPE on queries and keys (handout §3.5.5)."""
    T = x.shape[-2]
    positions = torch.arange(T) if positions is None else positions

    def heads(t):
        return t.unflatten(-1, (HEADS, -1)).transpose(-3, -2)

    q, k, v = (heads(F.linear(x, w[f"{p}_proj.weight"])) for p in "qkv")
    if theta is not None:
        q, k = rope(q, positions.unsqueeze(-2), theta), rope(k, positions.unsqueeze(-2), theta)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(out.transpose(-3, -2).flatten(-2), w["output_proj.weight"])


def block(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """The pre-norm block: h = x + attn(ln1(x)), h + ffn(ln2(h)) (handout §3.5)."""
    h = x + attention(F.rms_norm(x, (D_MODEL,), w["ln1.weight"], 1e-5),
                      {k.removeprefix("attn."): v for k, v in w.items() if k.startswith("attn.")}, THETA)
    z = F.rms_norm(h, (D_MODEL,), w["ln2.weight"], 1e-5)
    return h + F.linear(F.silu(F.linear(z, w["ffn.w1.weight"])) * F.linear(z, w["ffn.w3.weight"]),
                        w["ffn.w2.weight"])


def block_weights(g: torch.Generator) -> dict[str, torch.Tensor]:
    w = {f"attn.{p}_proj.weight": weight(g, D_MODEL, D_MODEL) for p in ("q", "k", "v", "output")}
    w |= {"ffn.w1.weight": weight(g, D_FF, D_MODEL), "ffn.w3.weight": weight(g, D_FF, D_MODEL),
          "ffn.w2.weight": weight(g, D_MODEL, D_FF)}
    return w | {"ln1.weight": 1 + 0.3 * torch.randn(D_MODEL, generator=g),
                "ln2.weight": 1 + 0.3 * torch.randn(D_MODEL, generator=g)}


def test_linear():
    g = gen(1)
    w, x = weight(g, 40, 24), torch.randn(2, 5, 24, generator=g)
    assert_close(run_linear(d_in=24, d_out=40, weights=w, in_features=x), F.linear(x, w))


def test_embedding():
    g = gen(2)
    w, ids = torch.randn(VOCAB, D_MODEL, generator=g), torch.randint(VOCAB, (3, 7), generator=g)
    assert_close(run_embedding(vocab_size=VOCAB, d_model=D_MODEL, weights=w, token_ids=ids), F.embedding(ids, w))


def test_rmsnorm():
    g = gen(3)
    w, x = 1 + 0.3 * torch.randn(D_MODEL, generator=g), 3 * torch.randn(2, 5, D_MODEL, generator=g)
    assert_close(run_rmsnorm(d_model=D_MODEL, eps=1e-5, weights=w, in_features=x),
                 F.rms_norm(x, (D_MODEL,), w, 1e-5))


def test_silu():
    x = torch.randn(4, 9, generator=gen(4)) * 5
    assert_close(run_silu(in_features=x), F.silu(x))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim):
    x = torch.randn(3, 4, 5, generator=gen(5)) * 40 + 100  # large: exp would overflow without the shift
    assert_close(run_softmax(in_features=x, dim=dim), torch.softmax(x, dim=dim))


def test_swiglu():
    g = gen(6)
    w1, w3, w2 = weight(g, D_FF, D_MODEL), weight(g, D_FF, D_MODEL), weight(g, D_MODEL, D_FF)
    x = torch.randn(2, 5, D_MODEL, generator=g)
    want = F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)
    assert_close(run_swiglu(d_model=D_MODEL, d_ff=D_FF, w1_weight=w1, w2_weight=w2, w3_weight=w3, in_features=x),
                 want)


@pytest.mark.parametrize("lead", [(3,), (2, 3)])
def test_scaled_dot_product_attention(lead):
    g = gen(7)
    Q, K, V = (torch.randn(*lead, n, d, generator=g) for n, d in ((6, 8), (9, 8), (9, 11)))
    mask = torch.rand(6, 9, generator=g) < 0.7
    mask[:, 0] = True
    assert_close(run_scaled_dot_product_attention(Q=Q, K=K, V=V, mask=mask),
                 F.scaled_dot_product_attention(Q, K, V, attn_mask=mask))


def test_rope():
    g = gen(8)
    x, positions = torch.randn(2, 10, 16, generator=g), torch.randperm(CONTEXT, generator=g)[:10]
    assert_close(run_rope(d_k=16, theta=THETA, max_seq_len=CONTEXT, in_query_or_key=x, token_positions=positions),
                 rope(x, positions, THETA))


def test_multihead_self_attention_without_rope():
    g = gen(9)
    w = {f"{p}_proj.weight": weight(g, D_MODEL, D_MODEL) for p in ("q", "k", "v", "output")}
    x = torch.randn(2, 12, D_MODEL, generator=g)
    got = run_multihead_self_attention(d_model=D_MODEL, num_heads=HEADS, q_proj_weight=w["q_proj.weight"],
                                       k_proj_weight=w["k_proj.weight"], v_proj_weight=w["v_proj.weight"],
                                       o_proj_weight=w["output_proj.weight"], in_features=x)
    assert_close(got, attention(x, w, None))


def test_multihead_self_attention_with_rope():
    g = gen(10)
    w = {f"{p}_proj.weight": weight(g, D_MODEL, D_MODEL) for p in ("q", "k", "v", "output")}
    x = torch.randn(2, 12, D_MODEL, generator=g)
    positions = torch.randperm(CONTEXT, generator=g)[:12].sort().values[None]  # (1, T), as the handout passes them
    got = run_multihead_self_attention_with_rope(
        d_model=D_MODEL, num_heads=HEADS, max_seq_len=CONTEXT, theta=THETA, q_proj_weight=w["q_proj.weight"],
        k_proj_weight=w["k_proj.weight"], v_proj_weight=w["v_proj.weight"], o_proj_weight=w["output_proj.weight"],
        in_features=x, token_positions=positions)
    assert_close(got, attention(x, w, THETA, positions))


def test_transformer_block():
    g = gen(11)
    w, x = block_weights(g), torch.randn(2, 12, D_MODEL, generator=g)
    got = run_transformer_block(d_model=D_MODEL, num_heads=HEADS, d_ff=D_FF, max_seq_len=CONTEXT, theta=THETA,
                                weights=w, in_features=x)
    assert_close(got, block(x, w))


@pytest.mark.parametrize("T", [CONTEXT, CONTEXT // 2])  # the whole context, and a truncated input
def test_transformer_lm(T):
    g = gen(12)
    layers = [block_weights(g) for _ in range(LAYERS)]
    w = {f"layers.{i}.{k}": v for i, layer in enumerate(layers) for k, v in layer.items()}
    w |= {"token_embeddings.weight": torch.randn(VOCAB, D_MODEL, generator=g),
          "ln_final.weight": 1 + 0.3 * torch.randn(D_MODEL, generator=g), "lm_head.weight": weight(g, VOCAB, D_MODEL)}
    ids = torch.randint(VOCAB, (2, T), generator=g)
    x = F.embedding(ids, w["token_embeddings.weight"])
    for layer in layers:
        x = block(x, layer)
    want = F.linear(F.rms_norm(x, (D_MODEL,), w["ln_final.weight"], 1e-5), w["lm_head.weight"])
    got = run_transformer_lm(vocab_size=VOCAB, context_length=CONTEXT, d_model=D_MODEL, num_layers=LAYERS,
                             num_heads=HEADS, d_ff=D_FF, rope_theta=THETA, weights=w, in_indices=ids)
    assert_close(got, want, atol=1e-4, rtol=1e-4)
