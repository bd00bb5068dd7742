"""The Transformer language model: embeddings, a stack of blocks, a final norm, a head.

Closing section of notebook 05; the course's training experiments use small instances.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.block import FINAL_NORM, TransformerBlock
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.norm import RMSNorm
from prenorm_lib.positions import POSITION_KINDS, SinusoidalPositions


class TransformerLM(nn.Module):
    """Token ids (..., seq_len) → next-token logits (..., seq_len, vocab_size).

    Parameter names follow the CS336 handout: ``token_embeddings``, ``layers.{i}.…``,
    ``ln_final``, ``lm_head``. Only a model whose residual stream is never normalised
    inside the stack (pre-norm, sandwich, reordered) has a final norm: the head needs one
    there; a post-norm (or DeepNorm) stack already ends in a norm, and the no-norm ablation
    and ReZero have none anywhere.

    ``norm``, ``qk_norm`` and ``scaled_init`` choose the block (see
    :class:`prenorm_lib.block.TransformerBlock`); every block is told the depth
    ``num_layers``.

    ``positions`` says how the model learns where a token sits: ``"rope"`` (default, the
    handout's) rotates queries and keys by ``rope_theta``; ``"sinusoidal"`` adds Vaswani et
    al.'s fixed vectors to the embeddings; ``"none"`` gives no positional information
    (as does ``rope_theta=None``, the older spelling). None of them owns a parameter, so
    every choice has the same state dict.
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        rope_theta: float | None = 10000.0,
        positions: str = "rope",
        norm: str = "pre",
        ffn: str = "swiglu",
        eps: float = 1e-5,
        qk_norm: bool = False,
        scaled_init: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.vocab_size = validation.positive_int("vocab_size", vocab_size)
        self.context_length = validation.positive_int("context_length", context_length)
        validation.positive_int("d_model", d_model)
        validation.positive_int("num_layers", num_layers)
        validation.choice("positions", positions, POSITION_KINDS)
        if positions == "rope" and rope_theta is None:
            positions = "none"  # the older spelling of a model without positions
        self.positions = positions
        if positions != "rope":
            rope_theta = None  # the blocks rotate nothing
        self.position_encoding = SinusoidalPositions(d_model) if positions == "sinusoidal" else None
        self.token_embeddings = Embedding(vocab_size, d_model, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(
                d_model, num_heads, d_ff, context_length, rope_theta=rope_theta,
                norm=norm, ffn=ffn, eps=eps, qk_norm=qk_norm, scaled_init=scaled_init, num_layers=num_layers,
                device=device, dtype=dtype,
            )
            for _ in range(num_layers)
        )
        final_norm = norm in FINAL_NORM
        self.ln_final = RMSNorm(d_model, eps=eps, device=device, dtype=dtype) if final_norm else nn.Identity()
        self.lm_head = Linear(d_model, vocab_size, device=device, dtype=dtype)

    def forward(self, token_ids: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        validation.tensor("token_ids", token_ids)
        if token_ids.ndim and token_ids.shape[-1] > self.context_length:
            raise ValueError(
                f"token_ids has seq_len={token_ids.shape[-1]}, longer than context_length={self.context_length}"
            )
        x = self.token_embeddings(token_ids)  # (..., T, d_model)
        if self.position_encoding is not None:
            x = self.position_encoding(x, token_positions)  # absolute positions enter once, here
        for layer in self.layers:
            x = layer(x, token_positions)
        return self.lm_head(self.ln_final(x))  # (..., T, vocab_size)

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Number of trainable parameters (optionally without the embedding table)."""
        total = sum(p.numel() for p in self.parameters())
        return total if include_embeddings else total - self.token_embeddings.weight.numel()
