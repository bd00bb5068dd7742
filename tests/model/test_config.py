"""ModelConfig and the placement table: one validated record per model, one row per placement.

The config must build exactly the model the keyword constructor builds (the same
parameters, drawn in the same order), refuse a bad field with a message naming it, its
value and what was expected, and the placement table must agree with what the blocks and
the model do.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from prenorm_lib.block import NORM_PLACEMENTS, NORMS, TransformerBlock
from prenorm_lib.config import PLACEMENTS, ModelConfig, placements_in
from prenorm_lib.lab import train
from prenorm_lib.lab.data import make_corpus
from prenorm_lib.model import TransformerLM

SIZES = {"vocab_size": 40, "context_length": 12, "d_model": 16, "num_layers": 4, "num_heads": 4, "d_ff": 32}


def config(**options) -> ModelConfig:
    return ModelConfig(**{**SIZES, **options})


def parameters(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [(name, p.detach()) for name, p in model.named_parameters()]


OPTIONS = [  # one of every kind of option, alone and together
    {}, {"norm": "post"}, {"norm": "deepnorm"}, {"norm": "rezero"}, {"norm": "sandwich", "qk_norm": "flat"},
    {"norm": "mix_ln"}, {"norm": "layernorm_scaling"}, {"ffn": "relu", "positions": "sinusoidal"},
    {"normaliser": "dyt", "qk_norm": True}, {"normaliser": "derf", "norm": "reordered"},
    {"residual_scaling": "completep"}, {"scaled_init": True, "rope_theta": None},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_both_doors_build_the_same_model_draw_for_draw(options):
    torch.manual_seed(0)
    by_keywords = TransformerLM(*SIZES.values(), **options)
    torch.manual_seed(0)
    by_config = TransformerLM.from_config(config(**options))
    assert by_keywords.config == by_config.config == config(**options)
    a, b = parameters(by_keywords), parameters(by_config)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert all(torch.equal(p, q) for (_, p), (_, q) in zip(a, b, strict=True))
    tokens = torch.randint(0, 40, (2, 12))
    assert torch.equal(by_keywords(tokens), by_config(tokens))


def test_the_keyword_block_is_the_configs_block():
    torch.manual_seed(1)
    keyword = TransformerBlock(16, 4, 32, 12, norm="deepnorm", qk_norm=True, num_layers=4)
    torch.manual_seed(1)
    configured = TransformerBlock.from_config(config(norm="deepnorm", qk_norm=True), layer_index=2)
    assert all(torch.equal(p, q) for (_, p), (_, q) in zip(parameters(keyword), parameters(configured), strict=True))


def test_config_is_frozen_and_round_trips_through_its_keywords():
    c = config(norm="mix_ln", normaliser="dyt", alpha0_attention=0.8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.norm = "post"
    assert ModelConfig(**c.as_kwargs()) == c
    assert ModelConfig.from_options(c.as_kwargs()) == c
    assert dataclasses.replace(c, norm="pre").norm == "pre"


def test_positions_are_spelled_one_way():
    """rope_theta=None is the older spelling of positions="none"; other positions rotate nothing."""
    assert config(rope_theta=None).positions == "none"
    assert config(positions="sinusoidal").rope_theta is None
    assert config(rope_theta=None) == config(positions="none")


def test_the_lab_builds_its_models_from_the_config():
    assert train.course_config(norm="post") == ModelConfig(**train.model_config(norm="post"))
    model = train.build_model(make_corpus(), seed=0, normaliser="derf", num_layers=3)
    assert model.config.normaliser == "derf" and len(model.layers) == 3


BAD = [  # each option's check: the field, the value, what was expected
    ({"num_layers": 0}, ValueError, ["num_layers", "0"]),
    ({"d_model": 16.0}, TypeError, ["d_model", "16.0"]),
    ({"d_model": 10, "num_heads": 3}, ValueError, ["d_model=10", "num_heads=3"]),
    ({"positions": "alibi"}, ValueError, ["positions", "'alibi'"]),
    ({"rope_theta": -1.0}, ValueError, ["rope_theta", "-1.0"]),
    ({"norm": "peri"}, ValueError, ["norm", "'peri'", "'mix_ln'", "'layernorm_scaling'"]),
    ({"ffn": "moe"}, ValueError, ["ffn", "'moe'"]),
    ({"eps": 0.0}, ValueError, ["eps", "0.0"]),
    ({"qk_norm": 1}, TypeError, ["qk_norm", "1"]),
    ({"scaled_init": "yes"}, TypeError, ["scaled_init", "'yes'"]),
    ({"normaliser": "layernorm"}, ValueError, ["normaliser", "'layernorm'", "'dyt'"]),
    ({"normaliser": "dyt", "alpha0_other": -0.1}, ValueError, ["alpha0_other", "-0.1"]),
    ({"alpha0_attention": 0.8}, ValueError, ["alpha0_attention", "DyT or Derf", "'rmsnorm'", "0.8"]),
    ({"normaliser": "dyt", "norm": "rezero"}, ValueError, ["normaliser='dyt'", "norm='rezero'", "none to replace"]),
    ({"norm": "mix_ln", "num_layers": 2}, ValueError, ["mix_ln", "num_layers=2", "0.25", "0 blocks"]),
    ({"norm": "mix_ln", "post_ln_fraction": 1.0}, ValueError, ["post_ln_fraction", "(0, 1)", "1.0"]),
    ({"post_ln_fraction": 0.5}, ValueError, ["post_ln_fraction", "norm='pre'", "0.5"]),
    ({"residual_scaling": "mup"}, ValueError, ["residual_scaling", "'mup'", "'completep'"]),
    ({"residual_scaling": "completep", "norm": "post"}, ValueError, ["residual_scaling='completep'", "'post'",
                                                                      "'layernorm_scaling'"]),
    ({"residual_scaling": "depth_mup", "scaled_init": True}, ValueError, ["scaled_init=True", "second time"]),
    ({"base_depth": 2}, ValueError, ["base_depth", "residual_scaling='none'", "2"]),
    ({"residual_scaling": "completep", "base_depth": 0}, ValueError, ["base_depth", "0"]),
]


@pytest.mark.parametrize(("options", "error", "fragments"), BAD, ids=[",".join(o) for o, _, _ in BAD])
def test_a_bad_field_is_refused_by_name(options, error, fragments):
    for build in (lambda: config(**options), lambda: TransformerLM(**{**SIZES, **options})):
        with pytest.raises(error) as raised:
            build()
        assert all(fragment in str(raised.value) for fragment in fragments), str(raised.value)


def test_an_unknown_option_is_refused_naming_the_fields():
    with pytest.raises(ValueError, match=r"TransformerLM got unknown option\(s\) \['n_layers'\]; expected fields "
                                         r"of ModelConfig: \['vocab_size'"):
        TransformerLM(*SIZES.values(), n_layers=3)
    with pytest.raises(TypeError, match="config must be a ModelConfig, got dict"):
        TransformerLM.from_config(SIZES)


def test_the_keyword_block_sends_per_layer_placements_to_from_config():
    with pytest.raises(ValueError, match=r'norm="mix_ln" differs from block to block: build the block with '
                                         r"TransformerBlock.from_config\(config, layer_index\)"):
        TransformerBlock(16, 4, 32, 8, norm="mix_ln", num_layers=4)
    with pytest.raises(ValueError, match=r"layer_index must be an int in \[0, num_layers=4\), got 4"):
        TransformerBlock.from_config(config(), layer_index=4)


# ---- the placement table ----------------------------------------------------------------


def test_the_course_group_is_the_three_placements_of_notebook_05():
    assert NORM_PLACEMENTS == placements_in("course") == ("pre", "post", "none")
    assert tuple(PLACEMENTS) == NORMS
    assert set(placements_in("frontier")) == set(PLACEMENTS) - {"pre", "post", "none"}


@pytest.mark.parametrize(("norm", "normaliser"), list(itertools.product(PLACEMENTS, ["rmsnorm", "dyt"])))
def test_each_row_says_what_the_model_builds(norm, normaliser):
    row = PLACEMENTS[norm]
    if normaliser == "dyt" and not (row.input_norms or row.output_norms):
        return  # refused above: nothing to replace
    model = TransformerLM.from_config(config(norm=norm, normaliser=normaliser))
    names = set(dict(model.named_parameters()))
    assert ("ln_final.weight" in names) == row.final_norm
    for i in range(SIZES["num_layers"]):
        assert (f"layers.{i}.ln1.weight" in names) == row.input_norms, i
        assert (f"layers.{i}.ln1_out.weight" in names) == row.output_norms, i
        assert model.layers[i]._forward == row.forward


def test_a_row_that_needs_the_depth_is_refused_without_it():
    for norm, row in PLACEMENTS.items():
        if row.needs_depth and not row.needs_layer:
            with pytest.raises(ValueError, match=f'num_layers .* is required with norm="{norm}", got None'):
                TransformerBlock(16, 4, 32, 8, norm=norm)
