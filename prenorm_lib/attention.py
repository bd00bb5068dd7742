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

Two options of the attention output, off by default (notebook 04, "sinks and gates"):

- ``gate="headwise"`` (Qiu et al. 2025; Qwen3-Next): each head's output, after the softmax
  and before ``output_proj``, is multiplied by σ(x W_g), a sigmoid of the layer's own input,
  one number per head and token (``"elementwise"``: one per channel). ``gate_proj`` adds
  d_model × num_heads weights (d_model² elementwise).
- ``sink=True`` (gpt-oss): each head has a learned logit ``sink_logits[h]`` that joins every
  row of scores in the softmax and whose share is dropped, so a head may put less than all
  of its weight on the tokens (:func:`prenorm_lib.functional.softmax_with_sink`). One
  parameter per head, initialised at 0 (the reference code loads trained values). Such a
  module takes the explicit path (scores, mask, softmax with the sink) instead of the fused
  kernel.

Two inference options, off by default (notebook 06, section 11); the KV cache takes the fused
path, so a module with ``sink=True`` refuses it:

- ``num_kv_heads`` below ``num_heads`` shares each key/value head among a group of
  ``num_heads / num_kv_heads`` query heads: grouped-query attention (Ainslie et al. 2023),
  multi-query attention at ``num_kv_heads=1`` (Shazeer 2019). ``k_proj`` and ``v_proj``
  shrink to (num_kv_heads·d_head, d_model); key/value head j serves the query heads
  j·g … j·g + g − 1 (``repeat_interleave``, as Hugging Face's ``repeat_kv``).
- a :class:`KVCache` put in ``module.kv_cache`` keeps the rotated keys and the values of
  every token the module has seen, so that decoding runs the new tokens only: their
  positions continue after the cached ones, and each new query sees every cached key.

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
GATES = ("headwise", "elementwise")  # Qiu et al.'s two forms of the gate after SDPA


class KVCache:
    """The keys and values an attention layer has computed so far, for decoding a token at a time.

    ``update(keys, values)`` appends this call's keys and values, each (..., kv_heads, T_new,
    d_head), along the token axis and returns all of them; ``length`` is the number of
    tokens held, and the next token's position. Keys are cached *after* RoPE, so no cached
    key is ever rotated again. Put one in an attention module's ``kv_cache`` attribute (one
    per layer; :func:`prenorm_lib.generation.kv_caching` does that for a whole model).
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # (..., kv_heads, T_past, d_head)
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """How many tokens the cache holds."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        """The memory the cached keys and values take, in bytes."""
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values) if t is not None)

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``keys`` and ``values`` (..., kv_heads, T_new, d_head); return every key and value so far."""
        validation.tensor("keys", keys)
        validation.tensor("values", values)
        if keys.ndim < 3 or keys.shape[:-1] != values.shape[:-1]:
            raise ValueError(f"keys and values must be (..., kv_heads, T_new, d_head) with the same leading shape, "
                             f"got {tuple(keys.shape)} and {tuple(values.shape)}")
        if self.keys is not None and (keys.shape[:-2] != self.keys.shape[:-2] or keys.shape[-1] != self.keys.shape[-1]):
            raise ValueError(f"keys of shape {tuple(keys.shape)} do not continue the cached "
                             f"{tuple(self.keys.shape)}: only the token axis (second to last) may differ")
        self.keys = keys if self.keys is None else torch.cat((self.keys, keys), dim=-2)
        self.values = values if self.values is None else torch.cat((self.values, values), dim=-2)
        return self.keys, self.values

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return f"KVCache(length={self.length}, keys={shape}, nbytes={self.nbytes})"


def causal_mask_after(past: int, new: int, device=None) -> torch.Tensor:
    """(new, past + new) booleans, True where query i (at position past + i) may attend to key j ≤ past + i."""
    keys = torch.arange(past + new, device=device)
    return keys <= torch.arange(past, past + new, device=device)[:, None]


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

    ``num_kv_heads`` (default ``num_heads``) and ``kv_cache`` (default None) are the
    inference options of the module docstring: grouped-query attention and the KV cache.
    ``rope_fraction`` < 1 rotates only the fastest share of each head's pairs (partial RoPE).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_seq_len: int | None = None,
        rope_theta: float | None = None,
        qk_norm: bool | str = False,
        eps: float = 1e-5,
        num_kv_heads: int | None = None,
        device=None,
        dtype=None,
        norm_factory: Callable[[int], nn.Module] | None = None,
        gate: str | None = None,
        sink: bool = False,
        rope_fraction: float = 1.0,
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
        self.num_kv_heads = num_heads if num_kv_heads is None else validation.positive_int("num_kv_heads",
                                                                                           num_kv_heads)
        if num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads} (each key/value head "
                             "serves a group of num_heads / num_kv_heads query heads)")
        self.d_head = d_model // num_heads
        d_kv = self.num_kv_heads * self.d_head
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_kv, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_kv, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = None
        if rope_theta is not None:
            if max_seq_len is None:
                raise ValueError("max_seq_len is required when rope_theta is given (it sizes the RoPE cache)")
            self.rope = RotaryPositionalEmbedding(rope_theta, self.d_head, max_seq_len, device=device,
                                                  rotated_fraction=rope_fraction)
        # A module that scales each query by its position, for layers without RoPE: Llama 4's
        # temperature (positions.LogLengthTemperature), installed by rope.extend_context. None: off.
        self.query_temperature: nn.Module | None = None
        self.qk_norm = qk_norm_form(qk_norm)
        if self.qk_norm is not None:
            size = self.d_head if self.qk_norm == "per_head" else d_model
            if norm_factory is None:  # RMSNorm; the block passes ModelConfig's normaliser (DyT, Derf) instead
                def norm_factory(n: int) -> nn.Module:
                    return RMSNorm(n, eps=eps, device=device, dtype=dtype)
            self.q_norm = norm_factory(size)
            self.k_norm = norm_factory(size if self.qk_norm == "per_head" else d_kv)  # flat: the keys' width
        self.gate = None if gate is None else validation.choice("gate", gate, GATES)
        if self.gate is not None:  # one gate logit per head (headwise) or per channel (elementwise)
            self.gate_proj = Linear(d_model, num_heads if gate == "headwise" else d_model, device=device, dtype=dtype)
        if not isinstance(sink, bool):
            raise TypeError(f"sink must be True or False, got {sink!r}")
        self.sink_logits = nn.Parameter(torch.zeros(num_heads, device=device, dtype=dtype)) if sink else None
        self.kv_cache: KVCache | None = None  # set to a KVCache to decode a token at a time
        self.logit_softcap = None if logit_softcap is None else validation.positive_float("logit_softcap",
                                                                                          logit_softcap)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., seq_len, heads·d_head) → (..., heads, seq_len, d_head), heads = num_heads or num_kv_heads."""
        return x.unflatten(-1, (x.shape[-1] // self.d_head, self.d_head)).transpose(-3, -2)

    def _positions(self, x: torch.Tensor, token_positions: torch.Tensor | None) -> torch.Tensor | None:
        """The given positions; else, with a cache, those after the cached tokens; else None (0 … T−1)."""
        if token_positions is not None or self.kv_cache is None or not self.kv_cache.length:
            return token_positions
        return torch.arange(self.kv_cache.length, self.kv_cache.length + x.shape[-2], device=x.device)

    def shared_kv(self, t: torch.Tensor) -> torch.Tensor:
        """Key or value heads (..., num_kv_heads, T, d_head), each repeated for its group: (..., H, T, d_head)."""
        return t.repeat_interleave(self.num_heads // self.num_kv_heads, dim=-3)

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
        if self.query_temperature is not None:
            q = self.query_temperature(q, None if token_positions is None else token_positions.unsqueeze(-2))
        return q, k

    def attention_logits(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """The scores q·k/√d_head before the mask and the softmax, (..., H, T, T).

        What the fused kernel computes internally and never returns; the probes read it to
        follow the largest logit during training. With ``logit_softcap`` these are the scores
        *before* the cap: the softmax sees soft_cap of them.
        """
        q, k = self.queries_and_keys(x, token_positions)
        return q @ self.shared_kv(k).transpose(-2, -1) / self.d_head**0.5  # (..., H, T, T)

    def attention_weights(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Each head's weights on the tokens, causal, (..., H, T, T): what the module averages the values with.

        Rows sum to 1, or, with ``sink=True``, to 1 minus the sink's share. The fused kernel
        never returns them; the probes of notebook 04 read them.
        """
        scores = self.attention_logits(x, token_positions)  # (..., H, T, T)
        if self.logit_softcap is not None:  # Gemma 2: the softmax sees c·tanh(s/c)
            scores = soft_cap(scores, self.logit_softcap)
        visible = functional.causal_mask(scores.shape[-1], device=scores.device)  # (T, T)
        scores = scores.masked_fill(~visible, float("-inf"))
        if self.sink_logits is None:
            return functional.softmax(scores, dim=-1)
        return functional.softmax_with_sink(scores, self.sink_logits[:, None, None], dim=-1)

    def gate_heads(self, x: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        """Qiu et al.'s gate: each head's output (..., H, T, d_head) times σ(x W_g), per head or per channel."""
        gates = torch.sigmoid(self.gate_proj(x))  # (..., T, H) or (..., T, d_model)
        if self.gate == "headwise":
            return heads * gates.transpose(-1, -2).unsqueeze(-1)  # (..., H, T, 1) broadcast over d_head
        return heads * self.split_heads(gates)  # (..., H, T, d_head)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        explicit = self.sink_logits is not None or self.logit_softcap is not None
        if self.kv_cache is not None and explicit:
            raise ValueError("a KV cache is built for the fused path; a module with sink=True or a logit_softcap "
                             "takes the explicit one")
        if explicit:  # the fused kernel has neither a sink nor a cap: weights, then values
            values = self.shared_kv(self.split_heads(self.v_proj(x)))  # (..., H, T, d_head)
            heads = self.attention_weights(x, token_positions) @ values
        else:
            heads = self.fused_heads(x, token_positions)
        if self.gate is not None:
            heads = self.gate_heads(x, heads)
        return self.output_proj(heads.transpose(-3, -2).flatten(-2))  # (..., T, d_model)

    def fused_heads(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Each head's output (..., H, T, d_head) from torch's fused causal attention kernel."""
        q, k = self.queries_and_keys(x, self._positions(x, token_positions))  # (..., H or H_kv, T, d_head)
        v = self.split_heads(self.v_proj(x))  # (..., H_kv, T, d_head)
        causal, mask = True, None
        if self.kv_cache is not None:
            past = self.kv_cache.length
            k, v = self.kv_cache.update(k, v)  # (..., H_kv, past + T, d_head)
            if past:  # queries at past … past + T − 1 see every key up to their own position
                causal, mask = False, causal_mask_after(past, x.shape[-2], device=x.device)
        lead = q.shape[:-3]
        out = nn.functional.scaled_dot_product_attention(  # fused kernel wants (N, H, T, d_head)
            q.reshape(-1, *q.shape[-3:]), k.reshape(-1, *k.shape[-3:]), v.reshape(-1, *v.shape[-3:]),
            attn_mask=mask, is_causal=causal, enable_gqa=self.num_kv_heads != self.num_heads,
        )
        return out.reshape(*lead, *out.shape[-3:])  # (..., H, T, d_head)
