"""The Transformer block: each norm placement follows its own formula, and every parameter learns."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.ffn import FeedForward, SwiGLU
from prenorm_lib.norm import RMSNorm

NORMS = ("pre", "post", "none")
FFNS = ("swiglu", "silu", "relu")


def make_block(norm: str, ffn: str = "swiglu", dtype=torch.float64) -> TransformerBlock:
    block = TransformerBlock(16, 4, 32, max_seq_len=32, norm=norm, ffn=ffn, dtype=dtype)
    if norm != "none":  # gains other than ones, so that a skipped norm would show
        with torch.no_grad():
            block.ln1.weight.uniform_(0.5, 1.5)
            block.ln2.weight.uniform_(0.5, 1.5)
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
    h = x + attn(x)
    return h + block.ffn(h)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("positions", [None, torch.tensor([4, 5, 6, 7, 8, 9])])
def test_block_follows_its_formula(norm, positions):
    block = make_block(norm)
    x = 3.0 * torch.randn(2, 6, 16, dtype=torch.float64)
    assert_close(block(x, positions), by_hand(block, x, positions))


def test_the_three_placements_give_three_different_outputs():
    """Same weights, three placements: the formulas must really differ (teeth for the test above)."""
    blocks = {norm: make_block(norm) for norm in NORMS}
    blocks["post"].load_state_dict(blocks["pre"].state_dict())
    blocks["none"].load_state_dict(blocks["pre"].state_dict(), strict=False)
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


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(("ffn", "ffn_type"), [("swiglu", SwiGLU), ("silu", FeedForward), ("relu", FeedForward)])
def test_submodules_are_named_as_in_cs336(norm, ffn, ffn_type):
    block = TransformerBlock(16, 4, 32, max_seq_len=8, norm=norm, ffn=ffn)
    assert {name for name, _ in block.named_children()} == {"ln1", "attn", "ln2", "ffn"}
    assert isinstance(block.attn, MultiHeadSelfAttention)
    assert isinstance(block.ffn, ffn_type)
    norm_type = nn.Identity if norm == "none" else RMSNorm
    assert isinstance(block.ln1, norm_type)
    assert isinstance(block.ln2, norm_type)


@pytest.mark.parametrize(("norm", "ffn"), list(itertools.product(NORMS, FFNS)))
def test_gradients_reach_every_parameter(norm, ffn):
    block = make_block(norm, ffn, dtype=torch.float32)
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
