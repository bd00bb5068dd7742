"""The stateless kernels against torch's own implementations.

Each reference here (``F.rms_norm``, ``torch.relu``, ``F.silu``, ``torch.softmax``) was
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
