"""RMSNorm as a module: it owns the gain and calls :func:`functional.rms_norm`.

Introduced in notebook 01.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import functional, validation


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
