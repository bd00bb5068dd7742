"""Bias-free Linear and Embedding with the CS336 initialisation.

Weights are stored the way the handout stores them — Linear as (out_features,
in_features), Embedding as (num_embeddings, embedding_dim) — so a learner's CS336 state
dict loads into the course's modules and back.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from prenorm_lib import validation


class Linear(nn.Module):
    """y = x Wᵀ with W of shape (out_features, in_features) and no bias.

    Initialised from N(0, 2 / (in + out)) truncated at ±3σ: a variance between 1/in and
    1/out keeps a layer's output variance close to its input variance, and its gradient's
    on the way back, in both directions at once for a square matrix (notebook 05 measures it).
    """

    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        self.in_features = validation.positive_int("in_features", in_features)
        self.out_features = validation.positive_int("out_features", out_features)
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2.0 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        validation.last_dim("x", x, self.in_features, "in_features")
        return nn.functional.linear(x, self.weight)  # (..., out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias=False"


class Embedding(nn.Module):
    """Lookup table (num_embeddings, embedding_dim), initialised N(0, 1) truncated at ±3."""

    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = validation.positive_int("num_embeddings", num_embeddings)
        self.embedding_dim = validation.positive_int("embedding_dim", embedding_dim)
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        validation.tensor("token_ids", token_ids)
        if token_ids.is_floating_point() or token_ids.dtype == torch.bool:
            raise TypeError(f"token_ids must be an integer tensor, got dtype {token_ids.dtype}")
        checked = token_ids.numel() and validation.values_checked(token_ids)  # free here; a sync or break elsewhere
        if checked and (token_ids.min() < 0 or token_ids.max() >= self.num_embeddings):
            raise ValueError(
                f"token_ids must lie in [0, {self.num_embeddings}), "
                f"got values from {int(token_ids.min())} to {int(token_ids.max())}"
            )
        return self.weight[token_ids]  # (..., embedding_dim)

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}"
