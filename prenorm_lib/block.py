"""The Transformer block, with the normalisation placed before, after, around, or nowhere.

Introduced in notebook 05. Each placement is a separate, explicit code path, so that no
reader can mistake one for another:

- ``norm="pre"`` (GPT-2 onwards, Llama, CS336): ``h = x + Attn(ln1(x))``,
  ``y = h + FFN(ln2(h))``. The residual stream from input to output never passes through
  a norm.
- ``norm="post"`` (Vaswani et al. 2017): ``z = ln1(x + Attn(x))``, ``y = ln2(z + FFN(z))``.
  Every sub-layer's sum is renormalised, so the stream is rescaled twice per block.
- ``norm="none"``: ``h = x + Attn(x)``, ``y = h + FFN(h)`` — the ablation without
  normalisation.

What current models changed after pre-norm (notebook 05, "the frontier"):

- ``norm="sandwich"`` (CogView, Gemma 2; Peri-LN): a norm before *and* after each
  sub-layer, ``h = x + ln1_out(Attn(ln1(x)))``.
- ``norm="reordered"`` (OLMo 2): the norm only on the sub-layer's output,
  ``h = x + ln1_out(Attn(x))``.
- ``norm="deepnorm"`` (Wang et al. 2022): post-norm with an up-weighted stream,
  ``z = ln1(α·x + Attn(x))``, α = (2L)^(1/4), and the branches' weights initialised down
  by β = (8L)^(−1/4).
- ``norm="rezero"`` (Bachlechner et al. 2020): no norm; ``h = x + α_attn·Attn(x)`` with a
  learnable α that starts at 0, so every block starts as the identity.

Two more options combine with any placement: ``qk_norm`` normalises queries and keys —
``"flat"`` over the whole projection as OLMo 2 does, ``"per_head"`` (or ``True``) per head as
Qwen3 does (see :mod:`prenorm_lib.attention`), and ``scaled_init=True`` initialises the last matrix of
each branch down by 1/√(2L), so that 2L branches add a bounded amount to the stream at
initialisation.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.ffn import FFN_KINDS, make_ffn
from prenorm_lib.layers import Linear
from prenorm_lib.norm import RMSNorm

FORWARDS = {  # placement -> the method that computes it
    "pre": "pre_norm_forward",
    "post": "post_norm_forward",
    "none": "unnormalised_forward",
    "sandwich": "sandwich_forward",
    "reordered": "reordered_forward",
    "deepnorm": "deepnorm_forward",
    "rezero": "rezero_forward",
}
NORM_PLACEMENTS = ("pre", "post", "none")  # the three placements notebook 05 compares (and exercise 5.3)
FRONTIER_NORMS = ("sandwich", "reordered", "deepnorm", "rezero")  # what current models changed after pre-norm
NORMS = NORM_PLACEMENTS + FRONTIER_NORMS
NEEDS_NUM_LAYERS = ("deepnorm",)  # placements whose constants depend on the depth L
FINAL_NORM = ("pre", "sandwich", "reordered")  # placements whose stream is never normalised inside the stack


def deepnorm_constants(num_layers: int) -> tuple[float, float]:
    """DeepNorm's (α, β) for a decoder-only stack of ``num_layers`` blocks: ((2L)^(1/4), (8L)^(−1/4))."""
    validation.positive_int("num_layers", num_layers)
    return (2 * num_layers) ** 0.25, (8 * num_layers) ** -0.25


def _scale_weights(factor: float, linears: list[Linear]) -> None:
    """Multiply freshly initialised weights by ``factor`` (DeepNorm's β, the 1/√(2L) of scaled_init)."""
    with torch.no_grad():
        for linear in linears:
            linear.weight.mul_(factor)


class TransformerBlock(nn.Module):
    """Causal self-attention and a feed-forward network, each with a residual connection.

    Submodules are named as in the CS336 handout (``ln1``, ``attn``, ``ln2``, ``ffn``) so
    state dicts are interchangeable; with the default options there is nothing else. A
    norm on a sub-layer's *output* (sandwich, reordered) is ``ln1_out`` / ``ln2_out``;
    ReZero's scalars are ``alpha_attn`` / ``alpha_ffn``. Where a placement has no input
    norm (``none``, ``reordered``, ``rezero``), ``ln1`` and ``ln2`` are identities and own
    no parameters.

    ``num_layers`` is the depth L of the stack the block belongs to; DeepNorm and
    ``scaled_init`` need it.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        max_seq_len: int,
        rope_theta: float | None = 10000.0,
        norm: str = "pre",
        ffn: str = "swiglu",
        eps: float = 1e-5,
        qk_norm: bool | str = False,
        scaled_init: bool = False,
        num_layers: int | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.norm = validation.choice("norm", norm, NORMS)
        validation.choice("ffn", ffn, FFN_KINDS)
        validation.positive_int("d_ff", d_ff)
        validation.positive_int("max_seq_len", max_seq_len)
        validation.positive_float("eps", eps)  # checked even with norm="none", where it goes unused
        if not isinstance(scaled_init, bool):
            raise TypeError(f"scaled_init must be True or False, got {scaled_init!r}")
        if num_layers is not None:
            validation.positive_int("num_layers", num_layers)
        elif norm in NEEDS_NUM_LAYERS or scaled_init:
            needs = f'norm="{norm}"' if norm in NEEDS_NUM_LAYERS else "scaled_init=True"
            raise ValueError(f"num_layers (the depth of the stack) is required with {needs}, got None")
        self.attn = MultiHeadSelfAttention(
            d_model, num_heads, max_seq_len=max_seq_len, rope_theta=rope_theta, qk_norm=qk_norm, eps=eps,
            device=device, dtype=dtype,
        )
        self.ffn = make_ffn(ffn, d_model, d_ff, device=device, dtype=dtype)

        def rms_norm() -> RMSNorm:
            return RMSNorm(d_model, eps=eps, device=device, dtype=dtype)

        if norm in ("pre", "post", "sandwich", "deepnorm"):
            self.ln1, self.ln2 = rms_norm(), rms_norm()
        else:
            self.ln1, self.ln2 = nn.Identity(), nn.Identity()
        if norm in ("sandwich", "reordered"):
            self.ln1_out, self.ln2_out = rms_norm(), rms_norm()
        if norm == "rezero":
            self.alpha_attn = nn.Parameter(torch.zeros((), device=device, dtype=dtype))
            self.alpha_ffn = nn.Parameter(torch.zeros((), device=device, dtype=dtype))
        if norm == "deepnorm":
            # β scales what the branches add (values, attention output, FFN); queries and keys
            # only decide where attention looks, so they keep their scale.
            self.deepnorm_alpha, beta = deepnorm_constants(num_layers)
            ffn_linears = [m for m in self.ffn.modules() if isinstance(m, Linear)]
            _scale_weights(beta, [self.attn.v_proj, self.attn.output_proj, *ffn_linears])
        if scaled_init:
            _scale_weights(1 / math.sqrt(2 * num_layers), [self.attn.output_proj, self.ffn.w2])

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        return getattr(self, FORWARDS[self.norm])(x, token_positions)

    def pre_norm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Attn(Norm(x)), then + FFN(Norm(·)): the norms sit on the branches only."""
        h = x + self.attn(self.ln1(x), token_positions)  # (..., T, d_model)
        return h + self.ffn(self.ln2(h))

    def post_norm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Norm(x + Attn(x)), then Norm(z + FFN(z)): the norms sit on the residual stream."""
        z = self.ln1(x + self.attn(x, token_positions))  # (..., T, d_model)
        return self.ln2(z + self.ffn(z))

    def unnormalised_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Attn(x), then + FFN(·): residual connections and nothing to rescale them."""
        h = x + self.attn(x, token_positions)
        return h + self.ffn(h)

    def sandwich_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Norm(Attn(Norm(x))): pre-norm, and each branch's output normalised before it is added."""
        h = x + self.ln1_out(self.attn(self.ln1(x), token_positions))  # (..., T, d_model)
        return h + self.ln2_out(self.ffn(self.ln2(h)))

    def reordered_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Norm(Attn(x)) (OLMo 2): the branch reads the raw stream, its output is normalised."""
        h = x + self.ln1_out(self.attn(x, token_positions))  # (..., T, d_model)
        return h + self.ln2_out(self.ffn(h))

    def deepnorm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Norm(α·x + Attn(x)), then Norm(α·z + FFN(z)): post-norm that trusts the stream α times more."""
        alpha = self.deepnorm_alpha
        z = self.ln1(alpha * x + self.attn(x, token_positions))  # (..., T, d_model)
        return self.ln2(alpha * z + self.ffn(z))

    def rezero_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + α·Attn(x), then + α'·FFN(·), α and α' learnt from 0: no norm, each block starts as the identity."""
        h = x + self.alpha_attn * self.attn(x, token_positions)  # (..., T, d_model)
        return h + self.alpha_ffn * self.ffn(h)
