"""Checkers of notebook 04 (causal attention with RoPE).

* ``stable_softmax(fn)`` — Exercise 4.1, ``fn(x, dim)``: softmax with the row maximum subtracted.
* ``score_spread(answer)`` — Exercise 4.2, predict the standard deviation of q·k for d_k = 64.
* ``attention(fn)`` — Exercise 4.3, ``fn(Q, K, V, mask=None)``: scaled dot-product attention
  with a boolean mask (True = may attend), CS336's signature.
* ``causal_self_attention(cls)`` — Exercise 4.4, ``cls(d_model, num_heads, max_seq_len,
  rope_theta)``: causal multi-head self-attention with RoPE, weights ``q_proj``, ``k_proj``,
  ``v_proj``, ``output_proj`` as in the CS336 handout.

A wrong answer is compared with the typical mistakes, each written out below as a small
variant of the reference (no max subtraction, softmax over the query axis, the scale by d_k
instead of √d_k, the mask filled with 0 or applied after the softmax, heads split along the
wrong axis, RoPE on the values, the output projection forgotten, …), so that the hint names
the mistake rather than just saying "wrong".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from prenorm_lib import functional
from prenorm_lib.checks.core import (
    MODULE_CLASS,
    Hint,
    call_learner,
    describe,
    exercise,
    expect,
    expect_close,
    fresh_generator,
    n_parameters,
    object_facts,
    passed,
    probe,
    refuse_library_calls,
    refuse_library_object,
)

__all__ = ["attention", "causal_self_attention", "score_spread", "stable_softmax"]

SOFTMAX, SPREAD, SDPA, MHSA = "4.1", "4.2", "4.3", "4.4"


def _close(got: Any, want: torch.Tensor, atol: float = 1e-4) -> bool:
    """Same shape and values within ``atol`` (non-finite entries must match exactly)."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    a, b = got.detach().to(torch.float64), want.detach().to(torch.float64)
    finite = torch.isfinite(a) & torch.isfinite(b)
    if not bool((torch.isfinite(a) == torch.isfinite(b)).all()):
        return False
    return bool(((a - b).abs()[finite] <= atol + 1e-3 * b.abs()[finite]).all())


def _non_finite_where_finite(got: Any, want: torch.Tensor) -> bool:
    return (isinstance(got, torch.Tensor) and got.shape == want.shape
            and bool((~torch.isfinite(got.detach().double()) & torch.isfinite(want.double())).any()))


# ---------------------------------------------------------------------------
# Exercise 4.1: a numerically stable softmax


def _plain_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def _global_max_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    exp = torch.exp(x - x.max())
    return exp / exp.sum(dim=dim, keepdim=True)


def _log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    shifted = x - x.amax(dim=dim, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def _softmax_cases() -> list[tuple[str, torch.Tensor, int]]:
    gen = fresh_generator()
    near_one = torch.randn(4, generator=gen)
    rows = torch.stack([near_one, 999.0 + 3 * torch.rand(4, generator=gen)])  # two scales, one tensor
    loud = (10.0 + 2 * torch.rand(2, 3, generator=gen)).to(torch.float16)  # exp(12) is inf in float16
    return [
        ("x (3, 5), dim=-1", torch.randn(3, 5, generator=gen), -1),
        ("x (4, 3), dim=0", torch.randn(4, 3, generator=gen), 0),
        ("x (2, 3, 6) with a masked −inf entry, dim=-1",
         torch.randn(2, 3, 6, generator=gen).index_fill(-1, torch.tensor([2]), float("-inf")), -1),
        ("float32 rows near 0 and [999 … 1002], dim=1", rows, 1),
        ("float16 x of size 10 to 12, dim=-1", loud, -1),
    ]


SOFTMAX_MISTAKES: tuple[tuple[Callable, str], ...] = (
    (lambda x, dim: _plain_softmax(x, -1),
     "your softmax ignores `dim` and always normalises over the last dimension; pass dim on to amax and sum"),
    (lambda x, dim: _plain_softmax(x, (dim + 1) % x.ndim if x.ndim > 1 else dim),
     "you normalised over the wrong dimension: the values along `dim` must sum to 1 — use dim=dim in the max "
     "and in the sum"),
    (_log_softmax,
     "you returned log-probabilities (a log-softmax): exponentiate and divide by the sum instead"),
)

_LIBRARY_SOFTMAX = frozenset({"prenorm_lib.functional.softmax", "torch._VariableFunctionsClass.softmax",
                              "torch.nn.functional.softmax", "torch.softmax"})
_SOFTMAX_CALLS = re.compile(r"\.\s*(?:log_)?softmax\s*\(|(?<!def )(?<![\w.])(?:log_)?softmax\s*\(")
SOFTMAX_TASK = ("this exercise asks you to write the softmax yourself from torch.exp, amax and sum; "
                "compare with torch.softmax afterwards")


@exercise(SOFTMAX)
def stable_softmax(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise 4.1: ``fn(x, dim)`` is softmax along ``dim``, finite for large inputs, in x's dtype."""
    refuse_library_object(SOFTMAX, fn, _LIBRARY_SOFTMAX, SOFTMAX_TASK)
    for name, x, dim in _softmax_cases():
        want = torch.softmax(x.double(), dim=dim).to(x.dtype)  # before the learner's call, which gets a copy of x
        got = call_learner(SOFTMAX, fn, x, dim, arg_names=("x", "dim"), in_place={
            "x": "build a new tensor, x - x.amax(...), the caller still needs x (x -= … changes it)"})
        if _non_finite_where_finite(got, want):
            if _close(got, _global_max_softmax(x, dim)):
                raise Hint(SOFTMAX, f"subtract each row's own maximum (x.amax(dim=dim, keepdim=True)), not the "
                           f"maximum of the whole tensor: a row far below it underflows to 0/0 [case: {name}]")
            raise Hint(SOFTMAX, f"your softmax returns inf or nan where the answer is finite [case: {name}] — "
                       "exp overflows for large inputs (exp(89) is inf in float32, exp(12) in float16): subtract "
                       "the maximum along dim first; it cancels in the ratio")
        if not _close(got, want, atol=2e-3 if x.dtype == torch.float16 else 1e-5):
            for mistake, hint in SOFTMAX_MISTAKES:
                if _close(got, mistake(x.double(), dim).to(x.dtype)):
                    raise Hint(SOFTMAX, f"{hint} [case: {name}]")
        expect_close(
            SOFTMAX, got, want, f"the probabilities do not match softmax(x, dim) [case: {name}]",
            atol=2e-3 if x.dtype == torch.float16 else 1e-6, rtol=1e-3 if x.dtype == torch.float16 else 1e-5,
            shape_hint=f"softmax keeps x's shape [case: {name}]: use keepdim=True in amax and sum so they broadcast",
            dtype_hint=f"return x's dtype [case: {name}]",
        )
    refuse_library_calls(SOFTMAX, fn, _SOFTMAX_CALLS, SOFTMAX_TASK)
    passed(SOFTMAX, "softmax matches torch.softmax on 5 cases (dim 0 and −1, a −inf entry, inputs near 1000, "
           "float16 near 12)")


# ---------------------------------------------------------------------------
# Exercise 4.2: how large is q·k?

SPREAD_D_K = 64


@exercise(SPREAD)
def score_spread(answer: Any) -> None:
    """Exercise 4.2: the standard deviation of q·k for d_k = 64 independent N(0, 1) components."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or (not isinstance(answer, int | float) and type(answer).__module__ != "numpy"):
        raise Hint(SPREAD, f"answer with one number, the standard deviation of q·k; got {describe(answer)} "
                   f"{answer!r}")
    value = float(answer)
    right = math.sqrt(SPREAD_D_K)
    why = ("each product q_i·k_i has mean 0 and variance 1, and the 64 products are independent, so their "
           "variances add")
    if abs(value - SPREAD_D_K) < 0.5:
        raise Hint(SPREAD, f"64 is the variance of q·k; the standard deviation is its square root. {why}")
    if abs(value - 1) < 0.05:
        raise Hint(SPREAD, f"1 is the spread of one product q_i·k_i, but q·k adds 64 of them. {why}")
    if abs(value - SPREAD_D_K**2) < 1:
        raise Hint(SPREAD, f"the variance grows like d_k, not d_k². {why}")
    if abs(value - right) > 0.5:
        raise Hint(SPREAD, f"not quite. {why}: what is the variance of the sum, and what is its square root?")
    passed(SPREAD, "var(q·k) = d_k = 64, so its standard deviation is √64 = 8 — dividing by √d_k brings it back to 1")


# ---------------------------------------------------------------------------
# Exercise 4.3: scaled dot-product attention with a boolean mask


def _sdpa(Q, K, V, mask=None, *, scale="sqrt_dk", softmax_dim=-1, fill="-inf", after=False, inverted=False):
    """Scaled dot-product attention in float64, with one of the typical mistakes if asked."""
    Q, K, V = Q.double(), K.double(), V.double()
    divisor = {"sqrt_dk": math.sqrt(Q.shape[-1]), "dk": Q.shape[-1], "none": 1.0,
               "sqrt_dv": math.sqrt(V.shape[-1])}[scale]
    scores = Q @ K.transpose(-2, -1) / divisor  # (..., n_q, n_k)
    if mask is not None and inverted:
        mask = ~mask
    if mask is not None and not after:
        scores = scores.masked_fill(~mask, 0.0 if fill == "0" else float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and after:
        weights = weights * mask
    return weights @ V


SDPA_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"scale": "none"}, "the scores are not scaled: divide Q Kᵀ by √d_k, with d_k = Q.shape[-1]"),
    ({"scale": "dk"}, "you divided by d_k; the scale is 1/√d_k (math.sqrt(Q.shape[-1])), which brings the "
                      "scores back to unit variance"),
    ({"scale": "sqrt_dv"}, "you divided by √d_v (V's last dimension); the scale is √d_k, from Q.shape[-1]"),
    ({"softmax_dim": -2}, "the softmax runs over the query axis: each query's weights over the keys must sum to 1 "
                          "— softmax over the last dimension (the keys), dim=-1"),
    ({"fill": "0"}, "masked scores were set to 0, and exp(0) = 1 still gives them weight: fill them with "
                    "float('-inf') before the softmax, so that their weight is exactly 0"),
    ({"after": True}, "the mask was applied after the softmax: the remaining weights no longer sum to 1. Set the "
                      "masked scores to −inf before the softmax instead"),
    ({"inverted": True}, "the mask is inverted: True means *may attend* (torch's convention) — fill the positions "
                         "where the mask is False, scores.masked_fill(~mask, float('-inf'))"),
)


def _sdpa_cases() -> list[tuple[str, tuple]]:
    gen = fresh_generator()
    free = torch.rand(4, 6, generator=gen) < 0.6
    free[:, 0] = True  # every query may attend to at least one key
    return [
        ("Q (2, 3, 8), K (2, 4, 8), V (2, 4, 5), no mask",
         (torch.randn(2, 3, 8, generator=gen), torch.randn(2, 4, 8, generator=gen),
          torch.randn(2, 4, 5, generator=gen), None)),
        ("(batch 2, heads 3, T 5, d_k 16) with the causal mask (5, 5)",
         (torch.randn(2, 3, 5, 16, generator=gen), torch.randn(2, 3, 5, 16, generator=gen),
          torch.randn(2, 3, 5, 16, generator=gen), functional.causal_mask(5))),
        ("Q (4, 8), K (6, 8), V (6, 3), a random mask (4, 6)",
         (2 * torch.randn(4, 8, generator=gen), 2 * torch.randn(6, 8, generator=gen),
          torch.randn(6, 3, generator=gen), free)),
    ]


_LIBRARY_SDPA = frozenset({"prenorm_lib.functional.scaled_dot_product_attention",
                           "torch._C._nn.scaled_dot_product_attention"})
_SDPA_CALLS = re.compile(r"(?<!def )\bscaled_dot_product_attention\s*\(|\bMultiheadAttention\s*\(")
SDPA_TASK = ("this exercise asks you to write attention yourself — scores, mask, your softmax, weighted sum; "
             "compare with torch.nn.functional.scaled_dot_product_attention afterwards")


@exercise(SDPA)
def attention(fn: Callable) -> None:
    """Exercise 4.3: ``fn(Q, K, V, mask=None)`` is softmax(Q Kᵀ/√d_k) V with a boolean mask (True = attend)."""
    refuse_library_object(SDPA, fn, _LIBRARY_SDPA, SDPA_TASK)
    for name, (Q, K, V, mask) in _sdpa_cases():
        want = _sdpa(Q, K, V, mask).to(Q.dtype)  # before the learner's call, which gets copies
        got = call_learner(SDPA, fn, Q, K, V, mask, arg_names=("Q", "K", "V", "mask"))
        if not _close(got, want, atol=1e-5):
            for variant, hint in SDPA_MISTAKES:
                if mask is None and any(k in variant for k in ("fill", "after", "inverted")):
                    continue
                if _close(got, _sdpa(Q, K, V, mask, **variant).to(Q.dtype)):
                    raise Hint(SDPA, f"{hint} [case: {name}]")
            if isinstance(got, torch.Tensor) and got.shape == (*Q.shape[:-1], K.shape[-2]):
                raise Hint(SDPA, f"you returned the attention weights (n_queries, n_keys) [case: {name}]; "
                           "return their product with V, (…, n_queries, d_v)")
        expect_close(
            SDPA, got, want, f"the output does not match softmax(Q Kᵀ/√d_k) V [case: {name}]",
            shape_hint=f"the output is (…, n_queries, d_v) = {tuple(want.shape)} [case: {name}]: multiply the "
                       "weights (…, n_queries, n_keys) by V (…, n_keys, d_v); transpose K's last two dimensions "
                       "with K.transpose(-2, -1), not K.T",
            dtype_hint=f"return Q's dtype [case: {name}]",
        )
    refuse_library_calls(SDPA, fn, _SDPA_CALLS, SDPA_TASK)
    passed(SDPA, "attention matches softmax(Q Kᵀ/√d_k) V on 3 cases (no mask, the causal mask over heads, a random "
           "mask with n_queries ≠ n_keys)")


# ---------------------------------------------------------------------------
# Exercise 4.4: causal multi-head self-attention with RoPE, the CS336 interface

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "output_proj")
D_MODEL, NUM_HEADS, MAX_SEQ_LEN, THETA = 24, 3, 16, 10000.0


def _rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Interleaved RoPE of x (..., T, d) at ``positions`` (T,), in x's dtype."""
    angles = functional.rope_angles(THETA, x.shape[-1], MAX_SEQ_LEN)[positions]  # (T, d/2)
    return functional.apply_rope(x, angles.cos(), angles.sin())


def _mhsa(x: torch.Tensor, w: dict[str, torch.Tensor], positions: torch.Tensor, *, mask="causal",
          split="right", rope="qk", project=True, scale="head", merge="right") -> torch.Tensor:
    """Causal MHSA with RoPE in float64, from the four weights; keyword arguments name a mistake."""
    x = x.double()
    w = {k: v.double() for k, v in w.items()}
    T, H, d_head = x.shape[-2], NUM_HEADS, D_MODEL // NUM_HEADS

    def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, d_model) → (B, H, T, d_head)
        if split == "head_last":  # d_model read as (d_head, H): heads take every H-th channel
            return t.unflatten(-1, (d_head, H)).transpose(-1, -2).transpose(-3, -2)
        if split == "no_transpose":  # (B, T, d) reshaped straight to (B, H, T, d_head): tokens mixed into heads
            return t.reshape(*t.shape[:-2], H, T, d_head)
        return t.unflatten(-1, (H, d_head)).transpose(-3, -2)

    q, k, v = x @ w["q_proj"].T, x @ w["k_proj"].T, x @ w["v_proj"].T  # (B, T, d_model)
    if rope == "concatenated":  # one rotation over all d_model channels, before the split
        q, k = _rope(q, positions), _rope(k, positions)
    q, k, v = heads(q), heads(k), heads(v)  # (B, H, T, d_head)
    if rope in ("qk", "qkv"):
        q, k = _rope(q, positions), _rope(k, positions)
    if rope == "qkv":
        v = _rope(v, positions)
    if rope == "default_positions":
        q, k = _rope(q, torch.arange(T)), _rope(k, torch.arange(T))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D_MODEL if scale == "model" else d_head)  # (B, H, T, T)
    if mask != "none":
        allowed = torch.ones(T, T, dtype=torch.bool).tril(-1 if mask == "strict" else 0)
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d_head)
    # (B, T, d_model); the mistake reshapes (B, H, T, d_head) straight to it, heads still in front
    out = out.reshape(*out.shape[:-3], T, D_MODEL) if merge == "no_transpose" else out.transpose(-3, -2).flatten(-2)
    return out @ w["output_proj"].T if project else out


MHSA_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"mask": "none"}, "no causal mask: every token reads the tokens after it. Mask the scores with "
                       "torch.ones(T, T, dtype=torch.bool).tril() before the softmax"),
    ({"project": False}, "the output projection is missing: return self.output_proj(merged heads)"),
    ({"rope": "qkv"}, "RoPE was applied to the values too: rotate queries and keys only — position should "
                      "change where a head looks, not what it reads"),
    ({"rope": "none"}, "no RoPE: rotate each head's queries and keys by their positions before the scores"),
    ({"rope": "concatenated"}, "RoPE was applied to the concatenated heads (d_model channels): split the heads "
                               "first, then rotate each head's d_head channels — every head has its own clocks"),
    ({"rope": "default_positions"}, "token_positions was ignored: rotate by the positions you are given "
                                    "(0 … T−1 only when token_positions is None)"),
    ({"scale": "model"}, "the scores were divided by √d_model; each head's scores are divided by √d_head, the "
                         "size of the vectors in its dot product"),
    ({"split": "head_last"}, "heads split along the wrong axis: view d_model as (num_heads, d_head), not "
                             "(d_head, num_heads), so that each head owns a contiguous block of channels"),
    ({"split": "no_transpose"}, "heads were made with reshape(B, H, T, d_head) straight from (B, T, d_model), "
                                "which mixes tokens into heads: unflatten to (B, T, H, d_head), then "
                                "transpose(1, 2)"),
    ({"merge": "no_transpose"}, "the heads were merged without moving them back: transpose (B, H, T, d_head) "
                                "to (B, T, H, d_head) before flattening the last two dimensions"),
)


def _module_facts(module: Any) -> dict:
    """What Exercise 4.4 needs to know about a learner's module, decided here from plain facts."""
    raw = object_facts(module, [f"{name}.weight" for name in PROJECTIONS])
    facts: dict[str, Any] = {"is_module": MODULE_CLASS in raw["types"], "projections": {},
                             "n_params": n_parameters(raw)}
    for name in PROJECTIONS:
        weight = raw["attributes"].get(f"{name}.weight")
        tensor = weight["tensor"] if weight is not None else None
        facts["projections"][name] = list(tensor.shape) if isinstance(tensor, torch.Tensor) else None
    return facts


def _load_projections(module: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Give a learner's module the checker's projection weights (a probe)."""
    with torch.no_grad():
        for name, value in weights.items():
            getattr(module, name).weight.copy_(value)


_LIBRARY_MHSA = frozenset({"prenorm_lib.attention.MultiHeadSelfAttention",
                           "torch.nn.modules.activation.MultiheadAttention",
                           "prenorm_lib.block.TransformerBlock"})
_MHSA_CALLS = re.compile(r"\bMultiHeadSelfAttention\s*\(|\bMultiheadAttention\s*\(|\bTransformerBlock\s*\("
                         r"|(?<!def )\bscaled_dot_product_attention\s*\(|\bis_causal\b")
MHSA_TASK = ("this exercise asks you to assemble the layer yourself from the projections, RoPE and your "
             "attention function; compare with prenorm_lib.attention.MultiHeadSelfAttention afterwards")


def _mhsa_cases() -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    gen = fresh_generator()
    positions = torch.randperm(MAX_SEQ_LEN - 1, generator=gen)[:5].add(1).sort().values
    while bool((positions.diff() == 1).all()):  # one shift of 0 … 4 would change nothing
        positions = torch.randperm(MAX_SEQ_LEN - 1, generator=gen)[:5].add(1).sort().values
    return [
        ("x (2, 6, 24), positions 0 … 5 (token_positions=None)", torch.randn(2, 6, D_MODEL, generator=gen), None),
        # not one shift of 0 … 4: RoPE's scores see only differences, so a shift alone would change nothing
        ("x (2, 5, 24), five increasing token_positions, not consecutive",
         torch.randn(2, 5, D_MODEL, generator=gen), positions),
    ]


@exercise(MHSA)
def causal_self_attention(cls: type) -> None:
    """Exercise 4.4: ``cls(d_model, num_heads, max_seq_len, rope_theta)`` is causal MHSA with RoPE."""
    refuse_library_object(MHSA, cls, _LIBRARY_MHSA, MHSA_TASK)
    module = call_learner(MHSA, cls, D_MODEL, NUM_HEADS, MAX_SEQ_LEN, THETA)
    facts = _module_facts(module)
    expect(MHSA, facts["is_module"], f"{describe(module)} is not an nn.Module — subclass nn.Module and call "
           "super().__init__()")
    for name, shape in facts["projections"].items():
        expect(MHSA, shape is not None, f"the module has no `{name}` with a weight — the CS336 interface names "
               f"the four projections {', '.join(PROJECTIONS)} (e.g. self.{name} = Linear(d_model, d_model))")
        expect(MHSA, tuple(shape) == (D_MODEL, D_MODEL), f"{name}.weight has shape {tuple(shape)}, expected "
               f"(d_model, d_model) = ({D_MODEL}, {D_MODEL}): all heads' projections stacked in one matrix")
    expect(MHSA, facts["n_params"] == 4 * D_MODEL**2, f"the module has {facts['n_params']} parameters, expected "
           f"4·d_model² = {4 * D_MODEL**2}: four bias-free (d_model, d_model) projections and nothing else")
    gen = fresh_generator()
    weights = {name: torch.randn(D_MODEL, D_MODEL, generator=gen) / math.sqrt(D_MODEL) for name in PROJECTIONS}
    probe(cls, _load_projections, module, weights)
    for name, x, positions in _mhsa_cases():
        args = (x,) if positions is None else (x, positions)
        at = torch.arange(x.shape[-2]) if positions is None else positions
        want = _mhsa(x, weights, at).to(x.dtype)  # before the learner's call, which gets copies
        got = call_learner(MHSA, module, *args, arg_names=("x", "token_positions"))
        if isinstance(got, torch.Tensor) and got.shape == want.shape and not _close(got, want, atol=1e-5):
            if bool(torch.isnan(got[..., 0, :]).any()) and bool(torch.isfinite(got[..., 1:, :]).all()):
                raise Hint(MHSA, "the first token's output is nan: your mask excludes the diagonal, so token 0 "
                           "may attend to nothing. A token sees itself — tril() with diagonal 0, not tril(-1) "
                           f"[case: {name}]")
            for variant, hint in MHSA_MISTAKES:
                if _close(got, _mhsa(x, weights, at, **variant).to(x.dtype)):
                    raise Hint(MHSA, f"{hint} [case: {name}]")
        expect_close(
            MHSA, got, want, f"the output does not match causal multi-head attention with RoPE [case: {name}]",
            shape_hint=f"forward(x) keeps x's shape (…, T, d_model) [case: {name}]",
            dtype_hint=f"return x's dtype [case: {name}]",
        )
    refuse_library_calls(MHSA, cls, _MHSA_CALLS, MHSA_TASK)
    passed(MHSA, "causal multi-head attention with RoPE matches for 3 heads of 8, with default and given positions; "
           "q_proj, k_proj, v_proj, output_proj are (d_model, d_model) and bias-free")
