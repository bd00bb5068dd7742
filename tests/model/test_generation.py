"""Greedy generation with and without a KV cache gives the same tokens (notebook 06, section 10)."""

from __future__ import annotations

import pytest
import torch

from prenorm_lib import TransformerLM
from prenorm_lib.generation import cached_modules, greedy, kv_caching


def model() -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(50, 24, 32, 2, 4, 48, rope_theta=1000.0).eval()


@pytest.mark.parametrize("prompt", [torch.tensor([3, 7, 1]), torch.tensor([[3, 7, 1, 4], [9, 9, 2, 0]])])
def test_the_cache_gives_the_same_tokens(prompt):
    lm = model()
    assert torch.equal(greedy(lm, prompt, 12, cache=True, context_length=24), greedy(lm, prompt, 12))


def test_the_caches_are_detached_afterwards_and_hold_every_token():
    lm = model()
    with kv_caching(lm) as caches:
        lm(torch.tensor([1, 2, 3]))
        lm(torch.tensor([4]))
    assert [cache.length for cache in caches] == [4, 4]
    assert all(module.kv_cache is None for module in cached_modules(lm))


def test_a_model_without_cache_support_is_named():
    with pytest.raises(ValueError, match="has no module with a kv_cache attribute"):
        greedy(torch.nn.Linear(2, 2), torch.tensor([1]), 2, cache=True)


def test_a_cache_cannot_slide():
    with pytest.raises(ValueError, match="cannot slide"):
        greedy(model(), torch.tensor([1, 2, 3]), 30, cache=True, context_length=24)


def test_without_a_cache_the_window_slides():
    assert greedy(model(), torch.tensor([1, 2, 3]), 30, context_length=24).shape == (33,)
