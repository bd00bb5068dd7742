"""Absolute sinusoidal positions (Vaswani et al. 2017), the baseline RoPE is measured against.

Introduced in notebook 03. The original Transformer *adds* a fixed vector to each token's
embedding, one per position:

    PE(p, 2i) = sin(p / 10000^(2i/d)),    PE(p, 2i+1) = cos(p / 10000^(2i/d)).

The angles p · 10000^(−2i/d) are exactly RoPE's (``functional.rope_angles``): the two
schemes use the same clocks. Vaswani et al. write the clocks' readings into the input,
once, where every later layer must carry them along; RoPE turns the queries and keys of
every attention layer by them, so only the offset between two positions reaches a score.

Also here: Llama 4's attention temperature for its layers without positions
(:class:`LogLengthTemperature`), which multiplies each query by a factor that grows with
the logarithm of its position.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import functional, validation

POSITION_KINDS = ("rope", "sinusoidal", "none")


def sinusoidal_encoding(positions: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s PE at integer ``positions`` (...,): shape (..., d_model), float32.

    Even dimension 2i holds the sine, odd dimension 2i + 1 the cosine of the same angle.
    Computed in float64 from the positions themselves, so any position has its vector
    (no cache to outgrow).
    """
    validation.tensor("positions", positions)
    if positions.is_floating_point() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    validation.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal positions (sin and cos pairs), got {d_model}")
    device = positions.device
    here = torch.device("cpu") if device.type == "mps" else device  # MPS has no float64: compute on the CPU
    speeds = functional.rope_angles(base, d_model, 2)[1].to(here)  # (d_model/2,) radians per position
    angles = positions.to(here, torch.float64)[..., None] * speeds  # (..., d_model/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2).to(device, torch.float32)  # (..., d_model)


class SinusoidalPositions(nn.Module):
    """Adds PE(position) to a sequence of embeddings; no parameters, nothing in the state dict."""

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        if d_model % 2:
            raise ValueError(f"d_model must be even for sinusoidal positions (sin and cos pairs), got {d_model}")
        self.base = validation.positive_float("base", base)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (..., seq_len, d_model) plus the encoding of its positions (default 0 … seq_len − 1)."""
        validation.last_dim("x", x, self.d_model)
        if token_positions is None:
            token_positions = torch.arange(x.shape[-2], device=x.device)  # (seq_len,)
        return x + sinusoidal_encoding(token_positions, self.d_model, self.base).to(x.dtype)  # (..., seq_len, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}"


def log_length_scale(positions: torch.Tensor, floor_scale: float, attn_scale: float = 0.1) -> torch.Tensor:
    """Llama 4's query scale at integer ``positions`` (...,): log(⌊(p + 1)/floor_scale⌋ + 1) · attn_scale + 1.

    As Meta's reference code (``models/llama4/model.py``, ``Attention.forward``) computes it for
    its NoPE layers when ``attn_temperature_tuning`` is on, with ``floor_scale`` 8192 and
    ``attn_scale`` 0.1 by default (``args.py``): 1 for positions below floor_scale − 1, then
    rising by steps with the log of the position. float32, (...,).
    """
    validation.tensor("positions", positions)
    if positions.is_floating_point() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be an integer tensor, got dtype {positions.dtype}")
    validation.positive_float("floor_scale", floor_scale)
    validation.positive_float("attn_scale", attn_scale)
    steps = torch.floor((positions.to(torch.float32) + 1.0) / floor_scale)
    return torch.log(steps + 1.0) * attn_scale + 1.0


class LogLengthTemperature(nn.Module):
    """Multiplies queries at position p by :func:`log_length_scale` (p): Llama 4's temperature for NoPE layers.

    Only queries are scaled (every logit of the query at p by the same factor): a sharper
    softmax the further the query sits, where a longer prefix spreads attention thinner.
    No parameters.
    """

    def __init__(self, floor_scale: float, attn_scale: float = 0.1):
        super().__init__()
        self.floor_scale = validation.positive_float("floor_scale", floor_scale)
        self.attn_scale = validation.positive_float("attn_scale", attn_scale)

    def forward(self, q: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """``q`` (..., seq_len, d) times the scale of its positions (default 0 … seq_len − 1)."""
        validation.floating("q", q)
        if q.ndim < 2:
            raise ValueError(f"q must be (..., seq_len, d), got shape {tuple(q.shape)}")
        if token_positions is None:
            token_positions = torch.arange(q.shape[-2], device=q.device)  # (seq_len,)
        scale = log_length_scale(token_positions, self.floor_scale, self.attn_scale)  # (..., seq_len)
        return q * scale.to(q.dtype)[..., None]  # (..., seq_len, d)

    def extra_repr(self) -> str:
        return f"floor_scale={self.floor_scale:g}, attn_scale={self.attn_scale:g}"
