"""A model of the handout's interface as Hugging Face's ``LlamaForCausalLM`` (notebook 06, section 8).

The handout's pre-norm LM is Llama's architecture: RMSNorm before attention and before a
SwiGLU feed-forward, RoPE on queries and keys, a final norm and an untied head. Only the
names differ, and one storage order: the handout's RoPE rotates interleaved pairs
(x_2k, x_2k+1), Hugging Face's ``rotate_half`` rotates (x_k, x_k+d/2). Permuting each
head's query and key rows by :func:`prenorm_lib.rope.interleaved_to_half_permutation`
(notebook 03, section 8) moves every pair to where ``rotate_half`` looks for it; a
permutation of a head's dimensions leaves every q·k unchanged, so the scores, the
attention and the logits are the same.

Works from a state dict with the handout's names, so it takes a learner's model as it is
(``transformers`` is imported only when a function here is called; the graded kernel has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from prenorm_lib import validation
from prenorm_lib.rope import interleaved_to_half_permutation

# handout name (inside layers.{i}.) → Llama name (inside model.layers.{i}.)
LAYER_NAMES = {
    "ln1.weight": "input_layernorm.weight",
    "attn.q_proj.weight": "self_attn.q_proj.weight",
    "attn.k_proj.weight": "self_attn.k_proj.weight",
    "attn.v_proj.weight": "self_attn.v_proj.weight",
    "attn.output_proj.weight": "self_attn.o_proj.weight",
    "ln2.weight": "post_attention_layernorm.weight",  # Hugging Face's name for the norm *before* the FFN
    "ffn.w1.weight": "mlp.gate_proj.weight",  # the gate, SiLU(w1 x)
    "ffn.w3.weight": "mlp.up_proj.weight",  # the value, w3 x
    "ffn.w2.weight": "mlp.down_proj.weight",
}
MODEL_NAMES = {"token_embeddings.weight": "model.embed_tokens.weight", "ln_final.weight": "model.norm.weight",
               "lm_head.weight": "lm_head.weight"}


def _to_half_pairs(weight: torch.Tensor, d_head: int) -> torch.Tensor:
    """A q or k projection (heads·d_head, d_model) with each head's rows in the half-split pair order."""
    perm = interleaved_to_half_permutation(d_head)
    return weight.unflatten(0, (-1, d_head))[:, perm].flatten(0, 1)


def llama_state_dict(state: Mapping[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
    """The handout's state dict (``token_embeddings``, ``layers.{i}.…``, ``ln_final``, ``lm_head``) under Llama's
    names, each head's query and key rows permuted to the half-split pairing."""
    validation.positive_int("num_heads", num_heads)
    d_head = state["layers.0.attn.q_proj.weight"].shape[0] // num_heads
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if name in MODEL_NAMES:
            out[MODEL_NAMES[name]] = value
            continue
        _, index, rest = name.split(".", 2) if name.startswith("layers.") else ("", "", name)
        if rest not in LAYER_NAMES:
            raise ValueError(f"{name!r} is not a name of the handout's state dict (expected token_embeddings, "
                             f"layers.{{i}}.{{{', '.join(LAYER_NAMES)}}}, ln_final, lm_head)")
        if rest in ("attn.q_proj.weight", "attn.k_proj.weight"):
            value = _to_half_pairs(value, d_head)
        out[f"model.layers.{index}.{LAYER_NAMES[rest]}"] = value
    return out


def llama_config(vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int, d_ff: int,
                 rope_theta: float, eps: float = 1e-5, num_kv_heads: int | None = None) -> Any:
    """``transformers.LlamaConfig`` for the handout's ``TransformerLM`` arguments: no biases, SiLU, an untied head."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=d_model, intermediate_size=d_ff, num_hidden_layers=num_layers,
        num_attention_heads=num_heads, num_key_value_heads=num_kv_heads or num_heads, hidden_act="silu",
        max_position_embeddings=context_length, rms_norm_eps=eps, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
    )


def as_llama(model: torch.nn.Module, *, vocab_size: int, context_length: int, d_model: int, num_layers: int,
             num_heads: int, d_ff: int, rope_theta: float, eps: float = 1e-5) -> Any:
    """A ``LlamaForCausalLM`` holding ``model``'s weights (read through its state dict), in eval mode.

    The keyword arguments are the handout's ``TransformerLM`` arguments, as the model was built with.
    """
    from transformers import LlamaForCausalLM

    config = llama_config(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, eps)
    llama = LlamaForCausalLM(config)
    state = llama_state_dict({k: v.detach() for k, v in model.state_dict().items()}, num_heads)
    llama.load_state_dict(state, strict=True)
    return llama.eval()


def largest_logit_difference(model: torch.nn.Module, llama: Any, token_ids: torch.Tensor) -> float:
    """max |model(ids) − llama(ids).logits| over a batch of token ids (B, T), without gradients."""
    with torch.no_grad():
        ours = model(token_ids)
        theirs = llama(input_ids=token_ids).logits
    return float((ours - theirs).abs().max())
