"""Stateless kernels: the mathematics of the pre-norm block, one function each.

These are written from the equations (CS336 handout §3.4–3.5) with plain tensor ops, so
that a learner can read every step, and compared by the tests with torch's own
implementations. The modules in this package own the parameters and call these kernels,
except where torch has a faster op that computes the same thing — fused attention and
SiLU, and RoPE's interleaved pairs as one complex product; the tests prove each of those
equal to the kernel here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from prenorm_lib import validation

__all__ = [
    "apply_rope",
    "bilinear_glu",
    "causal_mask",
    "derf",
    "dyt",
    "gated_ffn",
    "geglu",
    "gelu",
    "layer_norm",
    "reglu",
    "relu",
    "rms_norm",
    "prms_norm",
    "rope_angles",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
    "swiglu",
]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5, *, upcast: bool = True) -> torch.Tensor:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x**2) + eps) * weight``.

    The arithmetic happens in (at least) float32 whatever the input dtype: the squares of
    fp16 activations of a few hundred already overflow fp16's maximum (65504), and bf16
    has too few mantissa bits for an accurate mean. The result is cast back to ``x.dtype``.
    ``upcast=False`` computes in the input's own dtype — the mistake the upcast prevents,
    kept so that notebook 01 can show what goes wrong.
    """
    validation.floating("x", x)
    validation.last_dim("weight", weight, x.shape[-1], "x.shape[-1]")
    if weight.ndim != 1:
        raise ValueError(f"weight must be 1-D with shape ({x.shape[-1]},), got {tuple(weight.shape)}")
    validation.positive_float("eps", eps)
    compute_dtype = torch.promote_types(x.dtype, torch.float32) if upcast else x.dtype
    xc = x.to(compute_dtype)
    inv_rms = torch.rsqrt(xc.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    return (xc * inv_rms * weight.to(compute_dtype)).to(x.dtype)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """LayerNorm over the last dimension: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Written with the same elementary ops as :func:`rms_norm` (upcast, mean of squares,
    ``rsqrt``, two multiplications) plus what LayerNorm adds: one more mean, a subtraction
    and the bias. Timing the two therefore compares the formulas, not two implementations;
    torch's ``F.layer_norm`` is one fused kernel and would compare the implementations.
    ``var`` is the biased variance (divided by d), as in torch. ``bias=None`` is LayerNorm
    without bias, which equals RMSNorm on a vector whose mean is already zero.
    """
    validation.floating("x", x)
    for name, parameter in (("weight", weight), ("bias", bias)):
        if name == "bias" and parameter is None:
            continue
        validation.last_dim(name, parameter, x.shape[-1], "x.shape[-1]")
        if parameter.ndim != 1:
            raise ValueError(f"{name} must be 1-D with shape ({x.shape[-1]},), got {tuple(parameter.shape)}")
    validation.positive_float("eps", eps)
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute_dtype)
    centred = xc - xc.mean(dim=-1, keepdim=True)  # (..., d)
    inv_std = torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    out = centred * inv_std * weight.to(compute_dtype)
    if bias is not None:
        out = out + bias.to(compute_dtype)
    return out.to(x.dtype)


PRMS_FRACTION = 0.0625  # Zhang & Sennrich's p = 6.25 %


def prms_norm(x: torch.Tensor, weight: torch.Tensor, p: float = PRMS_FRACTION, eps: float = 1e-5) -> torch.Tensor:
    """Partial RMSNorm (Zhang & Sennrich 2019): the RMS is estimated from the first ``p`` of the channels.

    When channels are roughly exchangeable, the mean square of the first ``ceil(p·d)``
    channels estimates that of all ``d``, so the reduction reads only a fraction of the
    vector; the rescaling still touches every element. The paper used p = 6.25 %.
    """
    validation.floating("x", x)
    validation.last_dim("weight", weight, x.shape[-1], "x.shape[-1]")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"p must be a fraction in (0, 1], got {p!r}")
    validation.positive_float("eps", eps)
    k = max(1, math.ceil(p * x.shape[-1]))
    x32 = x.to(torch.promote_types(x.dtype, torch.float32))
    inv_rms = torch.rsqrt(x32[..., :k].pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    return (x32 * inv_rms * weight.to(x32.dtype)).to(x.dtype)


def _pointwise_affine(x: torch.Tensor, squashed: torch.Tensor, weight: torch.Tensor,
                      bias: torch.Tensor | None) -> torch.Tensor:
    """``weight * squashed + bias`` in the compute dtype of ``squashed``, cast back to ``x.dtype``."""
    out = squashed * weight.to(squashed.dtype)
    if bias is not None:
        out = out + bias.to(squashed.dtype)
    return out.to(x.dtype)


def _check_pointwise(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                     **scalars: torch.Tensor) -> None:
    validation.floating("x", x)
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is None:
            continue
        validation.last_dim(name, parameter, x.shape[-1], "x.shape[-1]")
        if parameter.ndim != 1:
            raise ValueError(f"{name} must be 1-D with shape ({x.shape[-1]},), got {tuple(parameter.shape)}")
    for name, scalar in scalars.items():
        validation.tensor(name, scalar)
        if scalar.numel() != 1:
            raise ValueError(f"{name} must be a single learnable number (numel 1), got shape {tuple(scalar.shape)}")


def dyt(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Dynamic Tanh (Zhu et al. 2025): ``weight * tanh(alpha * x) + bias``, element by element.

    No statistic of the vector is computed: one learnable scalar ``alpha`` sets the input's
    scale for every element alike, and tanh squashes the extreme values that a norm would
    divide down. ``weight`` and ``bias`` are the per-channel gain and shift of a norm;
    ``bias=None`` drops the shift, as DyT's LLaMA code does where it replaces RMSNorm
    (which has no bias). Computed in (at least) float32 like :func:`rms_norm`.
    """
    _check_pointwise(x, weight, bias, alpha=alpha)
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    squashed = torch.tanh(alpha.to(compute_dtype) * x.to(compute_dtype))  # (..., d)
    return _pointwise_affine(x, squashed, weight, bias)


def derf(x: torch.Tensor, alpha: torch.Tensor, shift: torch.Tensor, weight: torch.Tensor,
         bias: torch.Tensor | None = None) -> torch.Tensor:
    """Dynamic erf (Chen et al. 2025, "Derf"): ``weight * erf(alpha * x + shift) + bias``.

    DyT's slot with the error function erf(z) = 2/√π ∫₀ᶻ e^(−t²) dt in place of tanh and one
    more learnable scalar, the ``shift`` s inside it. As for :func:`dyt`, ``bias=None``
    drops the per-channel shift.
    """
    _check_pointwise(x, weight, bias, alpha=alpha, shift=shift)
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    squashed = torch.erf(alpha.to(compute_dtype) * x.to(compute_dtype) + shift.to(compute_dtype))  # (..., d)
    return _pointwise_affine(x, squashed, weight, bias)


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(0, x): the activation of the original Transformer's feed-forward network."""
    return torch.clamp_min(x, 0)


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU (Swish with beta = 1): ``x * sigmoid(x)``; smooth, and non-zero for x < 0."""
    return x * torch.sigmoid(x)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU (Hendrycks & Gimpel 2016): ``x · Φ(x)`` with Φ the standard normal CDF, exact (erf) form.

    Φ(x) = ½ (1 + erf(x / √2)). BERT and GPT-2 used a tanh approximation of it; this is the
    exact function, the default of ``torch.nn.functional.gelu``.
    """
    return 0.5 * x * (1 + torch.erf(x * (1 / math.sqrt(2))))


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax along ``dim``, stable for large inputs.

    Subtracting the maximum leaves the result unchanged (it cancels in the ratio) but
    keeps ``exp`` from overflowing: softmax([1000, 1000]) is [0.5, 0.5], not nan.
    """
    shifted = x - x.amax(dim=dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def swiglu(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """SwiGLU feed-forward: ``W2 (SiLU(W1 x) * W3 x)``, weights stored (out, in).

    ``w1`` and ``w3`` are (d_ff, d_model); ``w2`` is (d_model, d_ff). ``W1 x`` is the gate,
    ``W3 x`` the value it scales: the product is linear in the value path, which gives
    gradients a route that no activation squashes. The gate uses torch's fused SiLU (one
    kernel forward and backward instead of three); the tests prove it equals :func:`silu`.
    """
    gate = torch.nn.functional.silu(x @ w1.T)  # (..., d_ff)
    value = x @ w3.T  # (..., d_ff)
    return (gate * value) @ w2.T  # (..., d_model)


def gated_ffn(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w3: torch.Tensor,
    activation: Callable[[torch.Tensor], torch.Tensor] | None,
) -> torch.Tensor:
    """Shazeer's (2020) gated FFN ``W2 (act(W1 x) ⊙ W3 x)``; ``activation=None`` is his Bilinear.

    Weights are stored (out, in) like :func:`swiglu`'s. The activation acts on the gate
    ``W1 x`` only; the value ``W3 x`` enters the product linearly.
    """
    gate = x @ w1.T  # (..., d_ff)
    if activation is not None:
        gate = activation(gate)
    return (gate * (x @ w3.T)) @ w2.T  # (..., d_model)


def geglu(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """GEGLU: ``W2 (GELU(W1 x) ⊙ W3 x)``, with torch's fused exact GELU (equal to :func:`gelu`)."""
    return gated_ffn(x, w1, w2, w3, torch.nn.functional.gelu)


def reglu(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """ReGLU: ``W2 (ReLU(W1 x) ⊙ W3 x)``."""
    return gated_ffn(x, w1, w2, w3, torch.relu)


def bilinear_glu(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """Shazeer's "Bilinear" FFN: ``W2 (W1 x ⊙ W3 x)``, a gate with no nonlinearity at all.

    Each hidden unit is a product of two linear functions of x, a quadratic form; the
    network is still nonlinear in x, through the product alone.
    """
    return gated_ffn(x, w1, w2, w3, None)


def causal_mask(seq_len: int, device: torch.device | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True where query i may attend to key j (j <= i)."""
    validation.positive_int("seq_len", seq_len)
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """softmax(Q Kᵀ / sqrt(d_k)) V, for any number of leading dimensions.

    Q is (..., n_queries, d_k), K is (..., n_keys, d_k), V is (..., n_keys, d_v).
    ``mask`` is boolean, broadcastable to (..., n_queries, n_keys), True = may attend
    (the convention of ``torch.nn.functional.scaled_dot_product_attention``).
    """
    for name, t in (("Q", Q), ("K", K), ("V", V)):
        validation.floating(name, t)
    if K.shape[-1] != Q.shape[-1]:
        raise ValueError(f"K must have last dimension d_k={Q.shape[-1]} like Q, got shape {tuple(K.shape)}")
    if V.shape[-2] != K.shape[-2]:
        raise ValueError(
            f"V must have as many rows as K (n_keys={K.shape[-2]}), got shape {tuple(V.shape)}"
        )
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., n_queries, n_keys)
    if mask is not None:
        validation.tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
        if not _broadcasts_to(mask.shape, scores.shape):
            raise ValueError(
                f"mask must broadcast to the scores' shape (..., n_queries, n_keys)={tuple(scores.shape)}, "
                f"got shape {tuple(mask.shape)}"
            )
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V  # (..., n_queries, d_v)


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    """True if a tensor of ``shape`` broadcasts to ``target`` without changing ``target``."""
    try:
        return len(shape) >= 2 and torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        return False


def rope_angles(theta: float, d_k: int, max_seq_len: int) -> torch.Tensor:
    """Rotation angles (max_seq_len, d_k // 2): position i, pair k turns by i · theta^(-2k/d_k).

    Pair 0 turns by one radian per position (a fast clock); the last pair, k = d_k/2 − 1,
    by theta^(−(d_k−2)/d_k) (a slow clock; close to theta⁻¹ only for large d_k).
    Computed in float64 so that large positions keep their accuracy before the cast to
    float32.
    """
    validation.positive_float("theta", theta)
    validation.positive_int("d_k", d_k)
    validation.positive_int("max_seq_len", max_seq_len)
    if d_k % 2:
        raise ValueError(f"d_k must be even for RoPE (it rotates pairs of dimensions), got {d_k}")
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
    positions = torch.arange(max_seq_len, dtype=torch.float64)  # (max_seq_len,)
    return torch.outer(positions, inv_freq)  # (max_seq_len, d_k/2)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "interleaved"
) -> torch.Tensor:
    """Rotate pairs of the last dimension of ``x`` by angles whose cos/sin are given.

    ``x`` is (..., seq_len, d_k); ``cos`` and ``sin`` are (..., seq_len, d_k/2) and
    broadcast against it. ``pairing`` says which dimensions form a pair:

    - ``"interleaved"`` (RoFormer, CS336): (0, 1), (2, 3), …
    - ``"half"`` (Hugging Face Llama's ``rotate_half``): (0, d/2), (1, d/2 + 1), …

    Both are the same rotation once the dimensions are permuted; no d×d matrix is built.
    """
    validation.choice("pairing", pairing, ("interleaved", "half"))
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    if pairing == "interleaved":
        # Pair (x1, x2) becomes (x1 cos − x2 sin, x2 cos + x1 sin). Written as
        # x ⊙ [cos, cos] + swap(x) ⊙ [−sin, sin], it needs one pass over x per term; the
        # repeated cos/sin are only (seq_len, d_k), and the sums are bit-for-bit the same.
        cos_pairs = cos.repeat_interleave(2, dim=-1)  # (..., seq_len, d_k): c0 c0 c1 c1 …
        sin_pairs = torch.stack((-sin, sin), dim=-1).flatten(-2)  # (..., seq_len, d_k): −s0 s0 −s1 s1 …
        swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (..., seq_len, d_k): x1 x0 x3 x2 …
        return x * cos_pairs + swapped * sin_pairs
    x1, x2 = x.chunk(2, dim=-1)  # (..., seq_len, d_k/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
