"""RMSNorm the module: torch's reference, its invariances, its low-precision care. DyT and Derf: their formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.norm import DynamicErf, DynamicTanh, RMSNorm, make_norm

seeds = st.integers(0, 2**16)


def rms_norm_float64(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """The textbook formula evaluated in float64: the yardstick for low-precision inputs."""
    x64, w64 = x.to(torch.float64), weight.to(torch.float64)
    return x64 / torch.sqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps) * w64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=3), d=st.integers(1, 48), seed=seeds)
def test_module_matches_torch_rms_norm(dtype, lead, d, seed):
    torch.manual_seed(seed)
    norm = RMSNorm(d, eps=1e-5, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(d, dtype=dtype))
    x = torch.randn(*lead, d, dtype=dtype)
    assert_close(norm(x), F.rms_norm(x, (d,), norm.weight, eps=1e-5))


def test_module_matches_torch_nn_rmsnorm():
    ours, theirs = RMSNorm(32, eps=1e-6), torch.nn.RMSNorm(32, eps=1e-6)
    x = torch.randn(2, 5, 32)
    assert_close(ours(x), theirs(x))


@given(log10_c=st.floats(-3, 3), seed=seeds)
def test_scale_invariant_for_every_positive_factor(log10_c, seed):
    """RMSNorm(c·x) = RMSNorm(x): the factor cancels between numerator and RMS.

    Exact only while eps is negligible next to c²·mean(x²) (c = 1e-3 gives 1e-6, which
    the default eps of 1e-5 would swamp), so eps is tiny here.
    """
    torch.manual_seed(seed)
    c = 10.0**log10_c
    norm = RMSNorm(64, eps=1e-24, dtype=torch.float64)
    x = torch.randn(4, 64, dtype=torch.float64)
    assert_close(norm(c * x), norm(x))


def test_not_shift_invariant_unlike_layer_norm():
    """Adding a constant changes RMSNorm's output; LayerNorm subtracts the mean and does not care."""
    norm = RMSNorm(64, dtype=torch.float64)
    x = torch.randn(4, 64, dtype=torch.float64)
    shifted = x + 3.0
    assert (norm(shifted) - norm(x)).abs().max() > 0.1
    assert_close(F.layer_norm(shifted, (64,)), F.layer_norm(x, (64,)))


def test_fp16_input_whose_squares_overflow_stays_finite_and_accurate():
    signs = torch.where(torch.rand(4, 256) < 0.5, -1.0, 1.0)
    x = (signs * (300.0 + 10.0 * torch.randn(4, 256))).to(torch.float16)  # |x| ≈ 300
    assert torch.isinf(x * x).all(), "the test needs inputs whose fp16 squares overflow"
    norm = RMSNorm(256, dtype=torch.float16)
    out = norm(x)
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all()
    assert_close(out, rms_norm_float64(x, norm.weight).to(torch.float16))


def test_bf16_input_matches_float64_and_beats_a_naive_bf16_computation():
    x = (3.0 * torch.randn(16, 512)).to(torch.bfloat16)
    norm = RMSNorm(512, dtype=torch.bfloat16)
    reference = rms_norm_float64(x, norm.weight)
    out = norm(x)
    assert out.dtype == torch.bfloat16
    assert_close(out.to(torch.float64), reference, rtol=2**-8, atol=1e-6)
    naive = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * norm.weight  # all in bf16
    ours_error = (out.to(torch.float64) - reference).abs().mean()
    naive_error = (naive.to(torch.float64) - reference).abs().mean()
    assert ours_error < 0.8 * naive_error, (ours_error, naive_error)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_output_dtype_is_input_dtype(dtype):
    norm = RMSNorm(8, dtype=dtype)
    assert norm.weight.dtype == dtype
    assert norm(torch.randn(3, 8).to(dtype)).dtype == dtype


def test_gain_starts_at_ones():
    norm = RMSNorm(16)
    assert torch.equal(norm.weight.detach(), torch.ones(16))
    assert [name for name, _ in norm.named_parameters()] == ["weight"]


def test_gain_scales_each_channel_separately():
    norm = RMSNorm(6)
    x = torch.randn(2, 3, 6)
    unit = norm(x)
    gain = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0, 10.0])
    with torch.no_grad():
        norm.weight.copy_(gain)
    assert_close(norm(x), unit * gain)


def test_output_has_unit_rms_with_default_gain():
    x = 7.0 * torch.randn(5, 128)
    out = RMSNorm(128)(x)
    assert_close(out.pow(2).mean(dim=-1), torch.ones(5), rtol=1e-4, atol=1e-4)


# ---- DyT and Derf: the point-wise functions that replace the norm -----------------------

def written_out(kind: str, x: torch.Tensor, alpha: float, weight: torch.Tensor, shift: float = 0.0,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """DyT(x) = γ·tanh(αx) + β (Zhu et al. §4); Derf(x) = γ·erf(αx + s) + β (Chen et al. eq. 10), element by element."""
    squash = math.tanh if kind == "dyt" else math.erf
    inner = (lambda v: alpha * v) if kind == "dyt" else (lambda v: alpha * v + shift)
    flat = [squash(inner(v)) for v in x.to(torch.float64).flatten().tolist()]
    out = torch.tensor(flat, dtype=torch.float64).reshape(x.shape) * weight.to(torch.float64)
    return out if bias is None else out + bias.to(torch.float64)


@pytest.mark.parametrize("kind", ["dyt", "derf"])
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), d=st.integers(1, 24), seed=seeds,
       alpha=st.floats(0.05, 3.0), shift=st.floats(-1.0, 1.0), with_bias=st.booleans())
def test_pointwise_kernels_match_the_formula_written_out(kind, lead, d, seed, alpha, shift, with_bias):
    gen = torch.Generator().manual_seed(seed)
    x = 4.0 * torch.randn(*lead, d, generator=gen, dtype=torch.float64)
    weight = torch.randn(d, generator=gen, dtype=torch.float64)
    bias = torch.randn(d, generator=gen, dtype=torch.float64) if with_bias else None
    a = torch.tensor(alpha, dtype=torch.float64)
    if kind == "dyt":
        out = functional.dyt(x, a, weight, bias)
    else:
        out = functional.derf(x, a, torch.tensor(shift, dtype=torch.float64), weight, bias)
    assert_close(out, written_out(kind, x, alpha, weight, shift, bias))


@pytest.mark.parametrize(("module", "kind"), [(DynamicTanh, "dyt"), (DynamicErf, "derf")])
def test_pointwise_modules_start_as_their_papers_say(module, kind):
    """γ = 1 and α = α₀ (0.5 unless told: DyT §4, Derf §5), Derf's shift s = 0; no bias where RMSNorm had none."""
    norm = module(16)
    assert norm.alpha.item() == 0.5 and norm.alpha.shape == ()
    assert torch.equal(norm.weight.detach(), torch.ones(16))
    names = {name for name, _ in norm.named_parameters()}
    assert names == ({"alpha", "weight"} if kind == "dyt" else {"alpha", "shift", "weight"})
    if kind == "derf":
        assert norm.shift.item() == 0.0
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    norm64 = module(16, alpha0=0.8, dtype=torch.float64)
    assert_close(norm64(x), written_out(kind, x, 0.8, norm64.weight.detach()))


@pytest.mark.parametrize("module", [DynamicTanh, DynamicErf])
def test_pointwise_modules_learn_their_scalars_and_stay_bounded(module):
    norm = module(8)
    x = 1e4 * torch.randn(4, 8)  # a norm divides this down; DyT and Derf squash it into [−γ, γ]
    out = norm(x)
    assert out.abs().max() <= 1.0
    (norm(torch.randn(4, 8)) * torch.randn(4, 8)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in norm.parameters())


@pytest.mark.parametrize("module", [DynamicTanh, DynamicErf])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pointwise_modules_compute_in_float32_and_return_the_input_dtype(module, dtype):
    norm = module(32, dtype=dtype)
    x = (3.0 * torch.randn(4, 32)).to(dtype)
    out = norm(x)
    assert out.dtype == dtype
    reference = norm.__class__(32)(x.to(torch.float32))
    assert_close(out.to(torch.float32), reference, rtol=2**-7, atol=1e-3)


def test_make_norm_builds_each_normaliser_and_refuses_others():
    assert isinstance(make_norm("rmsnorm", 8), RMSNorm)
    assert isinstance(make_norm("dyt", 8, alpha0=1.0), DynamicTanh) and make_norm("dyt", 8, alpha0=1.0).alpha == 1.0
    assert isinstance(make_norm("derf", 8), DynamicErf)
    with pytest.raises(ValueError, match="normaliser must be one of 'rmsnorm', 'dyt', 'derf', got 'layernorm'"):
        make_norm("layernorm", 8)
    with pytest.raises(ValueError, match="alpha0 must be a finite number > 0, got 0"):
        DynamicTanh(8, alpha0=0)
    with pytest.raises(ValueError, match=r"alpha must be a single learnable number \(numel 1\), got shape \(2,\)"):
        functional.dyt(torch.randn(3, 4), torch.ones(2), torch.ones(4))
