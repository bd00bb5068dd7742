"""Causal multi-head self-attention with optional RoPE and QK-norm on queries and keys.

Introduced in notebook 05. The module calls torch's fused
``scaled_dot_product_attention`` (the fast path); the tests prove it equals the
from-scratch :func:`prenorm_lib.functional.scaled_dot_product_attention`.

QK-norm (Dehghani et al. 2023, ViT-22B, with LayerNorm) normalises queries and keys before
their dot product. Two RMSNorm forms are in use and both are here:

- ``qk_norm="flat"`` (OLMo 2): one RMSNorm over the whole projection, num_heads·d_head
  channels, *before* the heads are split (Hugging Face ``modeling_olmo2``:
  ``Olmo2RMSNorm(num_attention_heads * head_dim)``);
- ``qk_norm="per_head"`` (Qwen3; ``True`` means this): an RMSNorm over each head's d_head
  channels, its gain shared by the heads.

Either way a logit q·k/√d_head no longer grows with the size of the projection weights;
it still grows with the norms' gains, which are learnt — so it is not bounded once they
move, only held back (the attention-logit growth that Wortsman et al. 2023 see at high
learning rates).

Logit soft-capping (Gemma 2, arXiv 2408.00118, §2) bounds what the softmax sees instead:
``logit_softcap=c`` replaces each score s by c·tanh(s/c) (:func:`soft_cap`), so every
logit stays between −c and +c; Gemma 2 uses c = 50 in attention and 30 on the final
logits. q·k itself is left free to grow (what Kimi K2 object to). A capped module takes the
explicit path (scores, cap, mask, softmax) instead of the fused kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from prenorm_lib import functional, validation
from prenorm_lib.layers import Linear
from prenorm_lib.norm import RMSNorm
from prenorm_lib.rope import RotaryPositionalEmbedding

QK_NORMS = ("per_head", "flat")  # Qwen3's form, OLMo 2's form


def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap · tanh(x / cap): about x for |x| ≪ cap, never beyond ±cap (Gemma 2's logit soft-capping)."""
    return cap * torch.tanh(x / cap)


def qk_norm_form(qk_norm: object) -> str | None:
    """``False``/``None`` → None, ``True`` → "per_head", or one of :data:`QK_NORMS` as given."""
    if qk_norm is None or qk_norm is False:
        return None
    if qk_norm is True:
        return "per_head"
    if isinstance(qk_norm, str):
        return validation.choice("qk_norm", qk_norm, QK_NORMS)
    raise TypeError(f"qk_norm must be False, True, \"per_head\" or \"flat\", got {qk_norm!r}")


class MultiHeadSelfAttention(nn.Module):
    """Causal self-attention over ``num_heads`` heads of size d_model / num_heads.

    Projections ``q_proj``, ``k_proj``, ``v_proj``, ``output_proj`` are bias-free (d_model,
    d_model) matrices, named and laid out as in the CS336 handout. With ``rope_theta`` set,
    queries and keys of every head are rotated by RoPE before the scores are taken;
    values are not rotated (position should change *where* a head looks, not *what* it
    reads).

    With ``qk_norm="per_head"`` (or ``True``; Qwen3) each head's query and key vectors are
    normalised by RMSNorms ``q_norm`` and ``k_norm`` over d_head, with a learnable gain of
    size d_head shared by the heads. With ``qk_norm="flat"`` (OLMo 2) ``q_norm`` and
    ``k_norm`` normalise the whole (d_model,) projection, gain of size d_model, before the
    heads are split. Both act before RoPE rotates (a rotation keeps the norm anyway).
    ``norm_factory(size)``, if given, makes ``q_norm`` and ``k_norm`` in RMSNorm's place.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_seq_len: int | None = None,
        rope_theta: float | None = None,
        qk_norm: bool | str = False,
        eps: float = 1e-5,
        device=None,
        dtype=None,
        norm_factory: Callable[[int], nn.Module] | None = None,
        logit_softcap: float | None = None,
    ):
        super().__init__()
        self.d_model = validation.positive_int("d_model", d_model)
        self.num_heads = validation.positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} must be divisible by num_heads={num_heads} "
                f"(each head gets d_model / num_heads dimensions)"
            )
        self.d_head = d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = None
        if rope_theta is not None:
            if max_seq_len is None:
                raise ValueError("max_seq_len is required when rope_theta is given (it sizes the RoPE cache)")
            self.rope = RotaryPositionalEmbedding(rope_theta, self.d_head, max_seq_len, device=device)
        self.qk_norm = qk_norm_form(qk_norm)
        if self.qk_norm is not None:
            size = self.d_head if self.qk_norm == "per_head" else d_model
            if norm_factory is None:  # RMSNorm; the block passes ModelConfig's normaliser (DyT, Derf) instead
                def norm_factory(n: int) -> nn.Module:
                    return RMSNorm(n, eps=eps, device=device, dtype=dtype)
            self.q_norm, self.k_norm = norm_factory(size), norm_factory(size)
        self.logit_softcap = None if logit_softcap is None else validation.positive_float("logit_softcap",
                                                                                          logit_softcap)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., seq_len, d_model) → (..., num_heads, seq_len, d_head)."""
        return x.unflatten(-1, (self.num_heads, self.d_head)).transpose(-3, -2)

    def queries_and_keys(
        self, x: torch.Tensor, token_positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each head's queries and keys as the scores see them: projected, QK-normed, rotated."""
        validation.last_dim("x", x, self.d_model)
        if x.ndim < 2:
            raise ValueError(f"x must be (..., seq_len, d_model), got shape {tuple(x.shape)}")
        q, k = self.q_proj(x), self.k_proj(x)  # (..., T, d_model) each
        if self.qk_norm == "flat":  # OLMo 2: the whole projection, before the heads are split
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = self.split_heads(q), self.split_heads(k)  # (..., H, T, d_head)
        if self.qk_norm == "per_head":  # Qwen3: each head's vectors to unit RMS, times a gain
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            positions = None if token_positions is None else token_positions.unsqueeze(-2)  # (..., 1, T)
            q = self.rope(q, positions)
            k = self.rope(k, positions)
        return q, k

    def attention_logits(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """The scores q·k/√d_head before the mask and the softmax, (..., H, T, T).

        What the fused kernel computes internally and never returns; the probes read it to
        follow the largest logit during training. With ``logit_softcap`` these are the scores
        *before* the cap: the softmax sees soft_cap of them.
        """
        q, k = self.queries_and_keys(x, token_positions)
        return q @ k.transpose(-2, -1) / self.d_head**0.5  # (..., H, T, T)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        q, k = self.queries_and_keys(x, token_positions)  # (..., H, T, d_head) each
        v = self.split_heads(self.v_proj(x))  # (..., H, T, d_head)
        if self.logit_softcap is not None:  # the fused kernel cannot cap: scores, cap, mask, softmax
            scores = soft_cap(q @ k.transpose(-2, -1) / self.d_head**0.5, self.logit_softcap)  # (..., H, T, T)
            visible = functional.causal_mask(scores.shape[-1], device=scores.device)  # (T, T)
            weights = functional.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
            return self.output_proj((weights @ v).transpose(-3, -2).flatten(-2))  # (..., T, d_model)
        lead = q.shape[:-3]
        out = nn.functional.scaled_dot_product_attention(  # fused kernel wants (N, H, T, d_head)
            q.reshape(-1, *q.shape[-3:]), k.reshape(-1, *k.shape[-3:]), v.reshape(-1, *v.shape[-3:]),
            is_causal=True,
        )
        out = out.reshape(*lead, *out.shape[-3:]).transpose(-3, -2).flatten(-2)  # (..., T, d_model)
        return self.output_proj(out)
