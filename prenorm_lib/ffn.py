"""Position-wise feed-forward networks: SwiGLU, its GLU siblings and the classic two-matrix FFN.

Introduced in notebook 02, which compares them at matched parameter counts: a two-matrix
FFN with d_ff = 4·d_model has 8·d_model² weights, a gated one (SwiGLU, GEGLU, ReGLU,
Bilinear — Shazeer 2020) with d_ff ≈ 8/3·d_model has 3 · d_model · d_ff ≈ 8·d_model² too.
The two-matrix FFN takes ReLU, SiLU or Primer's squared ReLU (So et al. 2021, ``"relu2"``,
nanochat's choice); at equal weights a two-matrix and a gated FFN also do the same
matrix multiplications per token (2 · 2 · d_model · d_ff against 2 · 3 · d_model · d_ff).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from prenorm_lib import functional, validation
from prenorm_lib.layers import Linear

ACTIVATIONS = {"relu": functional.relu, "silu": functional.silu, "relu2": functional.relu_squared}


def swiglu_hidden_dim(d_model: int, multiple_of: int = 64) -> int:
    """8/3 · d_model rounded to the nearest multiple of ``multiple_of`` (at least one).

    The factor 8/3 keeps SwiGLU's three matrices at the parameter count of a 4× two-matrix
    FFN; the rounding keeps matrix shapes friendly to hardware. d_model = 768 gives 2048,
    the d_ff Shazeer (2020) used for the GLU variants of T5-base.
    """
    validation.positive_int("d_model", d_model)
    validation.positive_int("multiple_of", multiple_of)
    return max(multiple_of, round(8 * d_model / 3 / multiple_of) * multiple_of)


class GatedFeedForward(nn.Module):
    """FFN(x) = W2 (act(W1 x) ⊙ W3 x), bias-free: the family of Shazeer's (2020) GLU variants.

    Subclasses choose the gate's activation (``kernel`` is the matching stateless function
    of :mod:`prenorm_lib.functional`). Parameter names and layouts follow the CS336
    handout: ``w1`` the gate, ``w3`` the value (both (d_ff, d_model)), ``w2`` the way down
    (d_model, d_ff). ``d_ff`` defaults to 8/3 · d_model rounded to a multiple of 64, the
    parameter count of a 4× two-matrix FFN.
    """

    kernel: Callable[..., torch.Tensor]  # (x, w1, w2, w3) -> (..., d_model)
    gate_activation: Callable[[torch.Tensor], torch.Tensor] | None  # act in act(W1 x); None: Bilinear

    def __init__(self, d_model: int, d_ff: int | None = None, device=None, dtype=None):
        if type(self) is GatedFeedForward:
            raise TypeError("GatedFeedForward is the base of SwiGLU, GEGLU, ReGLU and Bilinear: build one of those")
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.d_ff = swiglu_hidden_dim(d_model) if d_ff is None else validation.positive_int("d_ff", d_ff)
        self.w1 = Linear(d_model, self.d_ff, device=device, dtype=dtype)  # gate: (d_ff, d_model)
        self.w2 = Linear(self.d_ff, d_model, device=device, dtype=dtype)  # down: (d_model, d_ff)
        self.w3 = Linear(d_model, self.d_ff, device=device, dtype=dtype)  # value: (d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.d_model)
        return self.kernel(x, self.w1.weight, self.w2.weight, self.w3.weight)  # (..., d_model)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The hidden layer act(W1 x) ⊙ W3 x, (..., d_ff): what ``w2`` maps back down."""
        validation.last_dim("x", x, self.d_model)
        gate = self.w1(x)  # (..., d_ff)
        if self.gate_activation is not None:
            gate = self.gate_activation(gate)
        return gate * self.w3(x)  # (..., d_ff)


class SwiGLU(GatedFeedForward):
    """FFN(x) = W2 (SiLU(W1 x) ⊙ W3 x), bias-free, as in Llama and the CS336 handout."""

    kernel = staticmethod(functional.swiglu)
    gate_activation = staticmethod(functional.silu)


class GEGLU(GatedFeedForward):
    """FFN(x) = W2 (GELU(W1 x) ⊙ W3 x): Shazeer's best row at 65k steps (1.942)."""

    kernel = staticmethod(functional.geglu)
    gate_activation = staticmethod(functional.gelu)


class ReGLU(GatedFeedForward):
    """FFN(x) = W2 (ReLU(W1 x) ⊙ W3 x): a gate that closes completely for W1 x < 0."""

    kernel = staticmethod(functional.reglu)
    gate_activation = staticmethod(functional.relu)


class Bilinear(GatedFeedForward):
    """FFN(x) = W2 (W1 x ⊙ W3 x): Shazeer's "Bilinear" row, the gate with no activation.

    Not ``torch.nn.Bilinear`` (which maps two inputs through one 3-D tensor): here one input
    meets itself through two matrices, so each hidden unit is a quadratic form of x.
    """

    kernel = staticmethod(functional.bilinear_glu)
    gate_activation = None


GATED = {"swiglu": SwiGLU, "geglu": GEGLU, "reglu": ReGLU, "bilinear": Bilinear}
FFN_KINDS = ("swiglu", "silu", "relu", "geglu", "reglu", "bilinear", "relu2")


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x) with act ∈ {ReLU, SiLU, ReLU²}: Vaswani et al.'s network, bias-free.

    ``activation="relu2"`` is Primer's squared ReLU, max(0, ·)² (So et al. 2021), the FFN of
    nanochat; the hidden layer is then ReGLU's with the gate and value matrices tied.
    """

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
        return self.w2(self.hidden(x))  # (..., d_model)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The hidden layer act(W1 x), (..., d_ff): what ``w2`` maps back down."""
        validation.last_dim("x", x, self.d_model)
        return ACTIVATIONS[self.activation](self.w1(x))  # (..., d_ff)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


def default_hidden_dim(kind: str, d_model: int) -> int:
    """The d_ff each FFN gets unless told otherwise: 8/3·d_model (rounded) if gated, 4·d_model else.

    This is the CS336 ablation recipe, Shazeer's (2020) for the GLU variants: the weights
    then match to within one multiple of 64 of d_ff (exactly at d_model = 768; at the
    course's d_model = 64 a gated FFN has 12.5 % more).
    """
    validation.choice("ffn", kind, FFN_KINDS)
    return swiglu_hidden_dim(d_model) if kind in GATED else 4 * validation.positive_int("d_model", d_model)


def make_ffn(kind: str, d_model: int, d_ff: int | None = None, device=None, dtype=None) -> nn.Module:
    """Build the feed-forward network named ``kind``, one of :data:`FFN_KINDS`."""
    validation.choice("ffn", kind, FFN_KINDS)
    if kind in GATED:
        return GATED[kind](d_model, d_ff, device=device, dtype=dtype)
    return FeedForward(d_model, d_ff, activation=kind, device=device, dtype=dtype)
