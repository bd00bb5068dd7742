"""Checkers of notebook 03 (RoPE).

Exercise 3.1 builds the cos/sin cache, 3.2 rotates interleaved pairs with it, 3.3 asks
which pairs can still tell positions apart across a long context. A wrong answer is
compared with the typical mistakes, each written out below as a small variant of the
reference, so the hint can name the mistake rather than just say "wrong".
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
    describe,
    exercise,
    expect_close,
    expect_input_gradients,
    expect_repeatable,
    finite_number,
    fresh_generator,
    number_hint,
    passed,
    refuse_library_calls,
    refuse_library_object,
    refuse_library_ops,
    tolerance,
)

# ---------------------------------------------------------------------------
# Exercise 3.1: the cos/sin cache


def _angles(theta: float, d_k: int, max_seq_len: int, exponent: str = "2k/d", first_position: int = 0):
    """Angle table (max_seq_len, d_k/2) in float64, optionally with a typical mistake."""
    k = torch.arange(d_k // 2, dtype=torch.float64)
    exponents = {"2k/d": -2 * k / d_k, "k/d": -k / d_k, "2k": -2 * k, "+2k/d": 2 * k / d_k}
    positions = torch.arange(first_position, first_position + max_seq_len, dtype=torch.float64)
    return torch.outer(positions, theta ** exponents[exponent])


CACHE_MISTAKES = (
    (lambda a: (_angles(*a, exponent="k/d").cos(), _angles(*a, exponent="k/d").sin()),
     "the exponent must be −2k/d_k for pair k = 0 … d_k/2 − 1 — your frequencies fall twice too slowly; "
     "did you use arange(d_k // 2) / d_k instead of arange(0, d_k, 2) / d_k?"),
    (lambda a: (_angles(*a, exponent="2k").cos(), _angles(*a, exponent="2k").sin()),
     "the exponent must be −2k/d_k — divide by d_k; without it every pair after the first barely turns"),
    (lambda a: (_angles(*a, exponent="+2k/d").cos(), _angles(*a, exponent="+2k/d").sin()),
     "your frequencies increase with k: the exponent needs its minus sign, θ_k = Θ^(−2k/d_k), "
     "so that pair 0 is the fastest clock and the last pair the slowest"),
    (lambda a: (_angles(*a, first_position=1).cos(), _angles(*a, first_position=1).sin()),
     "positions are off by one: row i must hold position i, starting at 0 (position 0 is not rotated, so "
     "cos = 1 and sin = 0 in the first row)"),
    (lambda a: (_angles(*a), _angles(*a)),
     "you returned the angles themselves; return their cosine and sine"),
    (lambda a: (_angles(*a).sin(), _angles(*a).cos()),
     "cos and sin are swapped: return (cos, sin) in that order"),
)

def _cache_cases() -> list[tuple[float, int, int]]:
    """(theta, d_k, max_seq_len), drawn afresh: 2 … 8 pairs, one pair, 32 pairs over 100 positions, one position."""
    gen = fresh_generator()

    def pick(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=gen))

    return [(float(pick(5000, 20000)), 2 * pick(2, 8), pick(12, 24)), (float(pick(5000, 20000)), 2, pick(3, 9)),
            (float(pick(300, 800)), 64, 100), (float(pick(5000, 20000)), 2 * pick(4, 16), 1)]


def _as_pair(exercise_id: str, result) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise Hint(exercise_id, f"return a tuple (cos, sin) of two tensors, got {describe(result)}"
                   + (f" of length {len(result)}" if isinstance(result, tuple | list) else ""))
    for name, t in zip(("cos", "sin"), result, strict=True):
        if not isinstance(t, torch.Tensor):
            raise Hint(exercise_id, f"{name} should be a torch.Tensor, got {describe(t)}")
        if not dense_tensor(t) and not t.is_complex():
            raise Hint(exercise_id, f"{name} holds no values that can be read (a meta or sparse tensor) — return "
                       "an ordinary tensor of cosines and sines")
        if t.dtype not in (torch.float32, torch.float64):
            raise Hint(exercise_id, f"{name} has dtype {t.dtype}; the cache holds float32 (or float64) values")
    return result[0].to(torch.float64), result[1].to(torch.float64)


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(((a - b).abs() <= atol).all())


@exercise("3.1")
def cos_sin_cache(build_cache: Callable) -> None:
    """Exercise 3.1: ``build_cache(theta, d_k, max_seq_len) -> (cos, sin)``, each (max_seq_len, d_k/2)."""
    ex = "3.1"
    refuse_library_object(ex, build_cache, EXERCISES[ex].refuses, EXERCISES[ex].task)
    for args in _cache_cases():
        cos, sin = _as_pair(ex, call_learner(ex, build_cache, *args))
        want = _angles(*args)
        theta, d_k, max_seq_len = args
        shape_hint = (f"one angle per pair and position: (max_seq_len, d_k/2) = {tuple(want.shape)} "
                      f"for theta={theta:g}, d_k={d_k}, max_seq_len={max_seq_len}")
        if cos.shape == (d_k // 2, max_seq_len) and d_k // 2 != max_seq_len:
            shape_hint = "transposed: rows are positions, columns are pairs — use torch.outer(positions, freqs)"
        elif cos.shape == (max_seq_len, d_k) and d_k > 1:
            shape_hint = f"there are d_k/2 = {d_k // 2} pairs, one angle each — not d_k = {d_k} columns"
        if cos.shape != want.shape or sin.shape != want.shape:
            raise Hint(ex, f"returned shape {tuple(cos.shape)} but expected {tuple(want.shape)} — {shape_hint}")
        # the comparison below allows 1e-4 + 1e-4·|value| and |value| ≤ 1: only what it rejects is diagnosed
        if _close(cos, want.cos(), atol=2e-4) and _close(sin, want.sin(), atol=2e-4):
            continue
        for mistake, hint in CACHE_MISTAKES:
            wrong_cos, wrong_sin = mistake(args)  # float64 tables of the right shape: they always run
            if _close(cos, wrong_cos) and _close(sin, wrong_sin):
                raise Hint(ex, hint)
        expect_close(ex, cos, want.cos(), "cos does not match cos(position · Θ^(−2k/d_k))", atol=1e-4)
        expect_close(ex, sin, want.sin(), "sin does not match sin(position · Θ^(−2k/d_k))", atol=1e-4)
    refuse_library_calls(ex, build_cache, EXERCISES[ex].refused_calls, EXERCISES[ex].task)
    passed(ex, "cos/sin caches match for 4 shapes (d_k = 2 … 64, one position … 100)")


# ---------------------------------------------------------------------------
# Exercise 3.2: rotating interleaved pairs


def _concatenated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotation done right, but the two halves concatenated instead of interleaved back."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def _tiled(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """cos/sin tiled to d_k with .repeat/cat, so dimension j gets angle j mod d_k/2, not j // 2."""
    partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * torch.cat((cos, cos), dim=-1) + partner * torch.cat((sin, sin), dim=-1)


ROTATION_MISTAKES = (
    (lambda x, c, s: functional.apply_rope(x, c, s, "half"),
     "wrong RoPE pairing: you rotated dimension k with k + d_k/2 (Hugging Face Llama's half-split); "
     "this exercise pairs neighbours (0, 1), (2, 3), … — take x[..., 0::2] and x[..., 1::2]"),
    (lambda x, c, s: functional.apply_rope(x, c, -s),
     "your rotation turns the wrong way (by −θ): the new pair is (x1·cos − x2·sin, x1·sin + x2·cos)"),
    (lambda x, c, s: functional.apply_rope(x, s, c),
     "cos and sin are swapped: x1·cos − x2·sin for the first member of each pair, x1·sin + x2·cos "
     "for the second"),
    (_concatenated,
     "each pair is rotated correctly, but the results are concatenated ([all firsts, all seconds]); "
     "put every pair back in place: torch.stack((first, second), dim=-1).flatten(-2)"),
    (_tiled,
     "the two members of a pair must share one angle: expand cos/sin with repeat_interleave(2, dim=-1) "
     "(c0, c0, c1, c1, …), not .repeat or torch.cat (c0, c1, …, c0, c1, …)"),
)


def _wrong_rotation(mistake: Callable, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """A typical mistake's rotation in float64, or nan where it cannot run on these shapes (then it matches
    nothing): the checker's own variants must never crash a check."""
    try:
        return mistake(x, cos, sin).to(torch.float64)
    except (RuntimeError, IndexError, ValueError):
        return torch.full((), float("nan"), dtype=torch.float64)


def _applied_angles(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The angle by which each interleaved pair of ``x`` was turned to give ``y``, in [−π, π]."""
    x1, x2, y1, y2 = x[..., 0::2], x[..., 1::2], y[..., 0::2], y[..., 1::2]
    return torch.atan2(x1 * y2 - x2 * y1, x1 * y1 + x2 * y2)


def _wrong_positions(x: torch.Tensor, got: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """True if every token was turned by the angles of *some* position, and some token not by its own."""
    if got.shape != x.shape:
        return False
    x64, got64 = x.to(torch.float64), got.to(torch.float64)
    if not _close(x64.norm(dim=-1), got64.norm(dim=-1), atol=1e-3):
        return False

    def gap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # the largest angle between, over the pairs
        turn = (a - b).remainder(2 * math.pi)
        return torch.minimum(turn, 2 * math.pi - turn).amax(dim=-1)

    applied = _applied_angles(x64, got64)  # (..., T, d_k/2)
    angles = torch.atan2(sin, cos).to(torch.float64)  # (..., T, d_k/2), broadcast against x's pairs
    if bool((gap(applied, torch.broadcast_to(angles, applied.shape)) < 1e-3).all()):
        return False  # every token at its own angles: whatever is wrong, it is not the positions
    table = angles.reshape(-1, cos.shape[-1])  # (rows, d_k/2)
    return bool((gap(applied.unsqueeze(-2), table).amin(dim=-1) < 1e-3).all())  # (..., T, rows) → (..., T)


def _rotation_tolerance(x: torch.Tensor) -> tuple[float, float]:
    """(atol, rtol) for a correct rotation of ``x`` in x's own dtype, against the exact one rounded once.

    With u the dtype's unit roundoff, each output x1·cos − x2·sin computed in x's dtype carries
    the rounding of cos and sin to that dtype, of each product and of the sum: at most
    2u(|x1·cos| + |x2·sin|) + u·|out| ≤ (2√2 + 1)·u·‖(x1, x2)‖, and the exact answer's own
    rounding adds u·‖(x1, x2)‖ more: 6u times the largest pair's length bounds both, however
    the pair's terms cancel (the size of the result, which ``rtol`` scales, does not).
    Never below ``tolerance``'s for the dtype.
    """
    atol, rtol = tolerance(x.dtype)
    largest_pair = float(x.detach().double().unflatten(-1, (-1, 2)).norm(dim=-1).amax())
    return max(atol, 6 * torch.finfo(x.dtype).eps / 2 * largest_pair), rtol


def _exact_rotation(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotation in float64, rounded once to x's dtype: what ``_rotation_tolerance`` measures from."""
    return functional.apply_rope(x.double(), cos.double(), sin.double()).to(x.dtype)


def _packed_positions(gen: torch.Generator, seq_len: int = 6) -> torch.Tensor:
    """Positions (2, seq_len) of two packed rows, drawn afresh; the kinds stay, the values do not.

    Row 0 starts late, in the middle of a document (a gap before it: its first position is
    1 … 39), then a new document restarts at 0, so positions fall back (not monotone). Row 1
    holds two whole documents, each from 0, so positions repeat. The split points are drawn
    (each document 2 … seq_len − 2 tokens), so a rotation that takes row t of cos/sin for
    anything but token t's own position, or one row's positions for every row, is caught.
    """

    def pick(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=gen))

    late, split0, split1 = pick(1, 39), pick(2, seq_len - 2), pick(2, seq_len - 2)
    row0 = list(range(late, late + split0)) + list(range(seq_len - split0))
    row1 = list(range(split1)) + list(range(seq_len - split1))
    return torch.tensor([row0, row1])


def _rotation_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Inputs drawn afresh on every check; the kinds (heads, packing, one pair, float16) stay."""
    gen = fresh_generator()
    theta = float(torch.randint(500, 50001, (), generator=gen))  # the tables' Θ is drawn too
    d = 2 * int(torch.randint(2, 9, (), generator=gen))  # d_k from 4 to 16
    angles = functional.rope_angles(theta, d, 64)  # (64, d/2)
    start = int(torch.randint(1, 40, (), generator=gen))
    packed = _packed_positions(gen)
    cases = []
    x = torch.randn(2, 5, d, generator=gen)
    cases.append((f"x (2, 5, {d}), positions 0 … 4", x, angles[:5].cos(), angles[:5].sin()))
    x = torch.randn(6, 2, generator=gen)
    positions = torch.randperm(64, generator=gen)[:6].sort().values
    a = functional.rope_angles(theta, 2, 64)[positions]  # (6, 1)
    cases.append(("x (6, 2), one pair, positions up to 63", x, a.cos(), a.sin()))
    x = torch.randn(2, 3, 6, d, generator=gen)
    a = angles[packed].unsqueeze(1)  # (2, 1, 6, d/2): the same positions for every head
    cases.append((f"x (2 batch, 3 heads, 6, {d}), packed positions", x, a.cos(), a.sin()))
    x = torch.randn(4, d, generator=gen).to(torch.float16)
    cases.append((f"float16 x (4, {d})", x, angles[start:start + 4].cos(), angles[start:start + 4].sin()))
    return [(name, x, c.to(torch.float32), s.to(torch.float32)) for name, x, c, s in cases]


ROTATION_IN_PLACE = {
    "x": "build a new tensor instead (the caller still needs x, e.g. the keys after the queries)",
    "cos": "the cos/sin cache is shared by every layer and head: read it, never write into it",
    "sin": "the cos/sin cache is shared by every layer and head: read it, never write into it",
}


def _rotation_contract(rotate: Callable) -> None:
    """3.2 beyond its cases: a bfloat16 x (bfloat16 back), the gradients to x, cos and sin, a second call."""
    gen = fresh_generator()
    d, T = 2 * int(torch.randint(2, 9, (), generator=gen)), int(torch.randint(3, 9, (), generator=gen))
    positions = torch.randperm(64, generator=gen)[:T]  # shuffled: row t of cos/sin is token t's own position
    angles = functional.rope_angles(float(torch.randint(500, 50001, (), generator=gen)), d, 64)[positions]
    cos, sin = angles.cos().float(), angles.sin().float()
    x, again = torch.randn(2, T, d, generator=gen), torch.randn(2, T, d, generator=gen)
    half = x.bfloat16()
    atol, rtol = _rotation_tolerance(half)
    expect_close("3.2", call_learner("3.2", rotate, half, cos, sin, arg_names=("x", "cos", "sin"),
                                     in_place=ROTATION_IN_PLACE),
                 _exact_rotation(half, cos, sin), f"rotated pairs do not match [case: bfloat16 x (2, {T}, {d})]",
                 atol=atol, rtol=rtol, dtype_hint="return x's dtype: cast cos and sin to x.dtype before multiplying")
    expect_input_gradients("3.2", rotate, (x, cos, sin), functional.apply_rope, ("x", "cos", "sin"))
    expect_repeatable("3.2", rotate, (x, cos, sin), functional.apply_rope(x, cos, sin), (again, cos, sin),
                      functional.apply_rope(again, cos, sin))


@exercise("3.2")
def rotate_pairs(rotate: Callable) -> None:
    """Exercise 3.2: ``rotate(x, cos, sin)`` rotates interleaved pairs of x (..., T, d_k)."""
    ex = "3.2"
    refuse_library_object(ex, rotate, EXERCISES[ex].refuses, EXERCISES[ex].task)
    for name, x, cos, sin in _rotation_cases():
        # the exact rotation, rounded once to x's dtype; before the learner's call, which gets copies of x, cos, sin
        want = _exact_rotation(x, cos, sin)
        atol, rtol = _rotation_tolerance(x)
        got = call_learner(ex, rotate, x, cos, sin, arg_names=("x", "cos", "sin"), in_place=ROTATION_IN_PLACE)
        if dense_tensor(got) and got.shape == want.shape and got.dtype == want.dtype:
            got64, want64 = got.detach().to(torch.float64), want.to(torch.float64)
            if ((got64 - want64).abs() > atol + rtol * want64.abs()).any():  # expect_close's test, below
                for mistake, hint in ROTATION_MISTAKES:
                    if _close(got64, _wrong_rotation(mistake, x, cos, sin), atol=atol):
                        raise Hint(ex, f"{hint} [case: {name}]")
                if _wrong_positions(x, got, cos, sin):
                    raise Hint(ex, f"each token was rotated by the angles of another position [case: {name}] — "
                               "row t of cos/sin belongs to token t: cos (..., seq_len, d_k/2) must broadcast "
                               "against x[..., 0::2] (..., seq_len, d_k/2) without transposing or indexing it")
        expect_close(
            ex, got, want, f"rotated pairs do not match [case: {name}]", atol=atol, rtol=rtol,
            shape_hint=f"the output must have x's shape [case: {name}]; cos/sin (..., seq_len, d_k/2) line up "
                       "with x[..., 0::2] — did a dimension get added or transposed when broadcasting?",
            dtype_hint=f"return x's dtype [case: {name}]: cast cos and sin to x.dtype before multiplying",
        )
    _rotation_contract(rotate)
    refuse_library_calls(ex, rotate, EXERCISES[ex].refused_calls, EXERCISES[ex].task)
    refuse_library_ops(ex, rotate, (x, cos, sin), EXERCISES[ex].refused_ops, EXERCISES[ex].task)
    passed(ex, "interleaved rotation matches in 4 cases (heads, packing, one pair, float16)")


# ---------------------------------------------------------------------------
# Exercise 3.3: which pairs carry long-range information?

LONG_RANGE_D_K, LONG_RANGE_CONTEXT, LONG_RANGE_THETA = 64, 2048, 10000.0


def first_slow_pair(d_k: int = LONG_RANGE_D_K, context: int = LONG_RANGE_CONTEXT,
                    theta: float = LONG_RANGE_THETA) -> int:
    """Index k (from 0) of the first pair whose wavelength 2π/θ_k exceeds ``context``."""
    per_position = functional.rope_angles(theta, d_k, 2)[1]  # (d_k/2,)
    slow = torch.nonzero(2 * math.pi / per_position > context)
    return int(slow[0]) if len(slow) else d_k // 2


@exercise("3.3")
def long_range_pair(answer) -> None:
    """Exercise 3.3: the index of the first pair whose wavelength exceeds the context (d_k=64, 2048)."""
    ex = "3.3"
    right = first_slow_pair()
    n_pairs = LONG_RANGE_D_K // 2
    value = finite_number(answer)
    if value is None or value != int(value):
        raise Hint(ex, number_hint(answer, f"one whole number, a pair index k from 0 to {n_pairs - 1}"))
    answer = int(value)
    why = ("pair k turns by Θ^(−2k/d_k) per position, so its wavelength is 2π·Θ^(2k/d_k); "
           "solve 2π·10000^(2k/64) > 2048 for the smallest whole k")
    if answer == right + 1:
        raise Hint(ex, f"off by one — count pairs from 0, as section 2's formula does (pair 0 turns one radian per "
                   f"position). {why}")
    if answer == 0:
        raise Hint(ex, "pair 0 is the fastest clock: it turns one radian per position and wraps around every "
                   "2π ≈ 6.3 positions, so it cannot tell distance 3 from distance 3 + 6.28·n. " + why)
    if answer == n_pairs - 1:
        raise Hint(ex, f"pair {n_pairs - 1} is the slowest clock, but not the first one that is slow enough. {why}")
    if not 0 <= answer < n_pairs:
        raise Hint(ex, f"d_k = 64 has {n_pairs} pairs, numbered 0 … {n_pairs - 1}; got {answer}")
    if answer != right:
        raise Hint(ex, f"not quite. {why}")
    passed(ex, f"pairs {right} … {n_pairs - 1} never wrap within {LONG_RANGE_CONTEXT} positions (long range)")
