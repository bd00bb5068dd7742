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
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from prenorm_lib import functional
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    Hint,
    call_learner,
    dense_tensor,
    describe,
    exercise,
    expect,
    expect_close,
    expect_input_gradients,
    expect_relative,
    expect_repeatable,
    expect_trains,
    finite_number,
    fresh_generator,
    n_parameters,
    number_hint,
    object_facts,
    passed,
    probe,
    refuse_library_calls,
    refuse_library_object,
    refuse_library_ops,
    tolerance,
)
from prenorm_lib.checks.probes import MODULE_CLASS, load_projections, set_training, to_dtype

__all__ = ["attention", "attention_mistake", "causal_self_attention", "score_spread", "stable_softmax"]

SOFTMAX, SPREAD, SDPA, MHSA = "4.1", "4.2", "4.3", "4.4"


def _close(got: Any, want: torch.Tensor, atol: float = 1e-4, rtol: float = 1e-3) -> bool:
    """Same shape and values within ``atol + rtol·|want|`` (non-finite entries must match exactly)."""
    if not dense_tensor(got) or got.shape != want.shape:
        return False
    a, b = got.detach().to(torch.float64), want.detach().to(torch.float64)
    finite = torch.isfinite(a) & torch.isfinite(b)
    if not bool((torch.isfinite(a) == torch.isfinite(b)).all()):
        return False
    return bool(((a - b).abs()[finite] <= atol + rtol * b.abs()[finite]).all())


def _variant(mistake: Callable[..., torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
    """A typical mistake's output on the checker's inputs, or all-nan where that mistake cannot even run
    on them (it then matches nothing): the checker's own variants must never crash a check."""
    try:
        return mistake(*args, **kwargs)
    except (RuntimeError, IndexError, ValueError):
        return torch.full((), float("nan"))


def _non_finite_where_finite(got: Any, want: torch.Tensor) -> bool:
    return (dense_tensor(got) and got.shape == want.shape
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
    """Inputs drawn afresh; the kinds stay: any dim of a 3-D tensor, dim 0, a masked −inf entry, float64,
    rows of large *negative* logits beside ordinary rows (the largest entry is small there, so a softmax
    that subtracts the maximum only when something is large gives 0/0), rows of large positive logits,
    and float16 rows near +11 and near −18 (exp overflows above 11.1 and underflows to 0 below −17.3)."""
    gen = fresh_generator()

    def uniform(shape: tuple[int, ...], low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(shape, generator=gen)

    def size() -> int:
        return int(torch.randint(2, 7, (), generator=gen))

    dim = int(torch.randint(-3, 3, (), generator=gen))
    n = size()
    negative = torch.cat([torch.randn(1, n, generator=gen),  # a row near 0, so the largest entry is small
                          uniform((2, 1), -1000.0, -100.0) + uniform((2, n), 0.0, 3.0)])  # rows near −100 … −1000
    # rows near +100 … +1000, in bands ≥ 150 apart: below the largest row exp underflows to 0 in float32
    positive = torch.cat([uniform((1, 1), 100.0, 200.0), uniform((1, 1), 350.0, 450.0),
                          uniform((1, 1), 600.0, 1000.0)])[torch.randperm(3, generator=gen)] + uniform((3, n), 0.0, 3.0)
    half = torch.stack([uniform((n,), 10.0, 12.0), uniform((n,), -20.0, -18.0)]).to(torch.float16)
    return [
        (f"x {(size(), size(), size())}, dim={dim}", torch.randn(size(), size(), size(), generator=gen), dim),
        ("x (4, 3), dim=0", torch.randn(4, 3, generator=gen), 0),
        ("x (2, 3, 6) with a masked −inf entry, dim=-1",
         torch.randn(2, 3, 6, generator=gen).index_fill(-1, torch.tensor([2]), float("-inf")), -1),
        (f"float64 x (3, {n}), dim=-1", torch.randn(3, n, generator=gen, dtype=torch.float64), -1),
        ("float32 rows near +100 … +1000, dim=-1", positive, -1),
        ("float32 rows near 0 and near −100 … −1000, dim=1", negative, 1),
        ("float16 rows near +11 and near −18, dim=-1", half, -1),
    ]


def _dropped_dim_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax whose max and sum dropped the reduced dimension (no keepdim); it runs where shapes broadcast."""
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim)


SOFTMAX_MISTAKES: tuple[tuple[Callable, str], ...] = (
    (lambda x, dim: _plain_softmax(x, -1),
     "your softmax ignores `dim` and always normalises over the last dimension; pass dim on to amax and sum"),
    (_log_softmax,
     "you returned log-probabilities (a log-softmax): exponentiate and divide by the sum instead"),
    (_dropped_dim_softmax, "the sum dropped the dimension it reduced, so it broadcast against the wrong axis of "
                           "exp: every value was divided by another row's sum"),
)

SOFTMAX_KEEPDIM_HINT = ("the max or the sum along dim dropped that dimension, so it no longer lines up with x; "
                        "a reduction that keeps it (keepdim) broadcasts back along dim")


def _call_softmax(fn: Callable, x: torch.Tensor, dim: int, name: str) -> Any:
    """The learner's softmax on one case; a broadcasting error gets the dropped-dimension explanation."""
    try:
        return call_learner(SOFTMAX, fn, x, dim, arg_names=("x", "dim"), in_place={
            "x": "build a new tensor, x - x.amax(...), the caller still needs x (x -= … changes it)"})
    except Hint as hint:
        if "must match the size of tensor" in hint.hint:
            raise Hint(SOFTMAX, f"{hint.hint} — {SOFTMAX_KEEPDIM_HINT} [case: {name}]") from None
        raise


def _softmax_contract(fn: Callable) -> None:
    """4.1 beyond its cases: a bfloat16 input (its own dtype back), the gradient to x, and a second call."""
    gen = fresh_generator()
    n, dim = int(torch.randint(3, 9, (), generator=gen)), int(torch.randint(-2, 2, (), generator=gen))
    half = (3 * torch.randn(4, n, generator=gen)).bfloat16()
    atol, rtol = tolerance(torch.bfloat16)
    expect_close(SOFTMAX, _call_softmax(fn, half, dim, "bfloat16"), torch.softmax(half.double(), dim).bfloat16(),
                 f"the probabilities do not match softmax(x, dim) for a bfloat16 x (4, {n}), dim={dim}", atol=atol,
                 rtol=rtol, dtype_hint="return x's dtype: a bfloat16 x gives bfloat16 probabilities")
    x, again = 3 * torch.randn(2, 3, n, generator=gen), 3 * torch.randn(2, 3, n, generator=gen)
    reference = lambda x, dim: torch.softmax(x.double(), dim).to(x.dtype)
    expect_input_gradients(SOFTMAX, fn, (x, dim), reference, ("x", "dim"))
    expect_repeatable(SOFTMAX, fn, (x, dim), reference(x, dim), (again, dim), reference(again, dim), atol=1e-6,
                      rtol=1e-5)


@exercise(SOFTMAX)
def stable_softmax(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise 4.1: ``fn(x, dim)`` is softmax along ``dim``, finite for large inputs, in x's dtype."""
    refuse_library_object(SOFTMAX, fn, EXERCISES[SOFTMAX].refuses, EXERCISES[SOFTMAX].task)
    for name, x, dim in _softmax_cases():
        want = torch.softmax(x.double(), dim=dim).to(x.dtype)  # before the learner's call, which gets a copy of x
        got = _call_softmax(fn, x, dim, name)
        if _non_finite_where_finite(got, want):
            if _close(got, _global_max_softmax(x, dim)) and not _close(got, _plain_softmax(x, dim)):
                raise Hint(SOFTMAX, f"subtract each row's own maximum (x.amax(dim=dim, keepdim=True)), not the "
                           f"maximum of the whole tensor: a row far below it underflows to 0/0 [case: {name}]")
            raise Hint(SOFTMAX, f"your softmax returns inf or nan where the answer is finite [case: {name}] — "
                       "exp overflows for large inputs (exp(89) is inf in float32, exp(12) in float16) and "
                       "underflows to 0 for a row of very negative ones (0/0 is nan): subtract the maximum along "
                       "dim first, always; it cancels in the ratio")
        finite = x[torch.isfinite(x)]
        # float32's rounding of the largest logit reaches every probability (x − logsumexp(x) near 1000: 6e-5)
        carried = 8 * torch.finfo(torch.float32).eps * (float(finite.abs().max()) if finite.numel() else 0.0)
        atol, rtol = tolerance(x.dtype) if x.dtype == torch.float16 else (1e-6, max(1e-5, carried))
        # a mistake is named only for what the comparison below rejects: never a correct answer's rounding
        if not _close(got, want, atol=max(atol, 2e-3 if x.dtype == torch.float16 else 1e-5), rtol=max(rtol, 1e-3)):
            for mistake, hint in SOFTMAX_MISTAKES:
                if _close(got, _variant(mistake, x.double(), dim).to(x.dtype)):
                    raise Hint(SOFTMAX, f"{hint} [case: {name}]")
            for other in range(x.ndim):  # any other dimension than the one asked for
                if other != dim % x.ndim and _close(got, _plain_softmax(x.double(), other).to(x.dtype)):
                    raise Hint(SOFTMAX, f"you normalised over dimension {other}, not over dim={dim}: the values "
                               f"along `dim` must sum to 1 [case: {name}]")
        expect_close(
            SOFTMAX, got, want, f"the probabilities do not match softmax(x, dim) [case: {name}]", atol=atol, rtol=rtol,
            shape_hint=f"softmax keeps x's shape [case: {name}]: use keepdim=True in amax and sum so they broadcast",
            dtype_hint=f"return x's dtype [case: {name}]",
        )
    _softmax_contract(fn)
    refuse_library_calls(SOFTMAX, fn, EXERCISES[SOFTMAX].refused_calls, EXERCISES[SOFTMAX].task)
    refuse_library_ops(SOFTMAX, fn, (x, dim), EXERCISES[SOFTMAX].refused_ops, EXERCISES[SOFTMAX].task)
    passed(SOFTMAX, "softmax matches torch.softmax on 7 cases (any dim, a −inf entry, rows of logits near −1000 "
           "and near +1000, float16 and float64)")


# ---------------------------------------------------------------------------
# Exercise 4.2: how large is q·k?

SPREAD_D_K = 64


@exercise(SPREAD)
def score_spread(answer: Any) -> None:
    """Exercise 4.2: the standard deviation of q·k for d_k = 64 independent N(0, 1) components."""
    value = finite_number(answer)
    if value is None:
        raise Hint(SPREAD, number_hint(answer, "one number, the standard deviation of q·k"))
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
    """Three inputs drawn afresh, sizes too (d_v ≠ d_k, so a scale by √d_v is told apart; the first d_k is
    9 … 16, so a scale written in as the old √8 fails on it)."""
    gen = fresh_generator()

    def size(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=gen))

    n_q, n_k, d_k, T = size(2, 5), size(3, 7), size(9, 16), size(3, 8)  # d_k never the old 8
    d_head = T + size(1, 8)  # ≠ T: weights returned instead of the output are told apart
    d_v = max(d_k, n_k) + size(1, 4)  # ≠ d_k and ≠ n_keys: weights returned instead of the output are told apart
    n_q2, d_k2 = size(2, 6), size(4, 12)
    n_k2 = n_q2 + size(1, 3)
    d_v2 = n_k2 + size(1, 3)
    free = torch.rand(n_q2, n_k2, generator=gen) < 0.6
    free[:, int(torch.randint(n_k2, (), generator=gen))] = True  # every query may attend to at least one key
    return [
        (f"Q (2, {n_q}, {d_k}), K (2, {n_k}, {d_k}), V (2, {n_k}, {d_v}), no mask",
         (torch.randn(2, n_q, d_k, generator=gen), torch.randn(2, n_k, d_k, generator=gen),
          torch.randn(2, n_k, d_v, generator=gen), None)),
        (f"(batch 2, heads 3, T {T}, d_k {d_head}) with the causal mask ({T}, {T})",
         (torch.randn(2, 3, T, d_head, generator=gen), torch.randn(2, 3, T, d_head, generator=gen),
          torch.randn(2, 3, T, d_head, generator=gen), functional.causal_mask(T))),
        (f"Q ({n_q2}, {d_k2}), K ({n_k2}, {d_k2}), V ({n_k2}, {d_v2}), a random mask ({n_q2}, {n_k2})",
         (2 * torch.randn(n_q2, d_k2, generator=gen), 2 * torch.randn(n_k2, d_k2, generator=gen),
          torch.randn(n_k2, d_v2, generator=gen), free)),
    ]


def _attention_contract(fn: Callable, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor) -> None:
    """4.3 beyond its float32 cases: float64 and bfloat16 inputs (Q's dtype back), the gradients to Q, K
    and V, and a second call."""
    for dtype in (torch.float64, torch.bfloat16):
        q, k, v = (t.to(dtype) for t in (Q, K, V))
        name = str(dtype).removeprefix("torch.")
        got = call_learner(SDPA, fn, q, k, v, mask, arg_names=("Q", "K", "V", "mask"))
        hint, keep = (f"on {name} inputs the output does not match softmax(Q Kᵀ/√d_k) V",
                      f"return Q's dtype: {name} inputs give a {name} output")
        if dtype is torch.bfloat16:  # scores rounded to bfloat16 move the weights by |s|·2⁻⁸: no elementwise bound
            expect_relative(SDPA, got, _sdpa(q, k, v, mask).to(dtype), hint, dtype_hint=keep)
        else:
            atol, rtol = tolerance(dtype)
            expect_close(SDPA, got, _sdpa(q, k, v, mask).to(dtype), hint, atol=atol, rtol=rtol, dtype_hint=keep)
    reference = lambda Q, K, V, mask: _sdpa(Q, K, V, mask).to(Q.dtype)
    expect_input_gradients(SDPA, fn, (Q, K, V, mask), reference, ("Q", "K", "V", "mask"))
    gen = fresh_generator()
    again = tuple(torch.randn(t.shape, generator=gen) for t in (Q, K, V))
    expect_repeatable(SDPA, fn, (Q, K, V, mask), reference(Q, K, V, mask), (*again, mask), reference(*again, mask))


@exercise(SDPA)
def attention(fn: Callable) -> None:
    """Exercise 4.3: ``fn(Q, K, V, mask=None)`` is softmax(Q Kᵀ/√d_k) V with a boolean mask (True = attend)."""
    refuse_library_object(SDPA, fn, EXERCISES[SDPA].refuses, EXERCISES[SDPA].task)
    for name, (Q, K, V, mask) in _sdpa_cases():
        want = _sdpa(Q, K, V, mask).to(Q.dtype)  # before the learner's call, which gets copies
        got = call_learner(SDPA, fn, Q, K, V, mask, arg_names=("Q", "K", "V", "mask"))
        if not _close(got, want, atol=1e-5):
            for variant, hint in SDPA_MISTAKES:
                if mask is None and any(k in variant for k in ("fill", "after", "inverted")):
                    continue
                if _close(got, _variant(_sdpa, Q, K, V, mask, **variant).to(Q.dtype)):
                    raise Hint(SDPA, f"{hint} [case: {name}]")
            if isinstance(got, torch.Tensor) and got.shape == (*Q.shape[:-1], K.shape[-2]) != want.shape:
                raise Hint(SDPA, f"you returned the attention weights (n_queries, n_keys) [case: {name}]; "
                           "return their product with V, (…, n_queries, d_v)")
        expect_close(
            SDPA, got, want, f"the output does not match softmax(Q Kᵀ/√d_k) V [case: {name}]",
            shape_hint=f"the output is (…, n_queries, d_v) = {tuple(want.shape)} [case: {name}]: multiply the "
                       "weights (…, n_queries, n_keys) by V (…, n_keys, d_v); transpose K's last two dimensions "
                       "with K.transpose(-2, -1), not K.T",
            dtype_hint=f"return Q's dtype [case: {name}]",
        )
    _attention_contract(fn, Q, K, V, mask)
    refuse_library_calls(SDPA, fn, EXERCISES[SDPA].refused_calls, EXERCISES[SDPA].task)
    refuse_library_ops(SDPA, fn, (Q, K, V, mask), EXERCISES[SDPA].refused_ops, EXERCISES[SDPA].task)
    passed(SDPA, "attention matches softmax(Q Kᵀ/√d_k) V on 3 cases (no mask, the causal mask over heads, a random "
           "mask with n_queries ≠ n_keys)")


# ---------------------------------------------------------------------------
# Exercise 4.4: causal multi-head self-attention with RoPE, the CS336 interface

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "output_proj")


class Layer(NamedTuple):
    """The constructor arguments of one 4.4 check, drawn afresh: ``cls(d_model, num_heads, max_seq_len, θ)``."""

    d_model: int
    num_heads: int
    max_seq_len: int
    rope_theta: float


def _layer(gen: torch.Generator) -> Layer:
    """Every constructor argument drawn: 2 to 4 heads of 4, 6 or 8 channels, a context of 12 … 24 positions,
    and θ log-uniform over 200 … 200 000 but never near the usual 10 000, so a θ written into the layer
    instead of ``rope_theta`` (or a head count, a width, a context length) cannot pass by luck."""

    def pick(options: tuple) -> Any:
        return options[int(torch.randint(len(options), (), generator=gen))]

    num_heads, d_head = pick((2, 3, 4)), pick((4, 6, 8))
    theta = 10000.0
    while 7000.0 <= theta <= 14000.0:
        theta = round(float(torch.empty((), dtype=torch.float64).uniform_(math.log(200), math.log(2e5),
                                                                          generator=gen).exp()))
    return Layer(num_heads * d_head, num_heads, int(torch.randint(12, 25, (), generator=gen)), theta)


def _rope(x: torch.Tensor, positions: torch.Tensor, layer: Layer) -> torch.Tensor:
    """Interleaved RoPE of x (..., T, d) at ``positions`` (T,), in x's dtype."""
    angles = functional.rope_angles(layer.rope_theta, x.shape[-1], layer.max_seq_len)[positions]  # (T, d/2)
    return functional.apply_rope(x, angles.cos(), angles.sin())


def _mhsa(x: torch.Tensor, w: dict[str, torch.Tensor], positions: torch.Tensor, layer: Layer, *, mask="causal",
          split="right", rope="qk", project=True, scale="head", merge="right") -> torch.Tensor:
    """Causal MHSA with RoPE in float64, from the four weights; keyword arguments name a mistake."""
    x = x.double()
    w = {k: v.double() for k, v in w.items()}
    T, H, d_head = x.shape[-2], layer.num_heads, layer.d_model // layer.num_heads

    def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, d_model) → (B, H, T, d_head)
        if split == "head_last":  # d_model read as (d_head, H): heads take every H-th channel
            return t.unflatten(-1, (d_head, H)).transpose(-1, -2).transpose(-3, -2)
        if split == "no_transpose":  # (B, T, d) reshaped straight to (B, H, T, d_head): tokens mixed into heads
            return t.reshape(*t.shape[:-2], H, T, d_head)
        return t.unflatten(-1, (H, d_head)).transpose(-3, -2)

    q, k, v = x @ w["q_proj"].T, x @ w["k_proj"].T, x @ w["v_proj"].T  # (B, T, d_model)
    if rope == "concatenated":  # one rotation over all d_model channels, before the split
        q, k = _rope(q, positions, layer), _rope(k, positions, layer)
    q, k, v = heads(q), heads(k), heads(v)  # (B, H, T, d_head)
    if rope in ("qk", "qkv"):
        q, k = _rope(q, positions, layer), _rope(k, positions, layer)
    if rope == "qkv":
        v = _rope(v, positions, layer)
    if rope == "default_positions":
        q, k = _rope(q, torch.arange(T), layer), _rope(k, torch.arange(T), layer)
    if rope == "theta_10000":  # the usual θ written into the layer instead of its rope_theta argument
        q, k = (_rope(t, positions, layer._replace(rope_theta=10000.0)) for t in (q, k))
    scores = q @ k.transpose(-2, -1) / math.sqrt(layer.d_model if scale == "model" else d_head)  # (B, H, T, T)
    if mask != "none":
        allowed = torch.ones(T, T, dtype=torch.bool).tril({"strict": -1, "one_ahead": 1}.get(mask, 0))
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d_head)
    # (B, T, d_model); the mistake reshapes (B, H, T, d_head) straight to it, heads still in front
    out = (out.reshape(*out.shape[:-3], T, layer.d_model) if merge == "no_transpose"
           else out.transpose(-3, -2).flatten(-2))
    return out @ w["output_proj"].T if project else out


MHSA_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"mask": "none"}, "no causal mask: every token reads the tokens after it. Mask the scores with "
                       "torch.ones(T, T, dtype=torch.bool).tril() before the softmax"),
    ({"mask": "one_ahead"}, "the causal mask is off by one: each token also reads the token right after it. "
                            "Token i may see tokens 0 … i — tril() with diagonal 0, or triu(1) for the masked part"),
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
    ({"split": "no_transpose", "merge": "no_transpose"},
     "the heads were reshaped without a transpose, both ways: (B, T, d_model) reshaped straight to "
     "(B, H, T, d_head) cuts the token axis into the heads, so each head sees pieces of several tokens; the "
     "shapes line up, the tokens do not"),
    ({"rope": "theta_10000"}, "the rotation uses θ = 10000, not the layer's rope_theta argument: build the RoPE "
                              "from the rope_theta you are given"),
)


STRICT_MASK_HINT = ("the first token's output is nan: your mask excludes the diagonal, so token 0 may attend to "
                    "nothing. A token sees itself — tril() with diagonal 0, not tril(-1)")


def attention_mistake(got: Any, x: torch.Tensor, weights: dict[str, torch.Tensor], positions: torch.Tensor,
                      layer: Layer) -> str | None:
    """The hint of the first typical mistake of causal multi-head attention whose output ``got`` is, or None.

    4.4's catalogue, shared by 6.5: ``weights`` maps q_proj, k_proj, v_proj, output_proj to their
    (d_model, d_model) weights; ``positions`` are (T,), or (batch, 1, T) for one row per sequence.
    """
    if not dense_tensor(got):
        return None
    if bool(torch.isnan(got[..., 0, :]).any()) and bool(torch.isfinite(got[..., 1:, :]).all()):
        return STRICT_MASK_HINT
    for variant, hint in MHSA_MISTAKES:
        if _close(got, _variant(_mhsa, x, weights, positions, layer, **variant).to(got.dtype)):
            return hint
    return None


def _module_facts(module: Any) -> dict:
    """What Exercise 4.4 reads from the facts the learner's kernel reports (type names, shapes, parameter count).

    They only name a mistake early (no ``q_proj``, a bias): a pass never rests on them. That the
    four weights are the parameters forward uses is shown by values (``expect_trains``).
    """
    raw = object_facts(module, [f"{name}.weight" for name in PROJECTIONS])
    facts: dict[str, Any] = {"is_module": MODULE_CLASS in raw["types"], "projections": {},
                             "n_params": n_parameters(raw)}
    for name in PROJECTIONS:
        weight = raw["attributes"].get(f"{name}.weight")
        tensor = weight["tensor"] if weight is not None else None
        facts["projections"][name] = list(tensor.shape) if isinstance(tensor, torch.Tensor) else None
    return facts


def _mhsa_cases(layer: Layer, gen: torch.Generator) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """Two inputs for ``layer``: default positions over 6 … max_seq_len tokens, and five increasing
    token_positions that are not consecutive (RoPE's scores see only differences, so a shift of 0 … 4
    alone would change nothing)."""
    d, n = layer.d_model, layer.max_seq_len
    T = int(torch.randint(6, n + 1, (), generator=gen))
    positions = torch.randperm(n - 1, generator=gen)[:5].add(1).sort().values
    while bool((positions.diff() == 1).all()):
        positions = torch.randperm(n - 1, generator=gen)[:5].add(1).sort().values
    return [
        (f"x (2, {T}, {d}), positions 0 … {T - 1} (token_positions=None)", torch.randn(2, T, d, generator=gen),
         None),
        (f"x (2, 5, {d}), five increasing token_positions, not consecutive", torch.randn(2, 5, d, generator=gen),
         positions),
    ]


TRAINS_HINT = ("after one gradient step the output is wrong: a projection's weight is not an nn.Parameter of the "
               "module, or forward computes with something other than those parameters (a copy, a detached "
               "tensor)")
# The gradient is ~9× the weights (median over 300 draws): at lr 0.02 a correct float32 layer stays within 0.06 of
# the tolerance after the step, one weight left out of it misses by ≥ 1375× the tolerance (lr 0.5 fails a correct
# layer: 17× the tolerance)
TRAINS_LR = 0.02

HEAD_AXIS_HINT = ("the token axis is not where RoPE and the scores look for it, second to last: were the heads "
                  "split off d_model but left behind the tokens, (B, T, H, d_head) instead of (B, H, T, d_head)?")


def _call_layer(module: Any, args: tuple, name: str) -> Any:
    """The learner's forward on one case; a shape error inside it gets the head-axis explanation."""
    try:
        return call_learner(MHSA, module, *args, arg_names=("x", "token_positions"))
    except Hint as hint:
        if "second-to-last dim of x" in hint.hint or "must match the size of tensor" in hint.hint:
            raise Hint(MHSA, f"{hint.hint} — {HEAD_AXIS_HINT} [case: {name}]") from None
        raise


def _layer_contract(cls: type, module: Any, weights: dict[str, torch.Tensor], layer: Layer,
                    gen: torch.Generator) -> None:
    """4.4 beyond its two cases: eval mode, the whole context with shuffled positions, positions with an
    offset, float64 weights and input (float64 back), the gradient to x, a second call. Its x is (batch, T,
    d_model), as the exercise says."""
    n, d = layer.max_seq_len, layer.d_model
    sized = f"{layer.num_heads} heads, rope_theta={layer.rope_theta:g}, max_seq_len={n}"
    T = int(torch.randint(3, n - 1, (), generator=gen))
    start = int(torch.randint(1, n - T + 1, (), generator=gen))
    cases = [
        (f"x (2, {n}, {d}): the whole context, token_positions shuffled (causal by order, RoPE by position)",
         torch.randn(2, n, d, generator=gen), torch.randperm(n, generator=gen)),
        (f"x (3, {T}, {d}), token_positions {start} … {start + T - 1}",
         torch.randn(3, T, d, generator=gen), torch.arange(start, start + T)),
    ]
    for what, x, positions in cases:
        got = _call_layer(module, (x, positions), what)
        expect_close(MHSA, got, _mhsa(x, weights, positions, layer).to(x.dtype), f"the output does not match causal "
                     f"multi-head attention with RoPE [case: {what}; {sized}]",
                     shape_hint=f"forward(x) keeps x's shape (…, T, d_model) [case: {what}]")
    x = torch.randn(2, n, d, generator=gen)
    want = _mhsa(x, weights, torch.arange(n), layer).to(x.dtype)
    probe(cls, set_training, module, False)
    got = _call_layer(module, (x,), "eval mode")
    probe(cls, set_training, module, True)
    expect_close(MHSA, got, want, f"in eval mode (module.eval()) the output differs from training mode's: causal "
                 f"attention with RoPE does the same in both [case: x (2, {n}, {d}); {sized}]")
    expect_input_gradients(MHSA, module, (x,), lambda x: _mhsa(x, weights, torch.arange(n), layer).to(x.dtype), ("x",))
    again = torch.randn(2, n, d, generator=gen)
    expect_repeatable(MHSA, module, (x,), want, (again,), _mhsa(again, weights, torch.arange(n), layer).to(x.dtype))
    probe(cls, to_dtype, module, torch.float64)
    try:
        x64 = x.double()
        expect_close(MHSA, _call_layer(module, (x64,), "float64"), _mhsa(x64, weights, torch.arange(n), layer),
                     f"with float64 weights and input (module.double()) the output is wrong [case: x (2, {n}, {d})]",
                     dtype_hint="return x's dtype: a float64 layer on a float64 input gives "
                     "float64 (no .float() inside)")
    finally:
        probe(cls, to_dtype, module, torch.float32)


@exercise(MHSA)
def causal_self_attention(cls: type) -> None:
    """Exercise 4.4: ``cls(d_model, num_heads, max_seq_len, rope_theta)`` is causal MHSA with RoPE.

    Every constructor argument is drawn afresh (``_layer``), so the layer must use each one.
    Whether the four projection weights are parameters that forward uses is decided from
    values, not from the facts the learner's kernel reports: the layer takes one gradient
    step and must then match the reference with the weights moved by that step.
    """
    refuse_library_object(MHSA, cls, EXERCISES[MHSA].refuses, EXERCISES[MHSA].task)
    gen = fresh_generator()
    layer = _layer(gen)
    d = layer.d_model
    built = f"(built with d_model={d}, num_heads={layer.num_heads})"
    module = call_learner(MHSA, cls, *layer)
    facts = _module_facts(module)
    expect(MHSA, facts["is_module"], f"{describe(module)} is not an nn.Module — subclass nn.Module and call "
           "super().__init__()")
    for name, shape in facts["projections"].items():
        expect(MHSA, shape is not None, f"the module has no `{name}` with a weight — the CS336 interface names "
               f"the four projections {', '.join(PROJECTIONS)} (e.g. self.{name} = Linear(d_model, d_model))")
        expect(MHSA, tuple(shape) == (d, d), f"{name}.weight has shape {tuple(shape)} {built}, expected "
               f"(d_model, d_model) = ({d}, {d}): all heads' projections stacked in one matrix")
    expect(MHSA, facts["n_params"] == 4 * d**2, f"the module has {facts['n_params']} parameters, expected "
           f"4·d_model² = {4 * d**2} {built}: four bias-free (d_model, d_model) projections and nothing else")
    weights = {name: torch.randn(d, d, generator=gen) / math.sqrt(d) for name in PROJECTIONS}
    probe(cls, load_projections, module, weights)
    for name, x, positions in _mhsa_cases(layer, gen):
        name = f"{name}, {layer.num_heads} heads, rope_theta={layer.rope_theta:g}, max_seq_len={layer.max_seq_len}"
        args = (x,) if positions is None else (x, positions)
        at = torch.arange(x.shape[-2]) if positions is None else positions
        want = _mhsa(x, weights, at, layer).to(x.dtype)  # before the learner's call, which gets copies
        got = _call_layer(module, args, name)
        if dense_tensor(got) and got.shape == want.shape and not _close(got, want, atol=1e-5):
            hint = attention_mistake(got, x, weights, at, layer)
            if hint is not None:
                raise Hint(MHSA, f"{hint} [case: {name}]")
        expect_close(
            MHSA, got, want, f"the output does not match causal multi-head attention with RoPE [case: {name}]",
            shape_hint=f"forward(x) keeps x's shape (…, T, d_model) [case: {name}]",
            dtype_hint=f"return x's dtype [case: {name}]",
        )
    x = torch.randn(2, int(torch.randint(6, layer.max_seq_len + 1, (), generator=gen)), d, generator=gen)
    expect_trains(MHSA, cls, module, lambda x, **w: _mhsa(x, w, torch.arange(x.shape[-2]), layer).to(x.dtype),
                  weights, x, TRAINS_HINT, lr=TRAINS_LR)
    probe(cls, load_projections, module, weights)  # back to the checker's weights, which the step moved
    _layer_contract(cls, module, weights, layer, gen)
    refuse_library_calls(MHSA, cls, EXERCISES[MHSA].refused_calls, EXERCISES[MHSA].task)
    refuse_library_ops(MHSA, module, (x,), EXERCISES[MHSA].refused_ops, EXERCISES[MHSA].task)
    passed(MHSA, "causal multi-head attention with RoPE matches for drawn heads, widths, contexts and rope_theta, "
           "with default and given positions; q_proj, k_proj, v_proj, output_proj are (d_model, d_model) and "
           "bias-free")
