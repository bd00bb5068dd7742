"""The Transformer block, with the normalisation placed before, after, or nowhere.

Introduced in notebook 04. The three placements are three separate, explicit code paths
so that no reader can mistake one for another:

- ``norm="pre"`` (GPT-2 onwards, Llama, CS336): ``h = x + Attn(ln1(x))``,
  ``y = h + FFN(ln2(h))``. The residual stream from input to output never passes through
  a norm.
- ``norm="post"`` (Vaswani et al. 2017): ``z = ln1(x + Attn(x))``, ``y = ln2(z + FFN(z))``.
  Every sub-layer's sum is renormalised, so the stream is rescaled twice per block.
- ``norm="none"``: ``h = x + Attn(x)``, ``y = h + FFN(h)`` — the ablation without
  normalisation.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.ffn import FFN_KINDS, make_ffn
from prenorm_lib.norm import RMSNorm

NORM_PLACEMENTS = ("pre", "post", "none")


class TransformerBlock(nn.Module):
    """Causal self-attention and a feed-forward network, each with a residual connection.

    Submodules are named as in the CS336 handout (``ln1``, ``attn``, ``ln2``, ``ffn``) so
    state dicts are interchangeable. With ``norm="none"`` the two norms are identities
    and own no parameters.
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
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.norm = validation.choice("norm", norm, NORM_PLACEMENTS)
        validation.choice("ffn", ffn, FFN_KINDS)
        validation.positive_int("d_ff", d_ff)
        validation.positive_int("max_seq_len", max_seq_len)
        validation.positive_float("eps", eps)  # checked even with norm="none", where it goes unused
        self.attn = MultiHeadSelfAttention(
            d_model, num_heads, max_seq_len=max_seq_len, rope_theta=rope_theta, device=device, dtype=dtype
        )
        self.ffn = make_ffn(ffn, d_model, d_ff, device=device, dtype=dtype)
        if norm == "none":
            self.ln1, self.ln2 = nn.Identity(), nn.Identity()
        else:
            self.ln1 = RMSNorm(d_model, eps=eps, device=device, dtype=dtype)
            self.ln2 = RMSNorm(d_model, eps=eps, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm == "pre":
            return self.pre_norm_forward(x, token_positions)
        if self.norm == "post":
            return self.post_norm_forward(x, token_positions)
        return self.unnormalised_forward(x, token_positions)

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
