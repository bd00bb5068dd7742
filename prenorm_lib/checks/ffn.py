"""Checkers for notebook 02 (SwiGLU vs SiLU vs ReLU).

Each checker runs the learner's function against the library's reference and, when the
answer is wrong, compares it with small *wrong* variants that embody the typical
mistakes (gate on the wrong branch, SiLU forgotten, 4× instead of 8/3, ...). Matching a
variant names the mistake, so the hint says what to change rather than "values differ".

- Exercise 2.1 ``silu(fn)``: ``fn(x) -> x · σ(x)`` without ``torch.nn.functional``.
- Exercise 2.2 ``swiglu(fn)``: ``fn(x, w1, w2, w3) -> W2 (SiLU(W1 x) ⊙ W3 x)``.
- Exercise 2.3 ``hidden_dim(fn)``: ``fn(d_model) -> d_ff``, 8/3·d_model rounded to the
  nearest multiple of 64.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from prenorm_lib import functional
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    Hint,
    call_learner,
    dense_tensor,
    exercise,
    expect,
    expect_close,
    expect_input_gradients,
    expect_relative,
    expect_repeatable,
    fresh_generator,
    passed,
    refuse_library_calls,
    refuse_library_object,
    refuse_library_ops,
    tolerance,
)
from prenorm_lib.ffn import swiglu_hidden_dim

__all__ = ["hidden_dim", "silu", "swiglu"]


def _matches(got: object, want: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """True if ``got`` is a tensor of ``want``'s shape with the same values (NaN never matches)."""
    if not dense_tensor(got) or got.shape != want.shape:
        return False
    got64, want64 = got.detach().double(), want.detach().double()
    return bool(torch.allclose(got64, want64, atol=atol, rtol=rtol))


def _first_matching_variant(got: object, x_args: tuple, variants: dict[str, tuple[Callable, str]]) -> str | None:
    """The hint of the first wrong variant whose output equals ``got`` on ``x_args``."""
    for variant, hint in variants.values():
        try:
            expected = variant(*x_args)
        except (RuntimeError, IndexError, ValueError):  # a wrong variant may not even run on these shapes
            continue
        if _matches(got, expected):
            return hint
    return None


# ---------------------------------------------------------------------------------------
# Exercise 2.1: SiLU from its definition
# ---------------------------------------------------------------------------------------

_SILU_VARIANTS: dict[str, tuple[Callable, str]] = {
    "relu": (
        functional.relu,
        "your function returns max(0, x), which is ReLU. SiLU is x · σ(x): smooth, and slightly "
        "negative for negative x (e.g. silu(-1) ≈ -0.269), where ReLU is exactly 0.",
    ),
    "sigmoid": (
        torch.sigmoid,
        "your function returns σ(x) — the gate alone. SiLU multiplies it by x: silu(x) = x · σ(x).",
    ),
    "minus_sign": (
        lambda x: x * torch.sigmoid(-x),
        "the sign inside the exponential is flipped: σ(x) = 1 / (1 + exp(-x)), and your function "
        "computes x / (1 + exp(+x)) = x · σ(-x), which grows for negative x.",
    ),
    "tanh_without_half": (
        lambda x: x * torch.sigmoid(2 * x),
        "you computed x · (1 + tanh(x)) / 2 = x · σ(2x). The identity is σ(x) = (1 + tanh(x/2)) / 2: "
        "tanh needs half the argument.",
    ),
    "x_tanh": (
        lambda x: x * torch.tanh(x),
        "x · tanh(x) is not SiLU (it is even: positive on both sides). Use σ(x) = 1 / (1 + exp(-x)), "
        "or σ(x) = (1 + tanh(x/2)) / 2.",
    ),
    "sign": (
        lambda x: x * torch.sigmoid(x) * torch.sign(x),
        "your output is never negative, so a sign or abs() crept in: silu(x) = x · σ(x) is "
        "negative for every x < 0.",
    ),
}


EXP_OVERFLOW = math.log(torch.finfo(torch.float32).max)  # ≈ 88.72: exp(x) is inf in float32 above it


def _extreme_inputs(gen: torch.Generator) -> torch.Tensor:
    """Large inputs drawn afresh, in a drawn order: the kinds are fixed, the values are not.

    2 to 4 magnitudes on each side where exp overflows float32 (|x| from 100 to 1000,
    log-uniform), one on each side far out but finite (|x| from 15 to 40), and 0. A naive
    exp(x) / (1 + exp(x)) gives inf/inf = nan at the positive ones, exp(-x)-based forms at the
    negative ones. Values are rounded to 0.1 so a hint quotes them readably.
    """

    def log_uniform(n: int, low: float, high: float) -> torch.Tensor:
        u = torch.rand(n, generator=gen, dtype=torch.float64)
        return (math.log(low) + u * (math.log(high) - math.log(low))).exp()

    n_pos, n_neg = (int(torch.randint(2, 5, (), generator=gen)) for _ in range(2))
    values = torch.cat([
        log_uniform(n_pos, 100.0, 1000.0), -log_uniform(n_neg, 100.0, 1000.0),
        log_uniform(1, 15.0, 40.0), -log_uniform(1, 15.0, 40.0), torch.zeros(1, dtype=torch.float64),
    ])
    values = (values * 10).round() / 10
    return values[torch.randperm(len(values), generator=gen)].to(torch.float32)


SILU_IN_PLACE = {"x": "compute a new tensor (x * ..., not x.mul_(...)) so the caller's x stays as it was."}


def _silu_contract(fn: Callable, gen: torch.Generator) -> None:
    """2.1 beyond its cases: a bfloat16 input (bfloat16 back), the gradient to x, and a second call."""
    half = (3 * torch.randn(5, 7, generator=gen)).bfloat16()
    atol, rtol = tolerance(torch.bfloat16)
    expect_close("2.1", call_learner("2.1", fn, half, arg_names=("x",), in_place=SILU_IN_PLACE),
                 functional.silu(half), "values differ from x · σ(x) for bfloat16", atol=atol, rtol=rtol,
                 dtype_hint="use tensor operations only (torch.exp, torch.sigmoid, *, /): they keep the dtype.")
    x, again = 4 * torch.randn(3, 6, generator=gen), 4 * torch.randn(3, 6, generator=gen)
    expect_input_gradients("2.1", fn, (x,), functional.silu, ("x",))
    expect_repeatable("2.1", fn, (x,), functional.silu(x), (again,), functional.silu(again))


@exercise("2.1")
def silu(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2.1: check ``fn(x) == x * sigmoid(x)``, written without torch.nn.functional."""
    ex = "2.1"
    refuse_library_object(ex, fn, EXERCISES[ex].refuses, EXERCISES[ex].task)
    gen = fresh_generator()
    grid = torch.cat([torch.zeros(1), 12 * torch.rand(48, generator=gen) - 6]).sort().values  # (49,) in [-6, 6]
    want = functional.silu(grid)
    got = call_learner(ex, fn, grid, arg_names=("x",), in_place=SILU_IN_PLACE)
    if not _matches(got, want):
        hint = _first_matching_variant(got, (grid,), _SILU_VARIANTS)
        expect_close(ex, got, want, hint or "values differ from x · σ(x) on x ∈ [-6, 6]",
                     shape_hint="SiLU works elementwise, so the output has the input's shape.")

    extreme = _extreme_inputs(gen)
    want = functional.silu(extreme)  # before the learner's call, which gets a copy of extreme
    got = call_learner(ex, fn, extreme, arg_names=("x",), in_place=SILU_IN_PLACE)
    if dense_tensor(got) and got.shape == extreme.shape and not torch.isfinite(got).all():
        # name the smallest input that broke (as the old sorted input did), whatever the drawn order
        broken = torch.nonzero(~torch.isfinite(got)).flatten()
        first = broken[extreme[broken].argmin()]
        raise Hint(ex, f"silu({extreme[first].item():g}) gave {got[first].item()} instead of a number: "
                       "exp overflowed to inf, and inf/inf or 0·inf is nan. Write σ(x) as 1 / (1 + exp(-x)) "
                       "(there exp(-x) = inf only makes σ(x) = 0, harmless) or use torch.sigmoid.")
    expect_close(ex, got, want, "values differ from x · σ(x) for large |x| "
                 "(silu(x) → x for x → +∞ and → 0 for x → −∞)")

    shape = tuple(int(n) for n in torch.randint(2, 8, (3,), generator=gen))  # a batch of any small shape
    cases = {
        f"a {shape} tensor": torch.randn(*shape, generator=gen) * 4,
        "float64": torch.randn(int(torch.randint(5, 16, (), generator=gen)), dtype=torch.float64, generator=gen),
        "float16": (torch.randn(*shape[1:], generator=gen) * 3).half(),
    }
    for label, x in cases.items():
        got = call_learner(ex, fn, x, arg_names=("x",), in_place=SILU_IN_PLACE)
        atol, rtol = (2e-3, 2e-3) if x.dtype == torch.float16 else (1e-5, 1e-4)
        expect_close(ex, got, functional.silu(x), f"values differ from x · σ(x) for {label}",
                     atol=atol, rtol=rtol,
                     shape_hint="SiLU works elementwise, so the output has the input's shape.",
                     dtype_hint="use tensor operations only (torch.exp, torch.sigmoid, *, /): they keep the dtype.")
    _silu_contract(fn, gen)
    # Checked last, once the values are right: a wrong answer gets the hint about its values first.
    refuse_library_calls(ex, fn, EXERCISES[ex].refused_calls, EXERCISES[ex].task)
    refuse_library_ops(ex, fn, (grid,), EXERCISES[ex].refused_ops, EXERCISES[ex].task)
    passed(ex, "silu matches x·σ(x) on a grid, on batches, in float16/float64, and stays finite out to |x| = 1000")


# ---------------------------------------------------------------------------------------
# Exercise 2.2: the SwiGLU forward pass
# ---------------------------------------------------------------------------------------


def _glu_variant(gate_w: str, gate_act: Callable, value_act: Callable, combine: Callable, transpose: bool = True):
    """A SwiGLU-like network whose parts can be wrong on purpose (see _SWIGLU_VARIANTS)."""

    def forward(x, w1, w2, w3):
        t = (lambda w: w.T) if transpose else (lambda w: w)
        a, b = (w1, w3) if gate_w == "w1" else (w3, w1)
        return combine(gate_act(x @ t(a)), value_act(x @ t(b))) @ t(w2)

    return forward


def _identity(x):
    return x


def _mul(a, b):
    return a * b


_SWIGLU_VARIANTS: dict[str, tuple[Callable, str]] = {
    "swapped": (
        _glu_variant("w3", functional.silu, _identity, _mul),
        "SiLU went on the wrong branch: the gate is SiLU(W1 x) and W3 x is the value it scales. "
        "You computed SiLU(W3 x) ⊙ W1 x — swap w1 and w3.",
    ),
    "no_silu": (
        _glu_variant("w1", _identity, _identity, _mul),
        "there is no SiLU: (W1 x) ⊙ (W3 x) is the 'Bilinear' variant. Apply SiLU to W1 x only.",
    ),
    "silu_both": (
        _glu_variant("w1", functional.silu, functional.silu, _mul),
        "SiLU is applied to both branches. Only the gate W1 x goes through SiLU; W3 x stays linear "
        "(that linear branch is what gives gradients an unsquashed path).",
    ),
    "relu_gate": (
        _glu_variant("w1", functional.relu, _identity, _mul),
        "the gate uses ReLU (that is ReGLU). SwiGLU gates with SiLU: x · σ(x).",
    ),
    "sigmoid_gate": (
        _glu_variant("w1", torch.sigmoid, _identity, _mul),
        "the gate uses σ (that is the original GLU). SwiGLU gates with SiLU(W1 x) = (W1 x) · σ(W1 x).",
    ),
    "added": (
        _glu_variant("w1", functional.silu, _identity, torch.add),
        "the two branches are added; SwiGLU multiplies them elementwise: SiLU(W1 x) ⊙ W3 x.",
    ),
    "no_transpose": (
        _glu_variant("w1", functional.silu, _identity, _mul, transpose=False),
        "the weights are stored (out_features, in_features), so W x is x @ w.T — your result "
        "equals x @ w without the transposes.",
    ),
    "no_w3": (
        lambda x, w1, w2, w3: functional.silu(x @ w1.T) @ w2.T,
        "w3 is never used: W2 SiLU(W1 x) is the two-matrix SiLU FFN. Multiply SiLU(W1 x) by W3 x "
        "before applying W2.",
    ),
}


def _swiglu_case(d_model: int, d_ff: int, lead: tuple[int, ...], dtype=torch.float32, gen=None):
    gen = fresh_generator() if gen is None else gen
    x = torch.randn(*lead, d_model, dtype=dtype, generator=gen)  # (..., d_model)
    w1 = torch.randn(d_ff, d_model, dtype=dtype, generator=gen) / math.sqrt(d_model)
    w2 = torch.randn(d_model, d_ff, dtype=dtype, generator=gen) / math.sqrt(d_ff)
    w3 = torch.randn(d_ff, d_model, dtype=dtype, generator=gen) / math.sqrt(d_model)
    return x, w1, w2, w3


def _swiglu_cases() -> dict[str, tuple[torch.Tensor, ...]]:
    """Four cases with every width drawn afresh (d_model 4 … 12, d_ff ≠ d_model except in the square case),
    so a forward that writes in a width, or the 8 and 12 of the notebook's example, fails somewhere."""
    gen = fresh_generator()

    def width(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=gen))

    d1, d2, d3, d4 = (width(4, 12) for _ in range(4))
    f1, f3, f4 = d1 + width(2, 12), d3 + width(2, 12), d4 + width(2, 12)
    return {
        f"x of shape (2, 5, {d1}) with d_ff = {f1}": _swiglu_case(d1, f1, (2, 5), gen=gen),
        f"square weights (d_ff = d_model = {d2})": _swiglu_case(d2, d2, (2, 3), gen=gen),
        f"a single vector x of shape ({d3},) with d_ff = {f3}": _swiglu_case(d3, f3, (), gen=gen),
        f"float64 with d_model = {d4}, d_ff = {f4}": _swiglu_case(d4, f4, (4,), dtype=torch.float64, gen=gen),
    }


STORAGE_HINT = ("The weights are stored (out_features, in_features): w1 and w3 are (d_ff, d_model), w2 is "
                "(d_model, d_ff), so W x is x @ w.T.")
COLUMN_HINT = ("your function works for a single vector x of shape (d_model,) but not for a batch (..., d_model): "
               "`w @ x.T` treats x as one column. Write x @ w.T, which keeps every leading dimension of x: "
               "(..., d_model) @ (d_model, d_ff) → (..., d_ff)")


SWIGLU_ARGS = ("x", "w1", "w2", "w3")


def _works_on_one_vector(ex: str, fn: Callable) -> bool:
    """True if ``fn`` gets the single-vector case right (then a batch failure is a layout mistake)."""
    args = _swiglu_case(8, 12, ())
    try:
        got = call_learner(ex, fn, *args, arg_names=SWIGLU_ARGS)
    except Hint:
        return False
    return _matches(got, functional.swiglu(*args))


def _call_swiglu(ex: str, fn: Callable, args: tuple) -> torch.Tensor:
    """Call the learner; a matmul shape error gets a hint about (out, in) storage or about W @ x.T."""
    try:
        return call_learner(ex, fn, *args, arg_names=SWIGLU_ARGS)
    except Hint as hint:
        if args[0].dim() > 1 and _works_on_one_vector(ex, fn):
            raise Hint(ex, f"{hint.hint}. {COLUMN_HINT}") from None
        if "cannot be multiplied" in hint.hint or "size of tensor" in hint.hint or "mismatch" in hint.hint:
            raise Hint(ex, f"{hint.hint}. {STORAGE_HINT}") from None
        raise


def _swiglu_contract(fn: Callable) -> None:
    """2.2 beyond its cases: bfloat16 inputs (bfloat16 back), the gradients to x and the weights, a second call."""
    gen = fresh_generator()
    d, f = int(torch.randint(4, 13, (), generator=gen)), int(torch.randint(14, 25, (), generator=gen))
    half = _swiglu_case(d, f, (2, 3), dtype=torch.bfloat16, gen=gen)
    # three products rounded to bfloat16 in a row, the last a sum over d_ff that can cancel: no elementwise bound
    # holds (the handout's formula missed (2e-2, 2e-2) in 2 of 8,270 drawn checks); the whole output is compared
    want = functional.swiglu(*(t.double() for t in half)).bfloat16()
    expect_relative("2.2", _call_swiglu("2.2", fn, half), want, f"for bfloat16 x (2, 3, {d}) and weights with "
                    f"d_ff = {f}: values differ from W2 (SiLU(W1 x) ⊙ W3 x)",
                    dtype_hint="keep the input's dtype (no .float() or .double())")
    args, again = _swiglu_case(d, f, (2, 3), gen=gen), _swiglu_case(d, f, (2, 3), gen=gen)
    expect_input_gradients("2.2", fn, args, functional.swiglu, SWIGLU_ARGS)
    expect_repeatable("2.2", fn, args, functional.swiglu(*args), again, functional.swiglu(*again))


@exercise("2.2")
def swiglu(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise 2.2: check ``fn(x, w1, w2, w3) == W2 (SiLU(W1 x) ⊙ W3 x)``."""
    ex = "2.2"
    refuse_library_object(ex, fn, EXERCISES[ex].refuses, EXERCISES[ex].task)
    cases = _swiglu_cases()
    for label, args in cases.items():
        want = functional.swiglu(*args)  # before the learner's call, which gets copies of the arguments
        got = _call_swiglu(ex, fn, args)
        if _matches(got, want):
            continue
        hint = _first_matching_variant(got, args, _SWIGLU_VARIANTS)
        if hint:
            raise Hint(ex, f"for {label}: {hint}")
        d_ff, d_model = args[1].shape
        if isinstance(got, torch.Tensor) and d_ff != d_model and got.shape == (*want.shape[:-1], d_ff):
            raise Hint(ex, f"for {label}: the output has d_ff features — apply W2 (x @ w2.T) to bring it "
                           "back to d_model.")
        if (isinstance(got, torch.Tensor) and args[0].dim() > 1 and got.shape == want.shape[::-1]
                and want.shape != want.shape[::-1]):
            raise Hint(ex, f"for {label}: the output is transposed ({tuple(got.shape)}) — {COLUMN_HINT}")
        expect_close(ex, got, want, f"for {label}: values differ from W2 (SiLU(W1 x) ⊙ W3 x)",
                     shape_hint="the output must have x's shape (..., d_model)",
                     dtype_hint="keep the input's dtype (no .float() or .double())")
    _swiglu_contract(fn)
    refuse_library_calls(ex, fn, EXERCISES[ex].refused_calls, EXERCISES[ex].task)
    passed(ex, "swiglu matches W2(SiLU(W1 x) ⊙ W3 x) for square and rectangular weights, batches, a single "
               "vector and float64")


# ---------------------------------------------------------------------------------------
# Exercise 2.3: choosing d_ff
# ---------------------------------------------------------------------------------------

# No d_model here is ≡ 12 (mod 24): there 8/3·d_model is an exact half-multiple of 64 and
# "nearest" depends on the tie rule, which is not what the exercise is about.
_KNOWN_D_MODELS = (768, 256, 512, 64, 8)  # 256 tells floor, 512 ceil from nearest; 8 needs max(64, ...)


def _d_models() -> tuple[int, ...]:
    """The known widths and five drawn afresh from 65 … 5120 (none ≡ 12 mod 24, where nearest is a tie)."""
    gen = fresh_generator()
    drawn: list[int] = []
    while len(drawn) < 5:
        d = int(torch.randint(65, 5121, (), generator=gen))
        if d % 24 != 12 and d not in drawn:
            drawn.append(d)
    return (*_KNOWN_D_MODELS, *drawn)

_HIDDEN_VARIANTS: dict[str, tuple[Callable[[int], int], str]] = {
    "four_x": (
        lambda d: 4 * d,
        "4·d_model is the width of the two-matrix FFN. SwiGLU has three matrices, so it uses 2/3 "
        "of that, 8/3·d_model, to keep the parameter count (3·d_model·d_ff ≈ 8·d_model²).",
    ),
    "floor": (
        lambda d: max(64, math.floor(8 * d / 3 / 64) * 64),
        "you rounded down (floor). The course rounds to the NEAREST multiple of 64, so d_ff stays "
        "as close as possible to 8/3·d_model (d_model = 256: 682.7 → 704, not 640). Llama rounds "
        "up instead; both are conventions, but this exercise asks for nearest.",
    ),
    "ceil": (
        lambda d: max(64, math.ceil(8 * d / 3 / 64) * 64),
        "you rounded up (ceil, Llama's convention). The course rounds to the NEAREST multiple of 64 "
        "(d_model = 512: 1365.3 → 1344, not 1408) — use round(...).",
    ),
}


@exercise("2.3")
def hidden_dim(fn: Callable[[int], int]) -> None:
    """Exercise 2.3: check ``fn(d_model) == swiglu_hidden_dim(d_model)`` (nearest multiple of 64)."""
    ex = "2.3"
    refuse_library_object(ex, fn, EXERCISES[ex].refuses, EXERCISES[ex].task)
    d_models = _d_models()
    got = {d: call_learner(ex, fn, d) for d in d_models}
    for d, value in got.items():
        if isinstance(value, float) or (isinstance(value, torch.Tensor) and value.numel() == 1):
            raise Hint(ex, f"for d_model = {d} you returned {value!r}, a {type(value).__name__}; d_ff sizes a "
                           "weight matrix, so return a Python int (round(...) returns one; so does int(...)).")
        expect(ex, isinstance(value, int) and not isinstance(value, bool),
               f"for d_model = {d} you returned {value!r} ({type(value).__name__}); return an int.")
    want = {d: swiglu_hidden_dim(d) for d in d_models}
    if got == want:
        refuse_library_calls(ex, fn, EXERCISES[ex].refused_calls, EXERCISES[ex].task)
        passed(ex, "d_ff = 8/3·d_model rounded to the nearest multiple of 64 for d_model from 8 to 5120")
        return
    usual = [d for d in d_models if d >= 64]
    for variant, hint in _HIDDEN_VARIANTS.values():
        if all(got[d] == variant(d) for d in usual):
            raise Hint(ex, hint)
    off_grid = [d for d in usual if got[d] % 64]
    if off_grid:
        d = off_grid[0]
        raise Hint(ex, f"for d_model = {d} you returned {got[d]}, not a multiple of 64. Round 8/3·d_model "
                       "to the nearest multiple: round(x / 64) * 64 (8/3·d_model alone gives odd shapes "
                       "that matrix kernels handle slowly).")
    wrong = [d for d in usual if got[d] != want[d]]
    if wrong:
        d = wrong[0]
        raise Hint(ex, f"for d_model = {d} you returned {got[d]}, expected {want[d]} "
                       f"(8/3·{d} = {8 * d / 3:.1f}, rounded to the nearest multiple of 64).")
    raise Hint(ex, f"for a tiny d_model = 8 you returned {got[8]}: 8/3·8 = 21.3 rounds to 0 multiples of 64, "
                   "a layer of width 0. Keep at least one multiple: max(64, ...).")
