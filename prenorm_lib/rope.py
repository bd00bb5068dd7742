"""Rotary position embedding (RoPE) as a module with a cos/sin cache.

Introduced in notebook 03. The cache holds cos and sin of every (position, pair) angle up
to ``max_seq_len``; ``forward`` gathers the rows of the positions it is given, so packed
sequences and offsets (e.g. generation that continues at position 100) need nothing new.
"""

from __future__ import annotations

import torch
from torch import nn

from prenorm_lib import functional, validation


class RotaryPositionalEmbedding(nn.Module):
    """Rotate query/key pairs by position-dependent angles; no learnable parameters.

    ``pairing="interleaved"`` (default) rotates dimensions (2k, 2k+1) as in RoFormer and
    the CS336 handout; ``pairing="half"`` rotates (k, k + d_k/2) as Hugging Face's Llama
    does. The buffers are non-persistent: they are derived from ``theta`` and never saved
    in a state dict.
    """

    def __init__(
        self, theta: float, d_k: int, max_seq_len: int, device=None, pairing: str = "interleaved"
    ):
        super().__init__()
        angles = functional.rope_angles(theta, d_k, max_seq_len)  # (max_seq_len, d_k/2), validates
        self.theta, self.d_k, self.max_seq_len = float(theta), d_k, max_seq_len
        self.pairing = validation.choice("pairing", pairing, ("interleaved", "half"))
        self.register_buffer("cos", angles.cos().to(torch.float32).to(device), persistent=False)
        self.register_buffer("sin", angles.sin().to(torch.float32).to(device), persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Rotate ``x`` (..., seq_len, d_k) at ``token_positions`` (..., seq_len).

        ``token_positions`` broadcasts against the leading dimensions of ``x``; when it is
        omitted the positions are 0, 1, …, seq_len − 1.
        """
        validation.floating("x", x)
        validation.last_dim("x", x, self.d_k, "d_k")
        if x.ndim < 2:
            raise ValueError(f"x must be (..., seq_len, d_k), got shape {tuple(x.shape)}")
        seq_len = x.shape[-2]
        if token_positions is None:  # positions 0 … seq_len−1: a slice of the cache, no gather
            if seq_len > self.max_seq_len:
                raise ValueError(
                    f"x has seq_len={seq_len}, so its positions reach {seq_len - 1}, but they must be "
                    f"< max_seq_len={self.max_seq_len}; build the module with a larger max_seq_len"
                )
            cos, sin = self.cos[:seq_len], self.sin[:seq_len]  # (seq_len, d_k/2)
        else:
            self._check_positions(token_positions, seq_len)
            cos = self.cos[token_positions]  # (..., seq_len, d_k/2)
            sin = self.sin[token_positions]  # (..., seq_len, d_k/2)
        return functional.apply_rope(x, cos, sin, self.pairing)  # (..., seq_len, d_k)

    def _check_positions(self, positions: torch.Tensor, seq_len: int) -> None:
        validation.tensor("token_positions", positions)
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"token_positions must be an integer tensor, got dtype {positions.dtype}")
        if positions.ndim == 0 or positions.shape[-1] != seq_len:
            raise ValueError(
                f"token_positions must end in seq_len={seq_len} (the second-to-last dim of x), "
                f"got shape {tuple(positions.shape)}"
            )
        low, high = int(positions.min()), int(positions.max())
        if low < 0:
            raise ValueError(f"token_positions must be >= 0, got {low}")
        if high >= self.max_seq_len:
            raise ValueError(
                f"token_positions must be < max_seq_len={self.max_seq_len}, got {high}; "
                f"build the module with a larger max_seq_len"
            )

    def extra_repr(self) -> str:
        return f"theta={self.theta:g}, d_k={self.d_k}, max_seq_len={self.max_seq_len}, pairing={self.pairing!r}"


def rotation_matrix(theta: float, d_k: int, position: int) -> torch.Tensor:
    """The explicit block-diagonal d_k × d_k rotation R^i of the handout (interleaved pairs).

    For teaching and for tests only: applying RoPE through this matrix costs O(d_k²) per
    vector instead of O(d_k), which the RoPE notebook and ``prenorm_lib.bench`` measure.
    """
    angles = functional.rope_angles(theta, d_k, position + 1)[position]  # (d_k/2,)
    cos, sin = angles.cos(), angles.sin()
    R = torch.zeros(d_k, d_k, dtype=torch.float64)
    idx = torch.arange(0, d_k, 2)
    R[idx, idx], R[idx, idx + 1] = cos, -sin
    R[idx + 1, idx], R[idx + 1, idx + 1] = sin, cos
    return R.to(torch.float32)


def interleaved_to_half_permutation(d_k: int) -> torch.Tensor:
    """The permutation that turns the interleaved pair layout into the half-split one.

    ``perm = [0, 2, 4, …, 1, 3, 5, …]``: ``x[..., perm]`` puts the first member of every
    interleaved pair (2k) at position k and the second (2k + 1) at k + d_k/2, which is
    exactly where the half-split pairing looks for them. Hence, for any ``x``,
    ``rope_half(x[..., perm]) == rope_interleaved(x)[..., perm]``: one rotation, two
    storage orders.
    """
    validation.positive_int("d_k", d_k)
    if d_k % 2:
        raise ValueError(f"d_k must be even for RoPE, got {d_k}")
    return torch.cat((torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)))
