"""The stateless kernels against torch's own implementations.

Each reference here (``F.rms_norm``, ``F.layer_norm``, ``torch.relu``, ``F.silu``, ``torch.softmax``) was
written and tested by the PyTorch developers, not by this project.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional

leading_dims = st.lists(st.integers(1, 4), min_size=0, max_size=3)
seeds = st.integers(0, 2**16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@given(lead=leading_dims, d=st.integers(1, 48), seed=seeds)
def test_rms_norm_matches_torch(dtype, lead, d, seed):
    torch.manual_seed(seed)
    x = torch.randn(*lead, d, dtype=dtype)
    weight = torch.randn(d, dtype=dtype)
    expected = F.rms_norm(x, (d,), weight, eps=1e-5)
    assert_close(functional.rms_norm(x, weight, eps=1e-5), expected)


@given(eps=st.sampled_from([1e-8, 1e-5, 1e-2, 1.0]), seed=seeds)
def test_rms_norm_eps_is_added_inside_the_square_root(eps, seed):
    torch.manual_seed(seed)
    x = 0.01 * torch.randn(3, 16)  # small enough that eps matters
    weight = torch.ones(16)
    assert_close(functional.rms_norm(x, weight, eps=eps), F.rms_norm(x, (16,), weight, eps=eps))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@given(lead=leading_dims, d=st.integers(1, 48), shift=st.sampled_from([0.0, 3.0, -50.0]), seed=seeds)
def test_layer_norm_matches_torch(dtype, lead, d, shift, seed):
    torch.manual_seed(seed)
    x = torch.randn(*lead, d, dtype=dtype) + shift
    weight, bias = torch.randn(d, dtype=dtype), torch.randn(d, dtype=dtype)
    # Subtracting a large mean cancels digits: float32 rounding grows with |shift| (torch sums differently).
    tol = {"atol": 2e-6 * (1 + abs(shift)), "rtol": 1e-5} if dtype == torch.float32 else {}
    assert_close(functional.layer_norm(x, weight, bias), F.layer_norm(x, (d,), weight, bias, eps=1e-5), **tol)
    assert_close(functional.layer_norm(x, weight), F.layer_norm(x, (d,), weight, None, eps=1e-5), **tol)


def test_layer_norm_gradients_match_torch():
    """Timed forward *and* backward in notebook 01, so the backward must be LayerNorm's too."""
    x = (torch.randn(6, 32, dtype=torch.float64) + 2.0).requires_grad_()
    weight = torch.randn(32, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(32, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(6, 32, dtype=torch.float64)
    ours = torch.autograd.grad(functional.layer_norm(x, weight, bias), (x, weight, bias), upstream)
    theirs = torch.autograd.grad(F.layer_norm(x, (32,), weight, bias, 1e-5), (x, weight, bias), upstream)
    for a, b in zip(ours, theirs, strict=True):
        assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_upcasts_low_precision_and_returns_its_dtype(dtype):
    x = (300.0 * torch.randn(4, 256)).to(dtype)  # fp16 squares of 300 overflow
    weight = torch.ones(256, dtype=dtype)
    out = functional.layer_norm(x, weight)
    assert out.dtype == dtype and torch.isfinite(out).all()
    expected = F.layer_norm(x.double(), (256,), eps=1e-5).to(dtype)
    assert_close(out, expected)


@given(d=st.integers(2, 48), seed=seeds)
def test_layer_norm_without_bias_is_rms_norm_of_the_centred_vector(d, seed):
    """LayerNorm = centre, then RMSNorm; on a zero-mean vector the two are the same function."""
    torch.manual_seed(seed)
    x = 3.0 * torch.randn(5, d, dtype=torch.float64) + 1.5
    weight = torch.randn(d, dtype=torch.float64)
    centred = x - x.mean(dim=-1, keepdim=True)
    assert_close(functional.layer_norm(x, weight), functional.rms_norm(centred, weight))
    assert_close(functional.layer_norm(centred, weight), functional.rms_norm(centred, weight))
    assert (functional.layer_norm(x, weight) - functional.rms_norm(x, weight)).abs().max() > 1e-3


@given(values=st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=64))
def test_relu_matches_torch(values):
    x = torch.tensor(values)
    assert_close(functional.relu(x), torch.relu(x))


@given(values=st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=64))
def test_silu_matches_torch(values):
    x = torch.tensor(values)
    assert_close(functional.silu(x), F.silu(x))


def test_silu_is_negative_for_negative_inputs_unlike_relu():
    x = torch.tensor([-2.0, -1.0, -0.5])
    assert (functional.silu(x) < 0).all()
    assert (functional.relu(x) == 0).all()


@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    dim_index=st.integers(0, 2),
    scale=st.sampled_from([1.0, 30.0, 1e4]),
    seed=seeds,
)
def test_softmax_matches_torch_along_any_dim(shape, dim_index, scale, seed):
    torch.manual_seed(seed)
    x = scale * torch.randn(*shape)
    dim = dim_index % len(shape)
    out = functional.softmax(x, dim=dim)
    assert torch.isfinite(out).all()
    assert_close(out, torch.softmax(x, dim=dim))
    assert_close(out.sum(dim=dim), torch.ones_like(out.sum(dim=dim)))


def test_softmax_is_stable_for_huge_inputs():
    x = torch.tensor([[1e4, 1e4], [-1e4, 1e4], [-1e4, -1e4]])
    out = functional.softmax(x, dim=-1)
    assert_close(out, torch.tensor([[0.5, 0.5], [0.0, 1.0], [0.5, 0.5]]))


def test_softmax_respects_the_dim_argument():
    x = torch.randn(3, 5)
    by_rows, by_cols = functional.softmax(x, dim=-1), functional.softmax(x, dim=0)
    assert_close(by_rows.sum(dim=1), torch.ones(3))
    assert_close(by_cols.sum(dim=0), torch.ones(5))
    assert not torch.allclose(by_rows, by_cols)  # the two normalisations differ


def test_causal_mask_is_lower_triangular():
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    assert torch.equal(functional.causal_mask(3), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@given(values=st.lists(st.floats(-50, 50, width=32), min_size=1, max_size=64))
def test_gelu_matches_torch(dtype, values):
    x = torch.tensor(values, dtype=dtype)
    assert_close(functional.gelu(x), F.gelu(x))  # F.gelu's default is the exact (erf) GELU


def test_gelu_is_x_times_the_normal_cdf():
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    normal_cdf = torch.distributions.Normal(0.0, 1.0).cdf(x)
    assert_close(functional.gelu(x), x * normal_cdf)


def gated_reference(x, w1, w2, w3, activation):
    """W2 (act(W1 x) ⊙ W3 x) from torch's own linear map and activations."""
    gate = F.linear(x, w1)
    return F.linear((gate if activation is None else activation(gate)) * F.linear(x, w3), w2)


GATED_KERNELS = [
    pytest.param(functional.swiglu, F.silu, id="swiglu"),
    pytest.param(functional.geglu, F.gelu, id="geglu"),
    pytest.param(functional.reglu, F.relu, id="reglu"),
    pytest.param(functional.bilinear_glu, None, id="bilinear"),
]


@pytest.mark.parametrize(("kernel", "activation"), GATED_KERNELS)
@given(lead=leading_dims, d_model=st.integers(1, 12), d_ff=st.integers(1, 24), seed=seeds)
def test_gated_kernels_match_torch(kernel, activation, lead, d_model, d_ff, seed):
    torch.manual_seed(seed)
    x = torch.randn(*lead, d_model, dtype=torch.float64)
    w1, w3 = torch.randn(d_ff, d_model, dtype=torch.float64), torch.randn(d_ff, d_model, dtype=torch.float64)
    w2 = torch.randn(d_model, d_ff, dtype=torch.float64)
    assert_close(kernel(x, w1, w2, w3), gated_reference(x, w1, w2, w3, activation))


def test_gated_ffn_with_a_sigmoid_is_torchs_glu():
    """Dauphin et al.'s GLU: F.glu halves its input into (value, gate) and returns value ⊙ σ(gate)."""
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    w1, w3 = torch.randn(16, 8, dtype=torch.float64), torch.randn(16, 8, dtype=torch.float64)
    w2 = torch.eye(16, dtype=torch.float64)  # identity: compare the hidden layers themselves
    glu = F.glu(torch.cat([F.linear(x, w3), F.linear(x, w1)], dim=-1), dim=-1)  # (3, 5, 16)
    assert_close(functional.gated_ffn(x, w1, w2, w3, torch.sigmoid), glu)


@pytest.mark.parametrize("kernel", [functional.bilinear_glu, functional.reglu], ids=["bilinear", "reglu"])
@given(scale=st.floats(0.1, 10.0), seed=seeds)
def test_bilinear_and_reglu_are_quadratic_in_the_input(kernel, scale, seed):
    """Both branches are (positively) homogeneous of degree 1, so their product has degree 2: f(cx) = c² f(x)."""
    torch.manual_seed(seed)
    x = torch.randn(4, 6, dtype=torch.float64)
    w1, w3, w2 = (torch.randn(10, 6, dtype=torch.float64), torch.randn(10, 6, dtype=torch.float64),
                  torch.randn(6, 10, dtype=torch.float64))
    assert_close(kernel(scale * x, w1, w2, w3), scale**2 * kernel(x, w1, w2, w3))


def test_bilinear_is_even_and_reglu_is_not():
    """With no activation, f(−x) = f(x): the product of two odd functions. ReLU's gate breaks the symmetry."""
    x = torch.randn(4, 6, dtype=torch.float64)
    w1, w3, w2 = (torch.randn(10, 6, dtype=torch.float64), torch.randn(10, 6, dtype=torch.float64),
                  torch.randn(6, 10, dtype=torch.float64))
    assert_close(functional.bilinear_glu(-x, w1, w2, w3), functional.bilinear_glu(x, w1, w2, w3))
    assert not torch.allclose(functional.reglu(-x, w1, w2, w3), functional.reglu(x, w1, w2, w3))
