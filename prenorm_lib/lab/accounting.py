"""Parameters and forward FLOPs of the library's language model, as torch counts them (notebook 06, section 10).

The handout's §3.6 asks for both by hand ("transformer_accounting"); this module measures
them on the library's ``TransformerLM``, so a hand count has something no one here wrote to
agree with: ``num_parameters()`` and torch's own ``torch.utils.flop_counter.FlopCounterMode``,
which counts the FLOPs of every matrix multiply a forward pass runs (2mnp for an (m×n)·(n×p)
product, the handout's rule), attributed to the module that ran it.

A model of GPT-2 XL's shape holds 2.1 billion parameters; it is built on PyTorch's ``meta``
device, where tensors have shapes but no storage, so counting costs no memory. Attention runs
through the math kernel there (``SDPBackend.MATH``, two batched matrix multiplies that the
counter sees): the fused CPU kernel is invisible to FlopCounterMode.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from prenorm_lib import validation
from prenorm_lib.model import TransformerLM


class Shape(NamedTuple):
    """The handout's ``TransformerLM`` arguments that size a model (RoPE's θ changes no count)."""

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int


def gpt2_shape(num_layers: int, d_model: int, num_heads: int, context_length: int = 1024) -> Shape:
    """GPT-2's vocabulary (50,257 tokens) and d_ff = 4·d_model, as the handout's §3.6 sizes GPT-2 XL."""
    return Shape(50257, context_length, d_model, num_layers, num_heads, 4 * d_model)


# The handout's §3.6, problem transformer_accounting: XL in (a), the other three in (d).
GPT2_SHAPES = {
    "GPT-2 small": gpt2_shape(12, 768, 12),
    "GPT-2 medium": gpt2_shape(24, 1024, 16),
    "GPT-2 large": gpt2_shape(36, 1280, 20),
    "GPT-2 XL": gpt2_shape(48, 1600, 25),
}

# The parts of a forward pass whose matrix multiplies are counted, and what each one holds.
FLOP_PARTS = {
    "projections": "q_proj, k_proj, v_proj and output_proj of every block",
    "attention": "the scores Q Kᵀ and the weighted sum of the values, every head of every block",
    "feed-forward": "w1, w3 and w2 of every block's SwiGLU",
    "lm_head": "the output matrix, d_model to vocab_size",
}


def _model(shape: Shape, device: str) -> TransformerLM:
    with torch.device(device):
        return TransformerLM(*shape, rope_theta=10000.0)


def measured_parameters(shape: Shape) -> int:
    """``num_parameters()`` of the library's ``TransformerLM`` of this shape (built without memory)."""
    return _model(Shape(*shape), "meta").num_parameters()


def measured_flops(shape: Shape, device: str = "meta") -> dict[str, int]:
    """FLOPs of one forward pass over ``context_length`` tokens (one sequence), by part (:data:`FLOP_PARTS`).

    Counted by ``FlopCounterMode`` on the library's model; ``device="cpu"`` runs it for real
    (small shapes only), ``"meta"`` counts shapes alone.
    """
    shape = Shape(*shape)
    for name, value in shape._asdict().items():
        validation.positive_int(name, value)
    model = _model(shape, device)
    ids = torch.zeros(shape.context_length, dtype=torch.long, device=device)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(ids)
    by_module = counter.get_flop_counts()
    parts = dict.fromkeys(FLOP_PARTS, 0)
    for i in range(shape.num_layers):
        block = f"TransformerLM.layers.{i}"
        attention = sum(by_module.get(f"{block}.attn", {}).values())
        projections = sum(sum(by_module.get(f"{block}.attn.{p}", {}).values())
                          for p in ("q_proj", "k_proj", "v_proj", "output_proj"))
        parts["projections"] += projections
        parts["attention"] += attention - projections
        parts["feed-forward"] += sum(by_module.get(f"{block}.ffn", {}).values())
    parts["lm_head"] = sum(by_module.get("TransformerLM.lm_head", {}).values())
    total = sum(by_module.get("Global", {}).values())
    if sum(parts.values()) != total:  # a matrix multiply outside the parts named here: say so, never hide it
        raise RuntimeError(f"FlopCounterMode counted {total} FLOPs, the parts {sum(parts.values())}: {by_module}")
    return parts


def shares(flops: dict[str, float]) -> dict[str, float]:
    """Each part's fraction of the total."""
    total = sum(flops.values())
    return {name: value / total for name, value in flops.items()}
