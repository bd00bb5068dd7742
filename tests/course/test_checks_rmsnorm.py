"""The notebook-01 checkers pass a correct answer and give each typical mistake its own hint."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from prenorm_lib import RMSNorm, functional
from prenorm_lib.checks import Hint
from prenorm_lib.checks import rmsnorm as check
from prenorm_lib.checks.core import NotDone
from prenorm_lib.checks.remote import loopback

# 1.2's forward calls the learner's 1.1 kernel by its name; here the library's stands in for it
my_rms_norm = functional.rms_norm

pytest_plugins = ["learner_wire"]

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


def test_correct_kernel_passes(via, capsys):
    check.rms_norm(via(correct))
    assert capsys.readouterr().out.startswith("Exercise 1.1 passed: ")


def divides_in_place(x, weight, eps=1e-5):
    x32 = x.to(torch.float32)  # no copy for a float32 input
    x32 /= torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * weight.float()).to(x.dtype)


def calls_the_library(x, weight, eps=1e-5):
    """Correct values, but the exercise asks for the kernel itself."""
    return functional.rms_norm(x, weight, eps)


def calls_torch(x, weight, eps=1e-5):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def misspelt_name(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weights.float()).to(x.dtype)  # noqa: F821


def warns(x, weight, eps=1e-5):
    warnings.warn("a library warning, not a print", UserWarning, stacklevel=1)
    return correct(x, weight, eps)


def test_a_warning_is_not_a_mistake(via, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check.rms_norm(via(warns))
    assert capsys.readouterr().out.startswith("Exercise 1.1 passed: ")


@pytest.mark.parametrize("library", [functional.rms_norm, F.rms_norm, torch.rms_norm])
def test_the_library_kernel_itself_is_refused(library, via):
    with pytest.raises(Hint, match=r"^Exercise 1\.1: that is the library's own `[\w.]*rms_norm`, not your code"):
        check.rms_norm(via(library))


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (forgot_eps, "did you forget eps?"),
        (eps_outside, "eps is added outside the square root"),
        (hard_coded_eps, "ignores the `eps` argument"),
        (mean_over_first_axis, "the mean is over the wrong axis"),
        (mean_over_everything, "the mean is over the whole tensor"),
        (mean_without_keepdim, "your code raised RuntimeError"),
        (mean_without_keepdim, "keepdim=True"),
        (divides_in_place, "changed its input x in place"),
        (calls_the_library, "your code calls `functional.rms_norm`, the library's own implementation"),
        (calls_torch, "your code calls `F.rms_norm`"),
        (misspelt_name, "NameError: name 'weights' is not defined (in misspelt_name, line "),
        (misspelt_name, ") — did you mean `weight`?"),
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
def test_each_kernel_mistake_gets_its_hint(fn, expected, via):
    with pytest.raises(Hint, match=r"^Exercise 1\.1: ") as info:
        check.rms_norm(via(fn))
    assert expected in str(info.value)


def test_unfilled_kernel_prints_one_line_and_core_says_not_done(via, capsys):
    assert check.rms_norm(via(not_done)) is None
    line = capsys.readouterr().out
    if isinstance(via(not_done), type(not_done)):
        assert line == "Exercise 1.1 is not done yet — fill in `not_done` above\n"
    else:
        assert line.startswith("Exercise 1.1 is not done yet — ")
    with pytest.raises(NotDone, match=r"^Exercise 1\.1 is not done yet"):
        check.rms_norm.core(via(not_done))


def test_a_hint_shows_as_one_line_in_ipython():
    with pytest.raises(Hint) as info:
        check.rms_norm(forgot_eps)
    (line,) = info.value._render_traceback_()
    assert "Exercise 1.1" in line and "did you forget eps?" in line and "Traceback" not in line


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
            return my_rms_norm(x, weight, self.eps if use_eps else 1e-5)

    return Norm


class NotDoneNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        raise NotImplementedError("Exercise 1.2: RMSNorm module")


def test_correct_module_passes(via, capsys):
    check.rms_norm_module(via(make_module()))
    assert capsys.readouterr().out.startswith("Exercise 1.2 passed: ")


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (make_module(as_parameter=False), "not an nn.Parameter"),
        (make_module(lambda d, device, dtype: torch.randn(d, device=device, dtype=dtype)), "initialised randomly"),
        (make_module(lambda d, device, dtype: torch.ones(1, d, device=device, dtype=dtype)), "one gain per channel"),
        (make_module(lambda d, device, dtype: torch.ones(d, device=device)), "was ignored — pass dtype="),
        (make_module(lambda d, device, dtype: torch.ones(d, dtype=dtype)), "device='meta' was ignored"),
        (make_module(extra_bias=True), "no bias"),
        (make_module(use_weight=False), "forward ignores self.weight"),
        (make_module(use_eps=False), "ignores eps"),
    ],
)
def test_each_module_mistake_gets_its_hint(cls, expected, via):
    with pytest.raises(Hint, match=r"^Exercise 1\.2: ") as info:
        check.rms_norm_module(via(cls))
    assert expected in str(info.value)


class LibraryKernelNorm(nn.Module):
    """A right module whose forward calls a library kernel, not the learner's own 1.1."""

    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        return functional.rms_norm(x, self.weight, self.eps)


class TorchKernelNorm(LibraryKernelNorm):
    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


@pytest.mark.parametrize(("cls", "called"), [(LibraryKernelNorm, "functional.rms_norm"),
                                             (TorchKernelNorm, "F.rms_norm")])
def test_a_module_on_a_library_kernel_is_told_1_2_builds_on_its_own(cls, called, via):
    """Inline the library kernel is there, so its values pass; the graded kernel has none (it is withheld)."""
    with pytest.raises(Hint, match=r"^Exercise 1\.2: ") as info:
        check.rms_norm_module(via(cls))
    assert f"your code calls `{called}`" in str(info.value) and "my_rms_norm" in str(info.value)


class LibraryNorm(RMSNorm):
    pass


@pytest.mark.parametrize("cls", [RMSNorm, nn.RMSNorm, LibraryNorm])
def test_the_library_module_is_refused(cls, via):
    with pytest.raises(Hint, match=r"^Exercise 1\.2: that is the library's own `[\w.]*RMSNorm`"):
        check.rms_norm_module(via(cls))


def test_unfilled_module_is_not_done(via, capsys):
    check.rms_norm_module(via(NotDoneNorm))
    assert capsys.readouterr().out.startswith("Exercise 1.2 is not done yet — ")
    with pytest.raises(NotDone):
        check.rms_norm_module.core(via(NotDoneNorm))


# --- Exercise 1.3: predict, then run -----------------------------------------------------


@pytest.mark.parametrize(("square", "normalised"), [("inf", " 0 "), (float("inf"), 0), (math.inf, 0.0), ("INF", "0")])
def test_right_predictions_pass(square, normalised, capsys):
    check.fp16_prediction(square, normalised)
    assert "Exercise 1.3 passed: " in capsys.readouterr().out


def test_placeholders_are_not_done(capsys):
    check.fp16_prediction(..., ...)
    assert capsys.readouterr().out == (
        "Exercise 1.3 is not done yet — replace each `...` in the exercise cell above with your answer\n"
    )
    with pytest.raises(NotDone):
        check.fp16_prediction.core("inf", ...)


def test_answers_cross_the_wire_as_plain_data(capsys):
    learner = loopback({"square": float("inf"), "norm": "0"})
    check.fp16_prediction.core(learner.lookup("square"), learner.lookup("norm"))
    assert "Exercise 1.3 passed: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("square", "normalised", "expected"),
    [
        ("90000", "0", "65504"),
        ("inf", "nan", "a finite x divided by inf is 0"),
        ("inf", "1", "every output is 0"),
        ("infinity", "0", "is not one of the choices"),
        ("infinity", "0", "give the choice as one of these strings"),
        (90000.0, "0", "65504"),
        ("inf", float("nan"), "a finite x divided by inf is 0"),
    ],
)
def test_wrong_predictions_are_explained(square, normalised, expected):
    with pytest.raises(Hint, match=r"^Exercise 1\.3: ") as info:
        check.fp16_prediction(square, normalised)
    assert expected in str(info.value)
