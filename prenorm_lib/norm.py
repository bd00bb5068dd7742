"""The normalisers a block can use: RMSNorm, and two point-wise functions that replace it.

RMSNorm is introduced in notebook 01: a module that owns the gain and calls
:func:`functional.rms_norm`. Notebook 01's optional deep dive asks whether a model needs
the normalisation at all, with two replacements that compute no statistic of the vector:

- :class:`DynamicTanh` (DyT, Zhu et al. 2025): ``γ · tanh(α x)``, one learnable scalar α;
- :class:`DynamicErf` (Derf, Chen et al. 2025): ``γ · erf(α x + s)``, learnable α and s.

Both replace *every* RMSNorm of a model (``ModelConfig(normaliser="dyt")``): the block's
norms, QK-norm where there is one, and the final norm. Where they replace RMSNorm they
keep its parameters' shape (a per-channel gain γ, no bias β), as DyT's own LLaMA code does;
the papers' general form adds β, which the kernels in :mod:`functional` accept.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import functional, validation

# DyT §4: "a default initialization of 0.5 is generally sufficient, except for LLM training"
# (§7.2 tunes α₀ for LLMs, larger in attention blocks). Derf §5 initialises α to 0.5, s to 0.
DYT_ALPHA0 = 0.5
DERF_ALPHA0 = 0.5
DERF_SHIFT0 = 0.0


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension with a learnable gain.

    ``weight`` (the gain g) starts at ones, so a fresh RMSNorm only rescales each vector to
    unit RMS; training then learns how loud each channel should be.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.eps = validation.positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        return functional.rms_norm(x, self.weight, self.eps)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class DynamicTanh(nn.Module):
    """DyT: ``weight * tanh(alpha * x)``, element-wise, in place of a norm.

    ``alpha`` is one learnable scalar, initialised to ``alpha0``; ``weight`` (γ) starts at
    ones like a norm's gain. Nothing is computed across the vector: ``alpha`` learns a scale
    for the whole input, and tanh squashes what lies far out.
    """

    def __init__(self, d_model: int, alpha0: float = DYT_ALPHA0, device=None, dtype=None):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.alpha0 = validation.positive_float("alpha0", alpha0)
        self.alpha = nn.Parameter(torch.full((), alpha0, device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        return functional.dyt(x, self.alpha, self.weight)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.d_model}, alpha0={self.alpha0}"


class DynamicErf(nn.Module):
    """Derf: ``weight * erf(alpha * x + shift)``, element-wise, in place of a norm.

    ``alpha`` starts at ``alpha0`` and ``shift`` at 0 (Derf §5); ``weight`` at ones.
    """

    def __init__(self, d_model: int, alpha0: float = DERF_ALPHA0, device=None, dtype=None):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.alpha0 = validation.positive_float("alpha0", alpha0)
        self.alpha = nn.Parameter(torch.full((), alpha0, device=device, dtype=dtype))
        self.shift = nn.Parameter(torch.full((), DERF_SHIFT0, device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        return functional.derf(x, self.alpha, self.shift, self.weight)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.d_model}, alpha0={self.alpha0}"


NORMALISERS = ("rmsnorm", "dyt", "derf")  # what ModelConfig(normaliser=...) accepts
POINTWISE = ("dyt", "derf")  # the normalisers that compute no statistic (and take an α₀)


def make_norm(kind: str, d_model: int, eps: float = 1e-5, alpha0: float | None = None,
              device=None, dtype=None) -> nn.Module:
    """The normaliser ``kind`` (one of :data:`NORMALISERS`) over ``d_model`` channels.

    ``eps`` is RMSNorm's; ``alpha0`` the initial α of DyT or Derf (their papers' 0.5 if None).
    """
    validation.choice("normaliser", kind, NORMALISERS)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps=eps, device=device, dtype=dtype)
    module = DynamicTanh if kind == "dyt" else DynamicErf
    default = DYT_ALPHA0 if kind == "dyt" else DERF_ALPHA0
    return module(d_model, default if alpha0 is None else alpha0, device=device, dtype=dtype)
