"""The CS336 handout's test adapters, the model's filled in with your notebooks' code (``make handout``).

The handout's tests import these functions by name and call them with keyword arguments;
each model adapter builds your module, loads the test's weights into it by the handout's
state-dict names and runs it — "glue code", no logic of its own (handout, §1). The adapters
of the handout's other parts (data, loss, optimizer, checkpoints, tokenizer) are yours to fill.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

import numpy.typing as npt
import torch
from cs336_basics.prenorm_model import (
    MyAttention,
    MyBlock,
    MyEmbedding,
    MyLinear,
    MyRMSNorm,
    MyRoPE,
    MySwiGLU,
    MyTransformerLM,
    attention,
    my_silu,
    stable_softmax,
)
from torch import Tensor


def _loaded(module: torch.nn.Module, weights: dict[str, Tensor]) -> torch.nn.Module:
    module.load_state_dict(weights)
    return module


def run_linear(d_in: int, d_out: int, weights: Tensor, in_features: Tensor) -> Tensor:
    return _loaded(MyLinear(d_in, d_out), {"weight": weights})(in_features)


def run_embedding(vocab_size: int, d_model: int, weights: Tensor, token_ids: Tensor) -> Tensor:
    return _loaded(MyEmbedding(vocab_size, d_model), {"weight": weights})(token_ids)


def run_swiglu(d_model: int, d_ff: int, w1_weight: Tensor, w2_weight: Tensor, w3_weight: Tensor,
               in_features: Tensor) -> Tensor:
    weights = {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight}
    return _loaded(MySwiGLU(d_model, d_ff), weights)(in_features)


def run_scaled_dot_product_attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None) -> Tensor:
    return attention(Q, K, V, mask)


def _projections(q: Tensor, k: Tensor, v: Tensor, o: Tensor) -> dict[str, Tensor]:
    return {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "output_proj.weight": o}


def run_multihead_self_attention(d_model: int, num_heads: int, q_proj_weight: Tensor, k_proj_weight: Tensor,
                                 v_proj_weight: Tensor, o_proj_weight: Tensor, in_features: Tensor) -> Tensor:
    module = MyAttention(d_model, num_heads, in_features.shape[-2], None)  # theta=None: no RoPE
    return _loaded(module, _projections(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))(in_features)


def run_multihead_self_attention_with_rope(d_model: int, num_heads: int, max_seq_len: int, theta: float,
                                           q_proj_weight: Tensor, k_proj_weight: Tensor, v_proj_weight: Tensor,
                                           o_proj_weight: Tensor, in_features: Tensor,
                                           token_positions: Tensor | None = None) -> Tensor:
    module = MyAttention(d_model, num_heads, max_seq_len, theta)
    module = _loaded(module, _projections(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return module(in_features, token_positions)


def run_rope(d_k: int, theta: float, max_seq_len: int, in_query_or_key: Tensor, token_positions: Tensor) -> Tensor:
    return MyRoPE(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                          weights: dict[str, Tensor], in_features: Tensor) -> Tensor:
    return _loaded(MyBlock(d_model, num_heads, d_ff, max_seq_len, theta), weights)(in_features)


def run_transformer_lm(vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                       d_ff: int, rope_theta: float, weights: dict[str, Tensor], in_indices: Tensor) -> Tensor:
    model = MyTransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    return _loaded(model, weights)(in_indices)


def run_rmsnorm(d_model: int, eps: float, weights: Tensor, in_features: Tensor) -> Tensor:
    return _loaded(MyRMSNorm(d_model, eps), {"weight": weights})(in_features)


def run_silu(in_features: Tensor) -> Tensor:
    return my_silu(in_features)


def run_softmax(in_features: Tensor, dim: int) -> Tensor:
    return stable_softmax(in_features, dim)


# --- the handout's other parts: not in the prenorm course, yours to fill ---------------------------


def _not_in_the_course(part: str):
    raise NotImplementedError(f"{part} is not part of the prenorm course: write it in cs336_basics and call it here")


def run_get_batch(dataset: npt.NDArray, batch_size: int, context_length: int, device: str) -> tuple[Tensor, Tensor]:
    _not_in_the_course("the data loader (§5.1)")


def run_cross_entropy(inputs: Tensor, targets: Tensor) -> Tensor:
    _not_in_the_course("the cross-entropy loss (§4.1)")


def run_gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float) -> None:
    _not_in_the_course("gradient clipping (§4.5)")


def get_adamw_cls() -> Any:
    _not_in_the_course("AdamW (§4.3)")


def run_get_lr_cosine_schedule(it: int, max_learning_rate: float, min_learning_rate: float, warmup_iters: int,
                               cosine_cycle_iters: int) -> float:
    _not_in_the_course("the learning-rate schedule (§4.4)")


def run_save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, iteration: int,
                        out: str | os.PathLike | BinaryIO | IO[bytes]) -> None:
    _not_in_the_course("checkpointing (§5.2)")


def run_load_checkpoint(src: str | os.PathLike | BinaryIO | IO[bytes], model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer) -> int:
    _not_in_the_course("checkpointing (§5.2)")


def get_tokenizer(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]],
                  special_tokens: list[str] | None = None) -> Any:
    _not_in_the_course("the BPE tokenizer (§2.6)")


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str],
                  **kwargs: Any) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    _not_in_the_course("BPE training (§2.4)")
