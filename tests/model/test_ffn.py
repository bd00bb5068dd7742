"""SwiGLU and the two-matrix FFN against formulas built from torch's F.linear and F.silu."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.block import TransformerBlock
from prenorm_lib.ffn import (
    FFN_KINDS,
    GEGLU,
    Bilinear,
    FeedForward,
    GatedFeedForward,
    ReGLU,
    SwiGLU,
    default_hidden_dim,
    make_ffn,
    swiglu_hidden_dim,
)

seeds = st.integers(0, 2**16)


def swiglu_reference(ffn: SwiGLU, x: torch.Tensor) -> torch.Tensor:
    """W2 (SiLU(W1 x) ⊙ W3 x) with torch's own linear and SiLU."""
    gate = F.silu(F.linear(x, ffn.w1.weight))
    return F.linear(gate * F.linear(x, ffn.w3.weight), ffn.w2.weight)


@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=3), seed=seeds)
def test_swiglu_matches_formula(lead, seed):
    torch.manual_seed(seed)
    ffn = SwiGLU(16, 40)
    x = torch.randn(*lead, 16)
    assert_close(ffn(x), swiglu_reference(ffn, x))


def test_swiglu_weight_shapes():
    ffn = SwiGLU(32, 96)
    assert ffn.w1.weight.shape == (96, 32)
    assert ffn.w2.weight.shape == (32, 96)
    assert ffn.w3.weight.shape == (96, 32)


@pytest.mark.parametrize(
    ("d_model", "d_ff"),
    [(1, 64), (64, 192), (256, 704), (512, 1344), (768, 2048), (1024, 2752), (4096, 10944)],
)
def test_default_hidden_dim_is_eight_thirds_rounded_to_64(d_model, d_ff):
    assert swiglu_hidden_dim(d_model) == d_ff
    assert SwiGLU(d_model, device="meta").d_ff == d_ff


@given(d_model=st.integers(1, 8192))
def test_default_hidden_dim_is_a_multiple_of_64_near_eight_thirds(d_model):
    d_ff = swiglu_hidden_dim(d_model)
    assert d_ff % 64 == 0
    assert d_ff >= 64
    assert abs(d_ff - 8 * d_model / 3) <= 32 or d_ff == 64


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("d_model", [256, 512, 768, 1024, 4096])
def test_swiglu_and_4x_ffn_have_matched_parameter_counts(d_model):
    """3·d·d_ff vs 8·d²: equal up to the rounding of d_ff to a multiple of 64."""
    swiglu = SwiGLU(d_model, device="meta")  # meta: shapes without memory
    classic = FeedForward(d_model, device="meta")
    assert parameter_count(swiglu) == 3 * d_model * swiglu.d_ff
    assert parameter_count(classic) == 8 * d_model**2
    assert abs(parameter_count(swiglu) - parameter_count(classic)) <= 3 * d_model * 64


def squared_relu_reference(x: torch.Tensor) -> torch.Tensor:
    """Primer's squared ReLU written with torch's own ReLU: F.relu(x) ** 2."""
    return F.relu(x) ** 2


@pytest.mark.parametrize(("activation", "reference"),
                         [("relu", torch.relu), ("silu", F.silu), ("relu2", squared_relu_reference)])
@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=3), seed=seeds)
def test_feed_forward_matches_formula(activation, reference, lead, seed):
    torch.manual_seed(seed)
    ffn = FeedForward(12, 48, activation=activation)
    x = torch.randn(*lead, 12)
    assert_close(ffn(x), F.linear(reference(F.linear(x, ffn.w1.weight)), ffn.w2.weight))


def test_feed_forward_default_hidden_dim_is_four_times_d_model():
    ffn = FeedForward(24)
    assert ffn.d_ff == 96
    assert ffn.w1.weight.shape == (96, 24)
    assert ffn.w2.weight.shape == (24, 96)


def test_swapping_gate_and_value_changes_the_output():
    """SiLU acts on W1 x only, so W1 and W3 play different roles."""
    ffn = SwiGLU(16, 64)
    x = torch.randn(5, 16)
    before = ffn(x)
    with torch.no_grad():
        w1 = ffn.w1.weight.clone()
        ffn.w1.weight.copy_(ffn.w3.weight)
        ffn.w3.weight.copy_(w1)
    assert (ffn(x) - before).abs().max() > 1e-3


KIND_CLASSES = [("swiglu", SwiGLU), ("silu", FeedForward), ("relu", FeedForward),
                ("geglu", GEGLU), ("reglu", ReGLU), ("bilinear", Bilinear), ("relu2", FeedForward)]


def test_every_kind_has_a_class():
    assert sorted(kind for kind, _ in KIND_CLASSES) == sorted(FFN_KINDS)


@pytest.mark.parametrize(("kind", "cls"), KIND_CLASSES)
def test_make_ffn_builds_the_named_network(kind, cls):
    ffn = make_ffn(kind, 8, 32)
    assert type(ffn) is cls
    if cls is FeedForward:
        assert ffn.activation == kind


@pytest.mark.parametrize("kind", FFN_KINDS)
@pytest.mark.parametrize("d_model", [64, 512, 768])
def test_default_hidden_dim_is_what_each_module_picks_by_itself(kind, d_model):
    assert make_ffn(kind, d_model, device="meta").d_ff == default_hidden_dim(kind, d_model)


# ---- Shazeer's other GLU variants: GEGLU, ReGLU, Bilinear -------------------------------

GATES = [pytest.param(GEGLU, F.gelu, id="geglu"), pytest.param(ReGLU, F.relu, id="reglu"),
         pytest.param(Bilinear, None, id="bilinear"), pytest.param(SwiGLU, F.silu, id="swiglu")]


@pytest.mark.parametrize(("cls", "activation"), GATES)
@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=3), seed=seeds)
def test_gated_ffn_matches_formula(cls, activation, lead, seed):
    torch.manual_seed(seed)
    ffn = cls(16, 40)
    x = torch.randn(*lead, 16)
    gate = F.linear(x, ffn.w1.weight)
    gate = gate if activation is None else activation(gate)
    assert_close(ffn(x), F.linear(gate * F.linear(x, ffn.w3.weight), ffn.w2.weight))


@pytest.mark.parametrize(("cls", "activation"), GATES)
def test_gated_ffn_has_cs336_names_and_layouts(cls, activation):
    ffn = cls(32, 96)
    assert {name: tuple(p.shape) for name, p in ffn.named_parameters()} == {
        "w1.weight": (96, 32), "w2.weight": (32, 96), "w3.weight": (96, 32)}
    assert cls(768, device="meta").d_ff == 2048  # Shazeer's d_ff for every GLU variant of T5-base


@pytest.mark.parametrize(("cls", "activation"), [*GATES, pytest.param(FeedForward, None, id="two-matrix")])
def test_hidden_is_what_w2_maps_down(cls, activation):
    ffn = cls(12, 24)
    x = torch.randn(3, 12)
    assert ffn.hidden(x).shape == (3, 24)
    assert_close(ffn(x), F.linear(ffn.hidden(x), ffn.w2.weight))


def test_reglu_gate_closes_completely_and_geglu_does_not():
    """Where W1 x < 0, ReGLU's hidden unit is exactly 0 (no gradient to w1 or w3); GEGLU's is not."""
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    reglu, geglu = ReGLU(8, 16), GEGLU(8, 16)
    geglu.load_state_dict(reglu.state_dict())
    closed = reglu.w1(x) < 0
    assert closed.any()
    assert (reglu.hidden(x)[closed] == 0).all()
    assert (geglu.hidden(x)[closed] != 0).all()


def test_the_gate_base_class_is_not_built_by_itself():
    with pytest.raises(TypeError, match="base of SwiGLU, GEGLU, ReGLU and Bilinear"):
        GatedFeedForward(8)


@pytest.mark.parametrize("kind", FFN_KINDS)
def test_transformer_block_takes_every_kind(kind):
    torch.manual_seed(0)
    block = TransformerBlock(16, 4, default_hidden_dim(kind, 16), max_seq_len=8, ffn=kind)
    assert type(block.ffn) is dict(KIND_CLASSES)[kind]
    x = torch.randn(2, 8, 16, requires_grad=True)
    block(x).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in block.ffn.parameters())


# ---- Primer's squared ReLU (So et al. 2021), nanochat's FFN ------------------------------


def test_squared_relu_is_relu_squared_with_its_slope():
    x = torch.linspace(-3, 3, 601, dtype=torch.float64, requires_grad=True)
    y = functional.relu_squared(x)
    assert_close(y, squared_relu_reference(x))
    y.sum().backward()
    assert_close(x.grad, 2 * F.relu(x.detach()))  # 2x above zero, 0 below: no kink in the value, one in the slope


def test_squared_relu_ffn_is_reglu_with_gate_and_value_tied():
    """ReLU(a)·a = ReLU(a)² for every a: Primer's observation, checked on the modules themselves."""
    torch.manual_seed(0)
    squared, reglu = FeedForward(16, 48, activation="relu2"), ReGLU(16, 48)
    with torch.no_grad():
        reglu.w1.weight.copy_(squared.w1.weight)
        reglu.w3.weight.copy_(squared.w1.weight)  # the value matrix tied to the gate's
        reglu.w2.weight.copy_(squared.w2.weight)
    x = torch.randn(4, 7, 16)
    assert_close(squared(x), reglu(x))


def test_squared_relu_at_swiglus_parameters_does_swiglus_matrix_work():
    """d_ff 288 against SwiGLU's 192 at d_model 64: equal weights, and torch's FLOP counter finds equal matmul work."""
    from torch.utils.flop_counter import FlopCounterMode

    squared, swiglu = FeedForward(64, 288, activation="relu2"), SwiGLU(64)
    assert parameter_count(squared) == parameter_count(swiglu) == 36_864
    x = torch.randn(3, 10, 64)
    flops = {}
    for name, module in (("squared", squared), ("swiglu", swiglu)):
        with FlopCounterMode(display=False) as counter:
            module(x)
        flops[name] = counter.get_total_flops()  # matrix products only: 2 per multiply-add
    assert flops["squared"] == flops["swiglu"] == 2 * 36_864 * 30
