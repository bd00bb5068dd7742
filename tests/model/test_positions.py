"""Absolute sinusoidal positions against Vaswani et al.'s formula, and the model's three position options."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib.model import TransformerLM
from prenorm_lib.positions import LogLengthTemperature, SinusoidalPositions, log_length_scale, sinusoidal_encoding
from prenorm_lib.rope import RotaryPositionalEmbedding, extend_context

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


# ---- Llama 4's attention temperature for layers without positions ---------------------------


def test_log_length_scale_is_llama4s_formula_written_out():
    # models/llama4/model.py: log(floor((pos + 1) / floor_scale) + 1) * attn_scale + 1, defaults 8192 and 0.1
    positions = torch.tensor([0, 100, 8190, 8191, 16382, 16383, 100_000])
    expected = [math.log(math.floor((p + 1) / 8192) + 1) * 0.1 + 1 for p in positions.tolist()]
    assert log_length_scale(positions, 8192.0).tolist() == pytest.approx(expected, rel=1e-6)
    assert log_length_scale(positions, 8192.0)[:3].tolist() == [1.0, 1.0, 1.0]  # short contexts untouched
    assert log_length_scale(torch.arange(70), 32.0, 0.1)[[30, 31, 62, 63]].tolist() == pytest.approx(
        [1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)])


def test_the_temperature_scales_queries_by_their_own_position():
    q = torch.randn(2, 3, 40, 8)  # (batch, heads, T, d)
    hot = LogLengthTemperature(16.0, 0.5)
    scale = torch.tensor([math.log((p + 1) // 16 + 1) * 0.5 + 1 for p in range(40)])
    torch.testing.assert_close(hot(q), q * scale[:, None])
    positions = torch.tensor([0, 31, 37])  # given positions: the query at 37 gets 37's scale
    torch.testing.assert_close(hot(q[..., :3, :], positions), q[..., :3, :] * scale[positions][:, None])
    assert not list(hot.parameters()) and "floor_scale=16" in repr(hot)


@pytest.mark.parametrize(("build", "match"), [
    (lambda: LogLengthTemperature(0.0), "floor_scale must be a finite number > 0"),
    (lambda: log_length_scale(torch.tensor([1.5]), 8.0), "positions must be an integer tensor"),
    (lambda: LogLengthTemperature(8.0)(torch.zeros(4, dtype=torch.long)), "q must be a floating-point tensor"),
])
def test_bad_temperature_arguments_are_named(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


# ---- the model's options after 2024: partial RoPE, NoPE layers, Llama 4's temperature --------------


def hybrid(**options) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(**{**LM_ARGS, "num_layers": 8, "context_length": 40, **options})


def test_every_fourth_layer_counted_from_one_has_no_positions():
    model = hybrid(nope_layer_interval=4)
    without = [i for i, block in enumerate(model.layers) if block.attn.rope is None]
    assert without == [3, 7]  # Llama 4: (layer_id + 1) % nope_layer_interval == 0
    assert [model.config.layer_has_rope(i) for i in range(8)] == [i not in (3, 7) for i in range(8)]
    plain = hybrid()
    assert plain.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), model.state_dict().values(), strict=True))
    tokens = torch.randint(0, 40, (2, 40))
    for i in (3, 7):  # the NoPE layers are the plain ones with their RoPE taken out
        plain.layers[i].attn.rope = None
    assert_close(model(tokens), plain(tokens))


def test_rope_fraction_reaches_every_layer():
    model = hybrid(rope_fraction=0.5, nope_layer_interval=4)
    fractions = [block.attn.rope.rotated_fraction for block in model.layers if block.attn.rope is not None]
    assert fractions == [0.5] * 6
    by_hand = hybrid(nope_layer_interval=4)
    for block in by_hand.layers:
        if block.attn.rope is not None:
            block.attn.rope = RotaryPositionalEmbedding(10000.0, 4, 40, rotated_fraction=0.5)
    tokens = torch.randint(0, 40, (2, 40))
    assert_close(model(tokens), by_hand(tokens))


@pytest.mark.parametrize(("options", "error", "match"), [
    ({"rope_fraction": 1.5}, ValueError, r"rope_fraction must be a share in \[0, 1\]"),
    ({"rope_fraction": True}, ValueError, "rope_fraction must be a share"),
    ({"nope_layer_interval": 1}, ValueError, "that is positions='none'"),
    ({"nope_layer_interval": 9}, ValueError, "leaves no layer without positions in num_layers=8"),
    ({"nope_layer_interval": 2.0}, TypeError, "nope_layer_interval must be a positive int"),
    ({"positions": "sinusoidal", "rope_fraction": 0.5}, ValueError, "with positions='sinusoidal' it would change"),
    ({"positions": "none", "nope_layer_interval": 4}, ValueError, "with positions='none' it would change"),
])
def test_bad_position_options_are_named(options, error, match):
    with pytest.raises(error, match=match):
        hybrid(**options)


def test_llamas_temperature_acts_on_the_nope_layers_beyond_the_floor_only():
    model = hybrid(nope_layer_interval=4, context_length=20)
    hot = extend_context(model, 40, nope_temperature={"floor_scale": 20.0, "attn_scale": 0.5})
    cold = extend_context(model, 40)
    kinds = [type(b.attn.query_temperature).__name__ for b in hot.layers]
    assert kinds == (["NoneType"] * 3 + ["LogLengthTemperature"]) * 2
    tokens = torch.randint(0, 40, (2, 40))
    hot_logits, cold_logits = hot(tokens), cold(tokens)
    assert_close(hot_logits[:, :19], cold_logits[:, :19])  # positions 0 … 18: scale log(0 + 1)·0.5 + 1 = 1
    assert (hot_logits[:, 19:] - cold_logits[:, 19:]).abs().max() > 1e-3
    assert model.layers[3].attn.query_temperature is None  # the original is untouched


def test_the_temperature_needs_layers_without_positions():
    with pytest.raises(ValueError, match="this model has none"):
        extend_context(hybrid(), 48, nope_temperature={"floor_scale": 40.0})
    with pytest.raises(ValueError, match="positions are sinusoidal"):
        extend_context(hybrid(positions="sinusoidal"), 48, nope_temperature={"floor_scale": 40.0})
    with pytest.raises(ValueError, match="nope_temperature must be a mapping"):
        extend_context(hybrid(nope_layer_interval=4), 48, nope_temperature={"floor": 40.0})
    everywhere = extend_context(hybrid(positions="none"), 48, nope_temperature={"floor_scale": 40.0})
    assert all(block.attn.query_temperature is not None for block in everywhere.layers)
