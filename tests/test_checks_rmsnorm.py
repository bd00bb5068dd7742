"""The notebook-01 checkers pass a correct answer and give each typical mistake its own hint."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prenorm_lib import functional
from prenorm_lib.checks import Hint
from prenorm_lib.checks import rmsnorm as check

# --- Exercise 1.1: the kernel ----------------------------------------------------------


def correct(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def forgot_eps(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True)) * weight.float()).to(x.dtype)


def eps_outside(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / (torch.sqrt(x32.pow(2).mean(-1, keepdim=True)) + eps) * weight.float()).to(x.dtype)


def hard_coded_eps(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(x.dtype)


def mean_over_first_axis(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(0, keepdim=True) + eps) * weight.float()).to(x.dtype)


def mean_over_everything(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean() + eps) * weight.float()).to(x.dtype)


def mean_without_keepdim(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1) + eps) * weight.float()).to(x.dtype)


def no_upcast(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def no_upcast_rsqrt(x, weight, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def no_gain(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def layernorm_style(x, weight, eps=1e-5):
    x32 = x.float()
    centred = x32 - x32.mean(-1, keepdim=True)
    return (centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def divided_by_std(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / (x32.std(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def returns_float32(x, weight, eps=1e-5):
    x32 = x.float()
    return x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def no_sqrt(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / (x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def used_sum(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).sum(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def forgot_return(x, weight, eps=1e-5):
    functional.rms_norm(x, weight, eps)


def crashes(x, weight, eps=1e-5):
    return x / undefined_name  # noqa: F821 — the learner's typo


def not_done(x, weight, eps=1e-5):
    raise NotImplementedError("Exercise 1.1: rms_norm")


@pytest.mark.parametrize("fn", [correct, functional.rms_norm], ids=["from scratch", "library"])
def test_correct_kernel_passes(fn, capsys):
    check.rms_norm(fn)
    assert capsys.readouterr().out.startswith("Exercise 1.1 passed: ")


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (forgot_eps, "did you forget eps?"),
        (eps_outside, "eps is added outside the square root"),
        (hard_coded_eps, "ignores the `eps` argument"),
        (mean_over_first_axis, "the mean is over the wrong axis"),
        (mean_over_everything, "the mean is over the whole tensor"),
        (mean_without_keepdim, "your code raised RuntimeError"),
        (no_upcast, "compute in float32"),
        (no_upcast_rsqrt, "compute in float32"),
        (no_gain, "ignores `weight`"),
        (layernorm_style, "you subtracted the mean, as LayerNorm does"),
        (divided_by_std, "you divided by the standard deviation"),
        (returns_float32, "returned float32 for a float16 input — cast the result back"),
        (no_sqrt, "take its square root"),
        (used_sum, "you used the sum of the squares"),
        (forgot_return, "returned None"),
        (crashes, "your code raised NameError"),
    ],
)
def test_each_kernel_mistake_gets_its_hint(fn, expected):
    with pytest.raises(Hint, match=r"^Exercise 1\.1: ") as info:
        check.rms_norm(fn)
    assert expected in str(info.value)


def test_unfilled_kernel_is_not_done():
    with pytest.raises(NotImplementedError):
        check.rms_norm(not_done)


# --- Exercise 1.2: the module -----------------------------------------------------------


def make_module(weight_factory=None, use_eps=True, use_weight=True, extra_bias=False, as_parameter=True):
    """A module class with one mistake switched on (by default, none)."""

    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.eps = eps
            if weight_factory is None:
                value = torch.ones(d_model, device=device, dtype=dtype)
            else:
                value = weight_factory(d_model, device, dtype)
            self.weight = nn.Parameter(value) if as_parameter else value
            if extra_bias:
                self.bias = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype))

        def forward(self, x):
            weight = self.weight if use_weight else torch.ones_like(self.weight)
            return functional.rms_norm(x, weight, self.eps if use_eps else 1e-5)

    return Norm


class NotDoneNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        raise NotImplementedError("Exercise 1.2: RMSNorm module")


def test_correct_module_passes(capsys):
    check.rms_norm_module(make_module())
    assert capsys.readouterr().out.startswith("Exercise 1.2 passed: ")


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (make_module(as_parameter=False), "not an nn.Parameter"),
        (make_module(lambda d, device, dtype: torch.randn(d, device=device, dtype=dtype)), "initialised randomly"),
        (make_module(lambda d, device, dtype: torch.ones(1, d, device=device, dtype=dtype)), "one gain per channel"),
        (make_module(lambda d, device, dtype: torch.ones(d, device=device)), "dtype=torch.float64 was ignored"),
        (make_module(lambda d, device, dtype: torch.ones(d, dtype=dtype)), "device='meta' was ignored"),
        (make_module(extra_bias=True), "no bias"),
        (make_module(use_weight=False), "forward ignores self.weight"),
        (make_module(use_eps=False), "ignores eps"),
    ],
)
def test_each_module_mistake_gets_its_hint(cls, expected):
    with pytest.raises(Hint, match=r"^Exercise 1\.2: ") as info:
        check.rms_norm_module(cls)
    assert expected in str(info.value)


def test_unfilled_module_is_not_done():
    with pytest.raises(NotImplementedError):
        check.rms_norm_module(NotDoneNorm)


# --- Exercise 1.3: predict, then run -----------------------------------------------------


def test_right_predictions_pass(capsys):
    check.fp16_prediction("inf", " 0 ")
    assert "Exercise 1.3 passed: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("square", "normalised", "expected"),
    [
        ("90000", "0", "65504"),
        ("inf", "nan", "a finite x divided by inf is 0"),
        ("inf", "1", "every output is 0"),
        ("infinity", "0", "is not one of the choices"),
    ],
)
def test_wrong_predictions_are_explained(square, normalised, expected):
    with pytest.raises(Hint, match=r"^Exercise 1\.3: ") as info:
        check.fp16_prediction(square, normalised)
    assert expected in str(info.value)
