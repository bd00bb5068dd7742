"""Position-wise feed-forward networks: SwiGLU and the classic two-matrix FFN.

Introduced in notebook 02, which compares them at matched parameter counts: a two-matrix
FFN with d_ff = 4·d_model has 8·d_model² weights, SwiGLU with d_ff ≈ 8/3·d_model has
3 · d_model · d_ff ≈ 8·d_model² too.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import functional, validation
from prenorm_lib.layers import Linear

ACTIVATIONS = {"relu": functional.relu, "silu": functional.silu}


def swiglu_hidden_dim(d_model: int, multiple_of: int = 64) -> int:
    """8/3 · d_model rounded to the nearest multiple of ``multiple_of`` (at least one).

    The factor 8/3 keeps SwiGLU's three matrices at the parameter count of a 4× two-matrix
    FFN; the rounding keeps matrix shapes friendly to hardware. d_model = 768 gives 2048,
    the d_ff Shazeer (2020) used for the GLU variants of T5-base.
    """
    validation.positive_int("d_model", d_model)
    validation.positive_int("multiple_of", multiple_of)
    return max(multiple_of, round(8 * d_model / 3 / multiple_of) * multiple_of)


class SwiGLU(nn.Module):
    """FFN(x) = W2 (SiLU(W1 x) ⊙ W3 x), bias-free, as in Llama and the CS336 handout."""

    def __init__(self, d_model: int, d_ff: int | None = None, device=None, dtype=None):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.d_ff = swiglu_hidden_dim(d_model) if d_ff is None else validation.positive_int("d_ff", d_ff)
        self.w1 = Linear(d_model, self.d_ff, device=device, dtype=dtype)  # gate: (d_ff, d_model)
        self.w2 = Linear(self.d_ff, d_model, device=device, dtype=dtype)  # down: (d_model, d_ff)
        self.w3 = Linear(d_model, self.d_ff, device=device, dtype=dtype)  # value: (d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        return functional.swiglu(x, self.w1.weight, self.w2.weight, self.w3.weight)  # (..., d_model)


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x) with act ∈ {ReLU, SiLU}: Vaswani et al.'s network, bias-free."""

    def __init__(
        self, d_model: int, d_ff: int | None = None, activation: str = "relu", device=None, dtype=None
    ):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.d_ff = 4 * d_model if d_ff is None else validation.positive_int("d_ff", d_ff)
        self.activation = validation.choice("activation", activation, ACTIVATIONS)
        self.w1 = Linear(d_model, self.d_ff, device=device, dtype=dtype)  # (d_ff, d_model)
        self.w2 = Linear(self.d_ff, d_model, device=device, dtype=dtype)  # (d_model, d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        hidden = ACTIVATIONS[self.activation](self.w1(x))  # (..., d_ff)
        return self.w2(hidden)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


def default_hidden_dim(kind: str, d_model: int) -> int:
    """The d_ff each FFN gets unless told otherwise: 8/3·d_model (rounded) for SwiGLU, 4·d_model else.

    This is the CS336 ablation recipe: the weights then match to within one multiple of 64
    of d_ff (exactly at d_model = 768; at the course's d_model = 64 SwiGLU has 12.5 % more).
    """
    validation.choice("ffn", kind, ("swiglu", "silu", "relu"))
    return swiglu_hidden_dim(d_model) if kind == "swiglu" else 4 * validation.positive_int("d_model", d_model)


def make_ffn(kind: str, d_model: int, d_ff: int | None = None, device=None, dtype=None) -> nn.Module:
    """Build the feed-forward network named ``kind``: "swiglu", "silu" or "relu"."""
    validation.choice("ffn", kind, ("swiglu", "silu", "relu"))
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, device=device, dtype=dtype)
    return FeedForward(d_model, d_ff, activation=kind, device=device, dtype=dtype)
