"""TransformerLM: output shape, the CS336 state-dict layout, and a save/load round trip."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch.testing import assert_close

from prenorm_lib.model import TransformerLM
from prenorm_lib.norm import DynamicErf, DynamicTanh, RMSNorm

VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF = 40, 12, 16, 2, 4, 32


def make_model(norm: str = "pre", ffn: str = "swiglu") -> TransformerLM:
    return TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, norm=norm, ffn=ffn)


def cs336_shapes(num_layers: int, with_norms: bool, with_final_norm: bool) -> dict[str, tuple[int, ...]]:
    """The handout's parameter names and shapes, written out independently of the model."""
    shapes = {"token_embeddings.weight": (VOCAB, D_MODEL)}
    for i in range(num_layers):
        for proj in ("q_proj", "k_proj", "v_proj", "output_proj"):
            shapes[f"layers.{i}.attn.{proj}.weight"] = (D_MODEL, D_MODEL)
        if with_norms:
            shapes[f"layers.{i}.ln1.weight"] = (D_MODEL,)
            shapes[f"layers.{i}.ln2.weight"] = (D_MODEL,)
        shapes[f"layers.{i}.ffn.w1.weight"] = (D_FF, D_MODEL)
        shapes[f"layers.{i}.ffn.w2.weight"] = (D_MODEL, D_FF)
        shapes[f"layers.{i}.ffn.w3.weight"] = (D_FF, D_MODEL)
    if with_final_norm:
        shapes["ln_final.weight"] = (D_MODEL,)
    shapes["lm_head.weight"] = (VOCAB, D_MODEL)
    return shapes


@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_logits_shape(lead):
    tokens = torch.randint(0, VOCAB, (*lead, 7))
    assert make_model()(tokens).shape == (*lead, 7, VOCAB)


@pytest.mark.parametrize(
    ("norm", "with_norms", "with_final_norm"), [("pre", True, True), ("post", True, False), ("none", False, False)]
)
def test_state_dict_has_exactly_the_cs336_layout(norm, with_norms, with_final_norm):
    state = make_model(norm).state_dict()
    expected = cs336_shapes(LAYERS, with_norms, with_final_norm)
    assert set(state) == set(expected)
    assert {name: tuple(t.shape) for name, t in state.items()} == expected


def test_only_the_pre_norm_model_has_a_final_norm():
    assert "ln_final.weight" in make_model("pre").state_dict()
    assert "ln_final.weight" not in make_model("post").state_dict()
    assert "ln_final.weight" not in make_model("none").state_dict()


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_saved_state_dict_loads_strictly_and_reproduces_logits(norm):
    source, target = make_model(norm), make_model(norm)
    tokens = torch.randint(0, VOCAB, (2, CONTEXT))
    assert (source(tokens) - target(tokens)).abs().max() > 1e-3  # two different initialisations
    buffer = io.BytesIO()
    torch.save(source.state_dict(), buffer)
    buffer.seek(0)
    target.load_state_dict(torch.load(buffer, weights_only=True), strict=True)
    assert torch.equal(target(tokens), source(tokens))


def test_num_parameters_counts_every_weight():
    model = make_model()
    expected = sum(math.prod(shape) for shape in cs336_shapes(LAYERS, True, True).values())
    assert model.num_parameters() == expected
    assert model.num_parameters(include_embeddings=False) == expected - VOCAB * D_MODEL


def test_token_positions_reach_rope():
    """RoPE sees only offsets: shifting every position leaves the logits alone, spreading them does not."""
    model = make_model()
    tokens = torch.randint(0, VOCAB, (1, 5))
    logits = model(tokens)
    assert_close(model(tokens, torch.arange(5)), logits)
    assert_close(model(tokens, torch.arange(3, 8)), logits, rtol=1e-4, atol=1e-4)
    assert (model(tokens, torch.arange(0, 10, 2)) - logits).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("norm", "has_final_norm"),
    [("sandwich", True), ("reordered", True), ("deepnorm", False), ("rezero", False)],
)
def test_final_norm_only_where_the_stream_is_never_normalised(norm, has_final_norm):
    model = make_model(norm)
    assert ("ln_final.weight" in model.state_dict()) == has_final_norm


def test_every_block_is_told_the_depth():
    """DeepNorm's α depends on the number of layers of the whole model, not of one block."""
    model = TransformerLM(VOCAB, CONTEXT, D_MODEL, 5, HEADS, D_FF, norm="deepnorm")
    assert all(layer.deepnorm_alpha == pytest.approx(10**0.25) for layer in model.layers)


def test_block_options_reach_every_layer():
    model = TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, qk_norm=True)
    names = set(model.state_dict())
    for i in range(LAYERS):
        assert {f"layers.{i}.attn.q_norm.weight", f"layers.{i}.attn.k_norm.weight"} <= names
    torch.manual_seed(0)
    plain = TransformerLM(VOCAB, CONTEXT, D_MODEL, 4, HEADS, D_FF)
    torch.manual_seed(0)
    scaled = TransformerLM(VOCAB, CONTEXT, D_MODEL, 4, HEADS, D_FF, scaled_init=True)
    for i in range(4):
        assert_close(scaled.layers[i].ffn.w2.weight, plain.layers[i].ffn.w2.weight / 8**0.5)


# ---- the config's options in the whole model ---------------------------------------------


@pytest.mark.parametrize("normaliser", ["dyt", "derf"])
def test_a_pointwise_normaliser_replaces_every_rmsnorm_of_the_model(normaliser):
    model = TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, qk_norm=True, normaliser=normaliser,
                          alpha0_attention=0.8, alpha0_other=0.2)
    assert not any(isinstance(m, RMSNorm) for m in model.modules())
    kind = DynamicTanh if normaliser == "dyt" else DynamicErf
    assert isinstance(model.ln_final, kind) and model.ln_final.alpha.item() == pytest.approx(0.2)  # "other"
    assert sum(isinstance(m, kind) for m in model.modules()) == LAYERS * 4 + 1  # ln1, ln2, q_norm, k_norm; final
    assert model.embedding_scale.item() == 1.0  # DyT §5's scalar after the embedding, at the course's scale


def test_the_embedding_scale_multiplies_every_embedding():
    model = TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, normaliser="dyt")
    tokens = torch.randint(0, VOCAB, (2, CONTEXT))
    before = model(tokens)
    with torch.no_grad():
        model.embedding_scale.fill_(2.0)
        model.token_embeddings.weight.mul_(0.5)
    assert_close(model(tokens), before)
    assert "embedding_scale" not in TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF).state_dict()


def test_mix_ln_and_layernorm_scaling_know_each_blocks_place():
    mix = TransformerLM(VOCAB, CONTEXT, D_MODEL, 8, HEADS, D_FF, norm="mix_ln")
    assert [layer.mix_ln_post for layer in mix.layers] == [True, True] + [False] * 6  # ⌊0.25 · 8⌋ = 2
    lns = TransformerLM(VOCAB, CONTEXT, D_MODEL, 4, HEADS, D_FF, norm="layernorm_scaling")
    assert [layer.norm_output_scale for layer in lns.layers] == pytest.approx([1, 2**-0.5, 3**-0.5, 0.5])
    assert {"ln_final.weight"} <= set(mix.state_dict()) & set(lns.state_dict())  # their tops are pre-norm


@pytest.mark.parametrize(("residual_scaling", "expected"), [("depth_mup", 6**-0.5), ("completep", 1 / 6)])
def test_every_block_gets_the_same_branch_multiplier(residual_scaling, expected):
    model = TransformerLM(VOCAB, CONTEXT, D_MODEL, 6, HEADS, D_FF, residual_scaling=residual_scaling)
    assert [layer.branch_multiplier for layer in model.layers] == pytest.approx([expected] * 6)
    assert model.config.hidden_lr_scale == pytest.approx(6**-0.5 if residual_scaling == "depth_mup" else 1.0)
