"""The Transformer block: each norm placement follows its own formula, and every parameter learns.

The frontier options (sandwich, reordered, DeepNorm, ReZero, QK-norm, scaled init) are
checked the same way: a formula written out again from the block's submodules, the
parameter names, gradients reaching every parameter, and their initial scales.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import NORMS, TransformerBlock, deepnorm_constants
from prenorm_lib.config import PLACEMENTS, ModelConfig
from prenorm_lib.ffn import FeedForward, SwiGLU
from prenorm_lib.norm import DynamicErf, DynamicTanh, RMSNorm

FFNS = ("swiglu", "silu", "relu")
LAYERS = 3  # the depth DeepNorm's constants and the scaled init are computed for
MIX_LN_FRACTION = 0.5  # with 3 layers: ⌊1.5⌋ = 1 post-norm block at the bottom, then two pre-norm ones
LAYER_OF = {"mix_ln": 0, "layernorm_scaling": 2}  # where a block that depends on its place sits by default


def config(norm: str = "pre", **options) -> ModelConfig:
    if norm == "mix_ln":
        options.setdefault("post_ln_fraction", MIX_LN_FRACTION)
    return ModelConfig(vocab_size=1, context_length=32, d_model=16, num_layers=LAYERS, num_heads=4, d_ff=32,
                       norm=norm, **options)


def make_block(norm: str, ffn: str = "swiglu", dtype=torch.float64, layer_index: int | None = None,
               **options) -> TransformerBlock:
    if PLACEMENTS[norm].needs_layer or layer_index is not None or set(options) - {"qk_norm", "scaled_init"}:
        index = LAYER_OF.get(norm, 0) if layer_index is None else layer_index
        block = TransformerBlock.from_config(config(norm, ffn=ffn, **options), index, dtype=dtype)
    else:  # CS336's keyword door, as before the config
        block = TransformerBlock(16, 4, 32, max_seq_len=32, norm=norm, ffn=ffn, num_layers=LAYERS, dtype=dtype,
                                 **options)
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
    if block.norm == "pre" and block.config.residual_scaling != "none":
        # depth-μP (Yang et al.) a = 1/2, CompleteP (Dey et al.) a = 1: x + (L/L₀)^(−a) · F(Norm(x))
        a = {"depth_mup": 0.5, "completep": 1.0}[block.config.residual_scaling]
        m = (LAYERS / block.config.base_depth) ** -a
        h = x + m * attn(block.ln1(x))
        return h + m * block.ffn(block.ln2(h))
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
    if block.norm == "mix_ln":  # Li, Yin & Liu: post-norm in the first ⌊αL⌋ blocks, pre-norm above
        if block.layer_index < math.floor(MIX_LN_FRACTION * LAYERS):
            z = block.ln1(x + attn(x))
            return block.ln2(z + block.ffn(z))
        h = x + attn(block.ln1(x))
        return h + block.ffn(block.ln2(h))
    if block.norm == "layernorm_scaling":  # Sun et al. eq. (12): LayerNorm(h) · 1/√ℓ in layer ℓ = 1 … L
        scale = 1 / math.sqrt(block.layer_index + 1)
        h = x + attn(scale * block.ln1(x))
        return h + block.ffn(scale * block.ln2(h))
    if block.norm == "none":
        h = x + attn(x)
        return h + block.ffn(h)
    raise AssertionError(f"no reference formula for norm={block.norm!r}: a new placement needs one here")


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


@pytest.mark.parametrize(("norm", "layer_index"), [*(("mix_ln", i) for i in range(LAYERS)),
                                                   *(("layernorm_scaling", i) for i in range(LAYERS))])
def test_blocks_that_depend_on_their_place_follow_the_formula_at_every_depth(norm, layer_index):
    block = make_block(norm, layer_index=layer_index)
    x = 3.0 * torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x), by_hand(block, x, None))


def test_mix_ln_puts_the_first_quarter_of_the_stack_in_post_norm():
    """Mix-LN's default split (α = 0.25): 8 blocks give 2 post-norm blocks, then 6 pre-norm ones."""
    stack = ModelConfig(vocab_size=1, context_length=8, d_model=16, num_layers=8, num_heads=4, d_ff=32, norm="mix_ln")
    kinds = [TransformerBlock.from_config(stack, i).mix_ln_post for i in range(8)]
    assert kinds == [True, True, False, False, False, False, False, False]


def test_layernorm_scaling_divides_by_the_root_of_the_one_based_depth():
    scales = [make_block("layernorm_scaling", layer_index=i).norm_output_scale for i in range(LAYERS)]
    assert scales == pytest.approx([1.0, 1 / 2**0.5, 1 / 3**0.5])


@pytest.mark.parametrize("residual_scaling", ["depth_mup", "completep"])
@pytest.mark.parametrize("base_depth", [1, 2])
def test_residual_scaling_multiplies_each_branch(residual_scaling, base_depth):
    block = make_block("pre", residual_scaling=residual_scaling, base_depth=base_depth)
    x = 3.0 * torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x), by_hand(block, x, None))
    a = 0.5 if residual_scaling == "depth_mup" else 1.0
    assert block.branch_multiplier == pytest.approx((LAYERS / base_depth) ** -a)


def test_layernorm_scaling_and_residual_scaling_combine():
    block = make_block("layernorm_scaling", residual_scaling="completep")
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    s, m = 1 / 3**0.5, 1 / LAYERS  # block 3 of 3
    h = x + m * block.attn(s * block.ln1(x))
    assert_close(block(x), h + m * block.ffn(s * block.ln2(h)))


@pytest.mark.parametrize("normaliser", ["dyt", "derf"])
@pytest.mark.parametrize("norm", ["pre", "post", "sandwich", "reordered", "mix_ln", "layernorm_scaling"])
def test_a_pointwise_normaliser_replaces_every_norm_of_the_block(normaliser, norm):
    options = {"normaliser": normaliser, "qk_norm": True, "alpha0_attention": 0.8, "alpha0_other": 0.2}
    block = TransformerBlock.from_config(config(norm, **options), LAYER_OF.get(norm, 0))  # as initialised
    norms = {name: m for name, m in block.named_modules() if name in ("ln1", "ln2", "ln1_out", "ln2_out",
                                                                     "attn.q_norm", "attn.k_norm")}
    kind = DynamicTanh if normaliser == "dyt" else DynamicErf
    assert norms and all(isinstance(m, (kind, nn.Identity)) for m in norms.values()), norms
    assert not any(isinstance(m, RMSNorm) for m in block.modules())
    for name, module in norms.items():  # DyT §7.2: α₀ larger in the attention block than elsewhere
        if isinstance(module, kind):
            assert module.alpha.item() == pytest.approx(0.8 if name.startswith(("ln1", "attn")) else 0.2), name
    block = make_block(norm, **options)  # every norm parameter moved from its initial value
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x), by_hand(block, x, None))


def test_every_placement_has_a_forward_method():
    assert set(PLACEMENTS) == set(NORMS)
    methods = [m for row in PLACEMENTS.values() for m in (row.forward, row.scaled_forward, row.setup) if m]
    assert all(callable(getattr(TransformerBlock, method)) for method in methods)


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
    "mix_ln": {"ln1.weight", "ln2.weight"},
    "layernorm_scaling": {"ln1.weight", "ln2.weight"},
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("qk_norm", [False, True])
def test_parameter_names(norm, qk_norm):
    block = make_block(norm, qk_norm=qk_norm)
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
