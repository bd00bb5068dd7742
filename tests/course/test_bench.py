"""The benchmark compares equal things: each side is checked against the other before it is timed."""

from __future__ import annotations

import pytest

from prenorm_course import bench


def test_block_and_its_torch_twin_compute_the_same_then_get_timed():
    times = bench.bench_block(batch=1, seq_len=8, d_model=32, num_heads=4, repeats=2)
    assert set(times) == {"library", "torch"} and all(t > 0 for t in times.values())


def test_a_reference_that_computes_something_else_is_refused(monkeypatch):
    original = bench.TorchReferenceBlock.forward
    monkeypatch.setattr(bench.TorchReferenceBlock, "forward", lambda self, x: 1.01 * original(self, x))
    with pytest.raises(AssertionError):
        bench.bench_block(batch=1, seq_len=8, d_model=32, num_heads=4, repeats=1)


def test_rope_against_rotation_matrices():
    times = bench.bench_rope(batch=2, seq_len=8, d_k=16, repeats=2)
    assert set(times) == {"library", "matrix"}


def test_rms_norm_against_torch():
    times = bench.bench_rms_norm(rows=4, d_model=16, repeats=2)
    assert set(times) == {"library", "torch"}


def test_every_course_slider_is_timed_against_a_full_redraw():
    times = bench.bench_sliders(repeats=1)
    assert "rmsnorm_shift" in times and len(times) == 8
    assert all(set(t) == {"move", "full draw"} for t in times.values())
    assert all(t["move"] > 1e-3 for t in times.values()), "a move that redraws nothing was timed"  # each move moves


def test_the_block_computes_what_hugging_face_llama_layer_computes():
    """A reference no one here wrote: HF's LlamaDecoderLayer with the block's weights, forward and backward."""
    import torch

    from prenorm_lib.block import TransformerBlock

    torch.manual_seed(0)
    block = TransformerBlock(32, 4, 64, max_seq_len=16)
    llama = bench.HuggingFaceLlamaLayer(block)
    x = torch.randn(2, 16, 32, requires_grad=True)
    ours = block(x)
    (grad_ours,) = torch.autograd.grad(ours.square().sum(), x)
    theirs = llama(x)
    (grad_theirs,) = torch.autograd.grad(theirs.square().sum(), x)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-4, rtol=1e-4)


def test_without_the_reordered_rows_hugging_face_rotates_other_pairs():
    """The comparison can fail: Llama's halves are not the library's adjacent pairs."""
    import torch

    from prenorm_lib.block import TransformerBlock

    torch.manual_seed(0)
    block = TransformerBlock(32, 4, 64, max_seq_len=16)
    llama = bench.HuggingFaceLlamaLayer(block)
    with torch.no_grad():
        llama.layer.self_attn.q_proj.weight.copy_(block.attn.q_proj.weight)
        llama.layer.self_attn.k_proj.weight.copy_(block.attn.k_proj.weight)
    x = torch.randn(2, 16, 32)
    assert not torch.allclose(block(x), llama(x), atol=1e-3)
