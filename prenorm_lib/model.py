"""The Transformer language model: embeddings, a stack of blocks, a final norm, a head.

Closing section of notebook 05; the course's training experiments use small instances.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.attention import soft_cap
from prenorm_lib.block import TransformerBlock
from prenorm_lib.config import ModelConfig
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.norm import POINTWISE, make_norm
from prenorm_lib.positions import SinusoidalPositions


class TransformerLM(nn.Module):
    """Token ids (..., seq_len) → next-token logits (..., seq_len, vocab_size).

    Parameter names follow the CS336 handout: ``token_embeddings``, ``layers.{i}.…``,
    ``ln_final``, ``lm_head``. Only a model whose residual stream is never normalised
    inside the stack (pre-norm, sandwich, reordered, Mix-LN, LayerNorm Scaling) has a final
    norm: the head needs one there; a post-norm (or DeepNorm) stack already ends in a norm,
    and the no-norm ablation and ReZero have none anywhere.

    Two doors build the same model. ``TransformerLM(vocab_size, context_length, d_model,
    num_layers, num_heads, d_ff, …)`` is CS336's constructor, with the options that came
    before the config as keywords and any other field of
    :class:`~prenorm_lib.config.ModelConfig` as a keyword too; ``TransformerLM.from_config(config)``
    takes a config. Either way the model keeps it as ``model.config``.

    ``norm``, ``qk_norm`` and ``scaled_init`` choose the block (see
    :class:`prenorm_lib.block.TransformerBlock`); every block is told the depth
    ``num_layers`` and its own index.

    ``positions`` says how the model learns where a token sits: ``"rope"`` (default, the
    handout's) rotates queries and keys by ``rope_theta``; ``"sinusoidal"`` adds Vaswani et
    al.'s fixed vectors to the embeddings; ``"none"`` gives no positional information
    (as does ``rope_theta=None``, the older spelling). None of them owns a parameter, so
    every choice has the same state dict.

    With a point-wise normaliser (``normaliser="dyt"`` or ``"derf"``) the embeddings are
    multiplied by a learnable scalar ``embedding_scale``, as DyT's language models do (§5: "we
    add a learnable scalar parameter after the initial embedding layer"). Their code starts it
    at √d_model on embeddings drawn with standard deviation 1/√d_model; the course's
    embeddings are drawn with standard deviation 1, so it starts at 1 — the same scale.
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
        qk_norm: bool | str = False,
        scaled_init: bool = False,
        device=None,
        dtype=None,
        **options,
    ):
        super().__init__()
        ModelConfig.check_names(options, "TransformerLM")
        config = ModelConfig(
            vocab_size=vocab_size, context_length=context_length, d_model=d_model, num_layers=num_layers,
            num_heads=num_heads, d_ff=d_ff, rope_theta=rope_theta, positions=positions, norm=norm, ffn=ffn,
            eps=eps, qk_norm=qk_norm, scaled_init=scaled_init, **options,
        )
        self.config = config
        self.vocab_size, self.context_length = config.vocab_size, config.context_length
        self.positions = config.positions
        self.position_encoding = SinusoidalPositions(d_model) if config.positions == "sinusoidal" else None
        self.token_embeddings = Embedding(vocab_size, d_model, device=device, dtype=dtype)
        if config.normaliser in POINTWISE:
            self.embedding_scale = nn.Parameter(torch.ones((), device=device, dtype=dtype))
        self.layers = nn.ModuleList(
            TransformerBlock.from_config(config, i, device=device, dtype=dtype) for i in range(num_layers)
        )
        if config.placement.final_norm:
            self.ln_final = make_norm(config.normaliser, d_model, eps=config.eps, alpha0=config.alpha0("other"),
                                      device=device, dtype=dtype)
        else:
            self.ln_final = nn.Identity()
        self.lm_head = Linear(d_model, vocab_size, device=device, dtype=dtype)

    @classmethod
    def from_config(cls, config: ModelConfig, device=None, dtype=None) -> TransformerLM:
        """The model ``config`` describes (the same parameters, drawn the same way, as the keyword door)."""
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        return cls(**config.as_kwargs(), device=device, dtype=dtype)

    def forward(self, token_ids: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        validation.tensor("token_ids", token_ids)
        if token_ids.ndim and token_ids.shape[-1] > self.context_length:
            raise ValueError(
                f"token_ids has seq_len={token_ids.shape[-1]}, longer than context_length={self.context_length}"
            )
        x = self.token_embeddings(token_ids)  # (..., T, d_model)
        if self.config.normaliser in POINTWISE:
            x = self.embedding_scale * x  # DyT's LLM recipe: one learnable scale for every embedding
        if self.position_encoding is not None:
            x = self.position_encoding(x, token_positions)  # absolute positions enter once, here
        for layer in self.layers:
            x = layer(x, token_positions)
        logits = self.lm_head(self.ln_final(x))  # (..., T, vocab_size)
        if self.config.final_logit_softcap is not None:  # Gemma 2: c·tanh(logit/c) on the final logits
            logits = soft_cap(logits, self.config.final_logit_softcap)
        return logits

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Number of trainable parameters (optionally without the embedding table)."""
        total = sum(p.numel() for p in self.parameters())
        return total if include_embeddings else total - self.token_embeddings.weight.numel()
