"""Generating tokens from a language model, with or without a KV cache (notebook 06, sections 8 and 10).

Any model that maps token ids (..., T) to logits (..., T, vocab_size) will do: the library's
``TransformerLM`` or a learner's. Without a cache every new token runs the model on the whole
sequence again; with one (:func:`kv_caching`), the prompt runs once and every later step runs
the new token alone, its keys and values appended to each layer's :class:`~prenorm_lib.attention.KVCache`
and its position read from the cache's length. A model takes part in caching through the
attention modules it holds: every submodule with a ``kv_cache`` attribute gets a cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.attention import KVCache


def cached_modules(model: nn.Module) -> list[nn.Module]:
    """The submodules of ``model`` that keep a KV cache (those with a ``kv_cache`` attribute), in order."""
    return [module for module in model.modules() if hasattr(module, "kv_cache")]


@contextlib.contextmanager
def kv_caching(model: nn.Module) -> Iterator[list[KVCache]]:
    """Inside the block every attention module of ``model`` keeps a fresh :class:`KVCache`; after it, none.

    Yields the caches, one per attention module (so their memory can be read afterwards as
    well: they stay filled, only detached from the model).
    """
    modules = cached_modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__} has no module with a kv_cache attribute: give its attention "
                         "modules one (self.kv_cache = None in __init__) and use it in forward")
    caches = [KVCache() for _ in modules]
    for module, cache in zip(modules, caches, strict=True):
        module.kv_cache = cache
    try:
        yield caches
    finally:
        for module in modules:
            module.kv_cache = None


def greedy(model: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, n_new: int, *,
           cache: bool = False, context_length: int | None = None) -> torch.Tensor:
    """``ids`` (T,) or (B, T) followed by ``n_new`` tokens, each the most likely after those before it.

    Without ``cache`` each step runs ``model`` on the last ``context_length`` tokens (all of
    them when it is None). With ``cache`` the prompt runs once and each step runs the newest
    token alone; the whole sequence must then fit in ``context_length`` (a cache does not
    slide: its positions only grow).
    """
    validation.tensor("ids", ids)
    if ids.ndim not in (1, 2) or ids.shape[-1] == 0 or ids.is_floating_point():
        raise ValueError(f"ids must be integer token ids of shape (T,) or (B, T) with T ≥ 1, got "
                         f"{tuple(ids.shape)} {ids.dtype}")
    validation.positive_int("n_new", n_new)
    if context_length is not None:
        validation.positive_int("context_length", context_length)
        if cache and ids.shape[-1] + n_new > context_length:
            raise ValueError(f"{ids.shape[-1]} prompt tokens + n_new={n_new} exceed context_length={context_length}:"
                             " a KV cache cannot slide its window; generate fewer tokens")
    with torch.no_grad():
        if not cache:
            for _ in range(n_new):
                window = ids if context_length is None else ids[..., -context_length:]
                ids = torch.cat((ids, model(window)[..., -1, :].argmax(-1, keepdim=True)), dim=-1)
            return ids
        with kv_caching(model):
            step = ids
            for _ in range(n_new):
                step = model(step)[..., -1, :].argmax(-1, keepdim=True)  # (..., 1): the next token, fed next
                ids = torch.cat((ids, step), dim=-1)
    return ids
