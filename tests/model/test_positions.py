"""Absolute sinusoidal positions against Vaswani et al.'s formula, and the model's three position options."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib.model import TransformerLM
from prenorm_lib.positions import SinusoidalPositions, sinusoidal_encoding

LM_ARGS = {"vocab_size": 40, "context_length": 12, "d_model": 16, "num_layers": 2, "num_heads": 4, "d_ff": 32}


def vaswani(position: int, d_model: int) -> list[float]:
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)), one number at a time."""
    values = []
    for dim in range(d_model):
        i = dim // 2
        angle = position / 10000 ** (2 * i / d_model)
        values.append(math.sin(angle) if dim % 2 == 0 else math.cos(angle))
    return values


@given(position=st.integers(0, 5000), half=st.integers(1, 32))
def test_encoding_matches_the_formula(position, half):
    d_model = 2 * half
    expected = torch.tensor(vaswani(position, d_model), dtype=torch.float32)
    assert_close(sinusoidal_encoding(torch.tensor([position]), d_model)[0], expected, rtol=0, atol=1e-6)


def test_encoding_keeps_the_positions_shape_and_is_float32():
    positions = torch.arange(12).reshape(3, 4)
    out = sinusoidal_encoding(positions, 8)
    assert out.shape == (3, 4, 8) and out.dtype == torch.float32
    assert_close(out[2, 1], sinusoidal_encoding(torch.tensor([9]), 8)[0])


def test_module_adds_the_encoding_and_owns_nothing():
    pe = SinusoidalPositions(8)
    x = torch.randn(2, 5, 8)
    assert_close(pe(x), x + sinusoidal_encoding(torch.arange(5), 8))
    assert_close(pe(x, torch.arange(3, 8)), x + sinusoidal_encoding(torch.arange(3, 8), 8))
    assert list(pe.parameters()) == [] and dict(pe.state_dict()) == {}


def lm(**changes) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(**{**LM_ARGS, **changes})


@pytest.mark.parametrize("positions", ["rope", "sinusoidal", "none"])
def test_every_position_option_has_the_default_state_dict(positions):
    default = lm().state_dict()
    other = lm(positions=positions).state_dict()
    assert list(other) == list(default)
    assert all(torch.equal(other[name], default[name]) for name in default)  # same seed, same weights


def test_none_equals_the_older_spelling_rope_theta_none():
    tokens = torch.randint(0, 40, (2, 12))
    assert torch.equal(lm(positions="none")(tokens), lm(rope_theta=None)(tokens))
    assert lm(rope_theta=None).positions == "none"
    assert all(block.attn.rope is None for block in lm(positions="sinusoidal").layers)


def test_sinusoidal_model_adds_the_encoding_to_the_embeddings():
    model = lm(positions="sinusoidal")
    tokens = torch.randint(0, 40, (1, 6))
    captured = []
    handle = model.layers[0].register_forward_pre_hook(lambda _module, args: captured.append(args[0]))
    model(tokens)
    handle.remove()
    expected = model.token_embeddings(tokens) + sinusoidal_encoding(torch.arange(6), 16)
    assert_close(captured[0], expected)


def test_only_positional_models_care_where_tokens_sit():
    """Without positions, one causal layer's last logits ignore the order of the earlier tokens."""
    tokens = torch.tensor([[3, 7, 11, 5, 9]])
    swapped = torch.tensor([[7, 3, 11, 5, 9]])
    outputs = {p: (lm(positions=p, num_layers=1)(tokens)[0, -1], lm(positions=p, num_layers=1)(swapped)[0, -1])
               for p in ("rope", "sinusoidal", "none")}
    assert_close(*outputs["none"])
    assert (outputs["rope"][0] - outputs["rope"][1]).abs().max() > 1e-3
    assert (outputs["sinusoidal"][0] - outputs["sinusoidal"][1]).abs().max() > 1e-3


def test_rope_sees_offsets_only_sinusoidal_sees_absolute_positions():
    tokens = torch.randint(0, 40, (1, 5))
    for positions, shift_invariant in (("rope", True), ("sinusoidal", False)):
        model = lm(positions=positions)
        gap = (model(tokens, torch.arange(4, 9)) - model(tokens)).abs().max()
        assert (gap < 1e-4) == shift_invariant, positions
