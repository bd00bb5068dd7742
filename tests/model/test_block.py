"""The Transformer block: each norm placement follows its own formula, and every parameter learns.

The frontier options (sandwich, reordered, DeepNorm, ReZero, QK-norm, scaled init) are
checked the same way: a formula written out again from the block's submodules, the
parameter names, gradients reaching every parameter, and their initial scales.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import FORWARDS, NORMS, TransformerBlock, deepnorm_constants
from prenorm_lib.ffn import FeedForward, SwiGLU
from prenorm_lib.norm import RMSNorm

FFNS = ("swiglu", "silu", "relu")
LAYERS = 3  # the depth DeepNorm's constants and the scaled init are computed for


def make_block(norm: str, ffn: str = "swiglu", dtype=torch.float64, **options) -> TransformerBlock:
    block = TransformerBlock(16, 4, 32, max_seq_len=32, norm=norm, ffn=ffn, num_layers=LAYERS, dtype=dtype, **options)
    with torch.no_grad():  # gains other than ones and non-zero ReZero scalars, so that a skipped one would show
        for name, param in block.named_parameters():
            if name.endswith("norm.weight") or name.split(".")[0] in ("ln1", "ln2", "ln1_out", "ln2_out"):
                param.uniform_(0.5, 1.5)
            if name.startswith("alpha_"):
                param.fill_(0.7 if name == "alpha_attn" else -0.4)
    return block


def by_hand(block: TransformerBlock, x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """The three formulas written out once more, from the block's own submodules."""
    attn = lambda h: block.attn(h, positions)
    if block.norm == "pre":
        h = x + attn(block.ln1(x))
        return h + block.ffn(block.ln2(h))
    if block.norm == "post":
        z = block.ln1(x + attn(x))
        return block.ln2(z + block.ffn(z))
    if block.norm == "sandwich":
        h = x + block.ln1_out(attn(block.ln1(x)))
        return h + block.ln2_out(block.ffn(block.ln2(h)))
    if block.norm == "reordered":
        h = x + block.ln1_out(attn(x))
        return h + block.ln2_out(block.ffn(h))
    if block.norm == "deepnorm":
        alpha = (2 * LAYERS) ** 0.25  # Wang et al. 2022, decoder-only
        z = block.ln1(alpha * x + attn(x))
        return block.ln2(alpha * z + block.ffn(z))
    if block.norm == "rezero":
        h = x + block.alpha_attn * attn(x)
        return h + block.alpha_ffn * block.ffn(h)
    h = x + attn(x)
    return h + block.ffn(h)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("positions", [None, torch.tensor([4, 5, 6, 7, 8, 9])])
def test_block_follows_its_formula(norm, positions):
    block = make_block(norm)
    x = 3.0 * torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x, positions), by_hand(block, x, positions))


@pytest.mark.parametrize("norm", NORMS)
def test_qk_norm_block_follows_its_formula(norm):
    block = make_block(norm, qk_norm=True)
    x = 3.0 * torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x), by_hand(block, x, None))


def test_every_placement_has_a_forward_method():
    assert set(FORWARDS) == set(NORMS)
    assert all(callable(getattr(TransformerBlock, method)) for method in FORWARDS.values())


def test_the_placements_give_different_outputs():
    """Same weights, every placement: the formulas must really differ (teeth for the test above)."""
    torch.manual_seed(1)
    blocks = {norm: make_block(norm) for norm in NORMS}
    shared = blocks["pre"].state_dict()
    for norm, block in blocks.items():
        for name, value in block.state_dict().items():
            if name in shared and not name.startswith(("ln1.", "ln2.")) and norm != "deepnorm":
                value.copy_(shared[name])
    x = 3.0 * torch.randn(1, 5, 16, dtype=torch.float64)
    outs = {norm: block(x) for norm, block in blocks.items()}
    for a, b in itertools.combinations(NORMS, 2):
        assert (outs[a] - outs[b]).abs().max() > 1e-3, (a, b)


def test_post_norm_output_has_the_rms_of_its_final_gain():
    """Post-norm ends in a norm: each output vector is normalised, then scaled by ln2's gain."""
    block = make_block("post")
    out = block(10.0 * torch.randn(2, 6, 16, dtype=torch.float64))
    mean_square = (out / block.ln2.weight).pow(2).mean(dim=-1)
    assert_close(mean_square, torch.ones(2, 6, dtype=torch.float64), rtol=1e-4, atol=1e-4)  # 1 − eps/ms


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize(("ffn", "ffn_type"), [("swiglu", SwiGLU), ("silu", FeedForward), ("relu", FeedForward)])
def test_submodules_are_named_as_in_cs336(norm, ffn, ffn_type):
    block = TransformerBlock(16, 4, 32, max_seq_len=8, norm=norm, ffn=ffn)
    assert {name for name, _ in block.named_children()} == {"ln1", "attn", "ln2", "ffn"}
    assert isinstance(block.attn, MultiHeadSelfAttention)
    assert isinstance(block.ffn, ffn_type)
    norm_type = nn.Identity if norm == "none" else RMSNorm
    assert isinstance(block.ln1, norm_type)
    assert isinstance(block.ln2, norm_type)


@pytest.mark.parametrize(
    ("norm", "ffn", "qk_norm"),
    [*itertools.product(NORMS, FFNS, [False]), *itertools.product(NORMS, ["swiglu"], [True])],
)
def test_gradients_reach_every_parameter(norm, ffn, qk_norm):
    block = make_block(norm, ffn, dtype=torch.float32, qk_norm=qk_norm)
    x = torch.randn(2, 6, 16)
    readout = torch.randn(2, 6, 16)  # a random projection, so no gradient cancels by symmetry
    (block(x) * readout).sum().backward()
    for name, param in block.named_parameters():
        assert param.grad is not None, name
        assert param.grad.abs().sum() > 0, name


def test_float64_build_gives_float64_parameters_and_output():
    block = TransformerBlock(16, 4, 32, max_seq_len=8, dtype=torch.float64)
    assert {p.dtype for p in block.parameters()} == {torch.float64}
    assert block(torch.randn(1, 4, 16, dtype=torch.float64)).dtype == torch.float64


def test_meta_device_build_puts_every_parameter_there():
    block = TransformerBlock(16, 4, 32, max_seq_len=8, device="meta")
    assert {p.device.type for p in block.parameters()} == {"meta"}
    assert {b.device.type for b in block.buffers()} == {"meta"}


# ---- the frontier options ---------------------------------------------------------------

OWN_PARAMETERS = {  # beyond attn.* and ffn.*, the parameters each placement adds
    "pre": {"ln1.weight", "ln2.weight"},
    "post": {"ln1.weight", "ln2.weight"},
    "none": set(),
    "sandwich": {"ln1.weight", "ln2.weight", "ln1_out.weight", "ln2_out.weight"},
    "reordered": {"ln1_out.weight", "ln2_out.weight"},
    "deepnorm": {"ln1.weight", "ln2.weight"},
    "rezero": {"alpha_attn", "alpha_ffn"},
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("qk_norm", [False, True])
def test_parameter_names(norm, qk_norm):
    block = TransformerBlock(16, 4, 32, max_seq_len=8, norm=norm, qk_norm=qk_norm, num_layers=LAYERS)
    names = {name for name, _ in block.named_parameters()}
    attention = {f"attn.{p}.weight" for p in ("q_proj", "k_proj", "v_proj", "output_proj")}
    if qk_norm:
        attention |= {"attn.q_norm.weight", "attn.k_norm.weight"}
    ffn = {f"ffn.{w}.weight" for w in ("w1", "w2", "w3")}
    assert names == OWN_PARAMETERS[norm] | attention | ffn


def test_qk_norm_gains_have_the_head_size():
    block = TransformerBlock(16, 4, 32, max_seq_len=8, qk_norm=True)
    assert block.attn.q_norm.weight.shape == block.attn.k_norm.weight.shape == (4,)


def test_rezero_block_starts_as_the_identity():
    block = TransformerBlock(16, 4, 32, max_seq_len=8, norm="rezero")
    x = torch.randn(2, 5, 16)
    assert torch.equal(block(x), x)
    assert block.alpha_attn.item() == block.alpha_ffn.item() == 0.0


def test_rezero_at_init_sends_gradient_only_to_its_scalars():
    """With α = 0 the branches are cut off; the α's are what learns first (Bachlechner et al.)."""
    block = TransformerBlock(16, 4, 32, max_seq_len=8, norm="rezero")
    (block(torch.randn(2, 5, 16)) * torch.randn(2, 5, 16)).sum().backward()
    assert block.alpha_attn.grad.abs() > 0 and block.alpha_ffn.grad.abs() > 0
    assert all(p.grad.abs().sum() == 0 for name, p in block.named_parameters() if not name.startswith("alpha"))


@pytest.mark.parametrize("num_layers", [1, 6, 100])
def test_deepnorm_constants_follow_the_paper(num_layers):
    alpha, beta = deepnorm_constants(num_layers)
    assert alpha == pytest.approx((2 * num_layers) ** 0.25)
    assert beta == pytest.approx((8 * num_layers) ** -0.25)


def test_deepnorm_scales_the_branch_weights_by_beta():
    """Values, attention output and FFN start β times smaller; queries and keys keep their scale."""
    torch.manual_seed(3)
    plain = TransformerBlock(16, 4, 32, max_seq_len=8, norm="post")
    torch.manual_seed(3)
    deep = TransformerBlock(16, 4, 32, max_seq_len=8, norm="deepnorm", num_layers=12)
    _, beta = deepnorm_constants(12)
    for name, weight in deep.named_parameters():
        expected = plain.get_parameter(name)
        scaled = name.startswith(("attn.v_proj", "attn.output_proj", "ffn."))
        assert_close(weight, expected * beta if scaled else expected)


@pytest.mark.parametrize("norm", ["none", "pre", "post"])
def test_scaled_init_shrinks_the_last_matrix_of_each_branch(norm):
    torch.manual_seed(4)
    plain = TransformerBlock(16, 4, 32, max_seq_len=8, norm=norm)
    torch.manual_seed(4)
    scaled = TransformerBlock(16, 4, 32, max_seq_len=8, norm=norm, scaled_init=True, num_layers=8)
    for name, weight in scaled.named_parameters():
        factor = 1 / 4 if name in ("attn.output_proj.weight", "ffn.w2.weight") else 1  # 1/√(2·8)
        assert_close(weight, plain.get_parameter(name) * factor)


def test_scaled_init_keeps_the_unnormalised_stream_in_range():
    """The control of notebook 05: 12 no-norm blocks blow the stream up; scaled, they barely move it."""
    torch.manual_seed(5)
    x = torch.randn(4, 16, 32)

    def stream_growth(**options):
        h = x
        for _ in range(12):
            h = TransformerBlock(32, 4, 64, max_seq_len=16, norm="none", num_layers=12, **options)(h)
        return (h.pow(2).mean() / x.pow(2).mean()).item()

    assert not stream_growth() < 1e6  # or inf, or nan once it has overflowed
    assert stream_growth(scaled_init=True) < 3
