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
