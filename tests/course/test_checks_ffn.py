"""The notebook-02 checkers pass correct answers and name each typical mistake.

Every wrong implementation below is a small, plausible learner attempt; the test asserts
that its checker raises a Hint whose message names that mistake.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # the spelling learners use

from prenorm_lib import functional
from prenorm_lib.checks import Hint
from prenorm_lib.checks import ffn as check
from prenorm_lib.checks.core import NotDone
from prenorm_lib.ffn import swiglu_hidden_dim

pytest_plugins = ["learner_wire"]

# ----------------------------------------------------------------------------- 2.1 silu


def silu_with_exp(x):
    return x / (1 + torch.exp(-x))


def silu_with_sigmoid(x):
    return x * torch.sigmoid(x)


def silu_with_tanh(x):
    return x * (1 + torch.tanh(x / 2)) / 2


def silu_relu(x):
    return torch.clamp(x, min=0)


def silu_no_x(x):
    return 1 / (1 + torch.exp(-x))


def silu_flipped_sign(x):
    return x / (1 + torch.exp(x))


def silu_tanh_without_half(x):
    return x * (1 + torch.tanh(x)) / 2


def silu_x_tanh(x):
    return x * torch.tanh(x)


def silu_abs(x):
    return x.abs() * torch.sigmoid(x)


def silu_overflowing(x):
    return x * torch.exp(x) / (1 + torch.exp(x))


def silu_overflowing_negative(x):
    return x * torch.exp(-x) / (torch.exp(-x) * (1 + torch.exp(-x)))


def silu_library(x):
    return F.silu(x)


def silu_module(x):
    return torch.nn.SiLU()(x)


def silu_in_place(x):
    return x.mul_(torch.sigmoid(x))


def silu_to_float32(x):
    return x.float() * torch.sigmoid(x.float())


def silu_crashes(x):
    return math.exp(-x)


def silu_not_done(x):
    raise NotImplementedError("Exercise 2.1: SiLU without torch.nn.functional")


@pytest.mark.parametrize("fn", [silu_with_exp, silu_with_sigmoid, silu_with_tanh])
def test_silu_accepts_correct_answers(fn, via, capsys):
    check.silu(via(fn))
    assert capsys.readouterr().out.startswith("Exercise 2.1 passed: ")


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (silu_relu, "ReLU"),
        (silu_no_x, "the gate alone"),
        (silu_flipped_sign, "sign inside the exponential"),
        (silu_tanh_without_half, "half the argument"),
        (silu_x_tanh, "x · tanh(x) is not SiLU"),
        (silu_abs, "never negative"),
        (silu_overflowing, "exp overflowed"),
        (silu_overflowing_negative, "exp overflowed"),
        (silu_library, "ready-made SiLU"),
        (silu_module, "ready-made SiLU"),
        (F.silu, "that is the library's own `torch.nn.functional.silu`"),
        (functional.silu, "that is the library's own `prenorm_lib.functional.silu`"),
        (torch.nn.SiLU(), "that is the library's own `torch.nn.modules.activation.SiLU`"),
        (silu_in_place, "in place"),
        (silu_to_float32, "they keep the dtype"),
        (silu_crashes, "your code raised"),
        (lambda x: None, "forget to `return`"),
    ],
)
def test_silu_names_each_mistake(fn, words, via):
    with pytest.raises(Hint, match=r"^Exercise 2\.1: ") as caught:
        check.silu(via(fn))
    assert words in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("fn", "sign"), [(silu_overflowing, 1), (silu_overflowing_negative, -1)])
def test_silu_overflow_hint_names_a_drawn_input_where_exp_overflows(fn, sign):
    """The extreme inputs are drawn per check; the hint names the smallest one that broke (x·eˣ/(1 + eˣ) breaks
    only at large positive x; the e⁻ˣ form at both ends, so its smallest broken input is a large negative one)."""
    quoted = set()
    for _ in range(5):
        with pytest.raises(Hint, match=r"^Exercise 2\.1: silu\((-?\d+(?:\.\d)?)\) gave nan instead of a number: "
                                       r"exp overflowed to inf, and inf/inf or 0·inf is nan\.") as info:
            check.silu(fn)
        value = float(re.search(r"silu\((-?[\d.]+)\)", str(info.value)).group(1))
        assert value * sign >= 100 > check.EXP_OVERFLOW, value  # a magnitude where exp overflows float32
        assert "\n" not in str(info.value)
        quoted.add(value)
    assert len(quoted) > 1, "the same input every time: the extreme inputs are not drawn"


def test_silu_unfinished_scaffold_is_not_done(via, capsys):
    check.silu(via(silu_not_done))
    assert capsys.readouterr().out.startswith("Exercise 2.1 is not done yet — ")
    with pytest.raises(NotDone):
        check.silu.core(via(silu_not_done))


# --------------------------------------------------------------------------- 2.2 swiglu


def swiglu_correct(x, w1, w2, w3):
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


def swiglu_with_linear(x, w1, w2, w3):
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


def swiglu_swapped(x, w1, w2, w3):
    return (F.silu(x @ w3.T) * (x @ w1.T)) @ w2.T


def swiglu_no_silu(x, w1, w2, w3):
    return ((x @ w1.T) * (x @ w3.T)) @ w2.T


def swiglu_silu_both(x, w1, w2, w3):
    return (F.silu(x @ w1.T) * F.silu(x @ w3.T)) @ w2.T


def swiglu_relu_gate(x, w1, w2, w3):
    return (F.relu(x @ w1.T) * (x @ w3.T)) @ w2.T


def swiglu_sigmoid_gate(x, w1, w2, w3):
    return (torch.sigmoid(x @ w1.T) * (x @ w3.T)) @ w2.T


def swiglu_added(x, w1, w2, w3):
    return (F.silu(x @ w1.T) + x @ w3.T) @ w2.T


def swiglu_no_transpose(x, w1, w2, w3):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def swiglu_no_w3(x, w1, w2, w3):
    return F.silu(x @ w1.T) @ w2.T


def swiglu_no_w2(x, w1, w2, w3):
    return F.silu(x @ w1.T) * (x @ w3.T)


def swiglu_only_w2_untransposed(x, w1, w2, w3):
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2


def swiglu_weight_times_x(x, w1, w2, w3):
    """The maths as written on paper, W x, with x as a column: right for one vector only."""
    return w2 @ (F.silu(w1 @ x.T) * (w3 @ x.T))


def swiglu_calls_library(x, w1, w2, w3):
    return functional.swiglu(x, w1, w2, w3)


@pytest.mark.parametrize("fn", [swiglu_correct, swiglu_with_linear])
def test_swiglu_accepts_correct_answers(fn, via, capsys):
    check.swiglu(via(fn))
    assert capsys.readouterr().out.startswith("Exercise 2.2 passed: ")


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (swiglu_swapped, "wrong branch"),
        (swiglu_no_silu, "there is no SiLU"),
        (swiglu_silu_both, "applied to both branches"),
        (swiglu_relu_gate, "ReGLU"),
        (swiglu_sigmoid_gate, "original GLU"),
        (swiglu_added, "added"),
        (swiglu_no_transpose, "x @ w.T"),
        (swiglu_no_w3, "w3 is never used"),
        (swiglu_no_w2, "apply W2"),
        (swiglu_only_w2_untransposed, "(out_features, in_features)"),
        (swiglu_weight_times_x, "works for a single vector x of shape (d_model,) but not for a batch"),
        (swiglu_weight_times_x, "x @ w.T"),
        (functional.swiglu, "that is the library's own `prenorm_lib.functional.swiglu`"),
        (swiglu_calls_library, "your code calls `functional.swiglu`"),
    ],
)
@pytest.mark.filterwarnings("ignore:The use of `x.T`")  # swiglu_weight_times_x transposes a batch
def test_swiglu_names_each_mistake(fn, words, via):
    with pytest.raises(Hint, match=r"^Exercise 2\.2: ") as caught:
        check.swiglu(via(fn))
    assert words in str(caught.value), str(caught.value)


# ---------------------------------------------------------------------- 2.3 hidden_dim


def hidden_correct(d_model):
    return max(64, round(8 * d_model / 3 / 64) * 64)


def hidden_floor(d_model):
    return int(8 * d_model / 3 // 64) * 64


def hidden_ceil(d_model):
    return max(64, math.ceil(8 * d_model / 3 / 64) * 64)


def hidden_four_x(d_model):
    return 4 * d_model


def hidden_unrounded(d_model):
    return int(8 * d_model / 3)


def hidden_float(d_model):
    return max(64.0, np.round(8 * d_model / 3 / 64) * 64.0)


def hidden_no_minimum(d_model):
    return round(8 * d_model / 3 / 64) * 64


def hidden_two_thirds(d_model):
    return max(64, round(2 * d_model / 3 / 64) * 64)


@pytest.mark.parametrize("fn", [hidden_correct, lambda d: max(64, 64 * round(d / 24))])
def test_hidden_dim_accepts_correct_answers(fn, via, capsys):
    check.hidden_dim(via(fn))
    assert capsys.readouterr().out.startswith("Exercise 2.3 passed: ")


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (hidden_floor, "rounded down"),
        (hidden_ceil, "rounded up"),
        (hidden_four_x, "4·d_model is the width of the two-matrix FFN"),
        (hidden_unrounded, "not a multiple of 64"),
        (hidden_float, "return a Python int"),
        (hidden_no_minimum, "at least one multiple"),
        (hidden_two_thirds, "expected"),
        (lambda d: str(d), "return an int"),
        (swiglu_hidden_dim, "that is the library's own `prenorm_lib.ffn.swiglu_hidden_dim`"),
        (lambda d: swiglu_hidden_dim(d), "your code calls `swiglu_hidden_dim`"),
    ],
)
def test_hidden_dim_names_each_mistake(fn, words, via):
    with pytest.raises(Hint, match=r"^Exercise 2\.3: ") as caught:
        check.hidden_dim(via(fn))
    assert words in str(caught.value), str(caught.value)
