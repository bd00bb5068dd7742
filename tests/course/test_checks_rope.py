"""The RoPE checkers pass correct answers and name each typical mistake with its own hint."""

import itertools

import numpy as np
import pytest
import torch

from prenorm_lib import functional
from prenorm_lib.checks import Hint
from prenorm_lib.checks import rope as check
from prenorm_lib.checks.core import NotDone

pytest_plugins = ["learner_wire"]

# ---------------------------------------------------------------- 3.1: cos/sin cache


def cache_right(theta, d_k, max_seq_len):
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def cache_exponent_k(theta, d_k, max_seq_len):
    inv_freq = theta ** (-torch.arange(d_k // 2, dtype=torch.float32) / d_k)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def cache_no_division(theta, d_k, max_seq_len):
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos(), angles.sin()


def cache_positive_exponent(theta, d_k, max_seq_len):
    inv_freq = theta ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def cache_from_one(theta, d_k, max_seq_len):
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
    angles = torch.outer(torch.arange(1, max_seq_len + 1, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def cache_angles(theta, d_k, max_seq_len):
    angles = functional.rope_angles(theta, d_k, max_seq_len).float()
    return angles, angles


def cache_swapped(theta, d_k, max_seq_len):
    cos, sin = cache_right(theta, d_k, max_seq_len)
    return sin, cos


def cache_full_width(theta, d_k, max_seq_len):
    cos, sin = cache_right(theta, d_k, max_seq_len)
    return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)


def cache_transposed(theta, d_k, max_seq_len):
    cos, sin = cache_right(theta, d_k, max_seq_len)
    return cos.T, sin.T


def cache_one_tensor(theta, d_k, max_seq_len):
    return cache_right(theta, d_k, max_seq_len)[0]


def cache_crashes(theta, d_k, max_seq_len):
    return torch.zeros(3)[d_k]


def cache_unfinished(theta, d_k, max_seq_len):
    raise NotImplementedError("Exercise 3.1: build the cos/sin cache")


def test_cache_right_passes(via, capsys):
    check.cos_sin_cache(via(cache_right))
    assert capsys.readouterr().out.startswith("Exercise 3.1 passed: ")


def test_cache_in_float64_passes(via, capsys):
    def in_float64(theta, d_k, max_seq_len):
        speeds = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), speeds)
        return angles.cos(), angles.sin()  # float64 is accepted

    check.cos_sin_cache(via(in_float64))
    assert "passed" in capsys.readouterr().out


def cache_from_library(theta, d_k, max_seq_len):
    angles = functional.rope_angles(theta, d_k, max_seq_len)
    return angles.cos(), angles.sin()


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (cache_exponent_k, "arange(0, d_k, 2) / d_k"),
        (cache_no_division, "divide by d_k"),
        (cache_positive_exponent, "frequencies increase"),
        (cache_from_one, "off by one"),
        (cache_angles, "angles themselves"),
        (cache_swapped, "swapped"),
        (cache_full_width, "pairs, one angle each — not d_k ="),
        (cache_transposed, "transposed"),
        (cache_one_tensor, "tuple (cos, sin)"),
        (cache_crashes, "raised IndexError"),
        (functional.rope_angles, "that is the library's own `prenorm_lib.functional.rope_angles`"),
        (cache_from_library, "your code calls `rope_angles`, the library's own implementation"),
    ],
)
def test_cache_mistakes_get_their_hint(wrong, words, via):
    with pytest.raises(Hint) as info:
        check.cos_sin_cache(via(wrong))
    assert str(info.value).startswith("Exercise 3.1: ")
    assert words in str(info.value)


def test_cache_unfinished_is_not_done(via, capsys):
    check.cos_sin_cache(via(cache_unfinished))
    assert capsys.readouterr().out.startswith("Exercise 3.1 is not done yet — ")
    with pytest.raises(NotDone):
        check.cos_sin_cache.core(via(cache_unfinished))


# ---------------------------------------------------------------- 3.2: rotation


def rotate_right(x, cos, sin):
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def rotate_complex(x, cos, sin):
    pairs = torch.complex(x[..., 0::2].float(), x[..., 1::2].float()) * torch.complex(cos, sin)
    return torch.view_as_real(pairs).flatten(-2).to(x.dtype)


def rotate_half(x, cos, sin):
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rotate_backwards(x, cos, sin):
    return rotate_right(x, cos, -sin)


def rotate_swapped(x, cos, sin):
    return rotate_right(x, sin, cos)


def rotate_concatenated(x, cos, sin):
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rotate_tiled(x, cos, sin):
    cos, sin = cos.to(x.dtype).repeat(*([1] * (cos.ndim - 1)), 2), sin.to(x.dtype).repeat(*([1] * (sin.ndim - 1)), 2)
    partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + partner * sin


def rotate_first_position_only(x, cos, sin):
    return rotate_right(x, cos[..., :1, :], sin[..., :1, :])


def rotate_reversed_positions(x, cos, sin):
    return rotate_right(x, cos.flip(-2), sin.flip(-2))


def rotate_first_row_for_every_row(x, cos, sin):
    """Flattens cos/sin to (rows, d_k/2) and takes the first seq_len rows: batch row 0's positions everywhere."""
    seq_len = x.shape[-2]
    return rotate_right(x, cos.reshape(-1, cos.shape[-1])[:seq_len], sin.reshape(-1, sin.shape[-1])[:seq_len])


def rotate_ignoring_packing(x, cos, sin):
    """Rebuilds the table for positions 0 … seq_len − 1 whenever cos has batch dimensions (packing ignored)."""
    if cos.ndim > 2:
        table = functional.rope_angles(10000.0, x.shape[-1], x.shape[-2])
        cos, sin = table.cos(), table.sin()
    return rotate_right(x, cos, sin)


@pytest.mark.parametrize("wrong", [rotate_first_row_for_every_row, rotate_ignoring_packing])
def test_packing_mistakes_are_caught_on_the_packed_case(wrong, via):
    for _ in range(3):  # the packed positions are drawn per check: each draw must catch them
        with pytest.raises(Hint, match=r"^Exercise 3\.2: .*\[case: x \(2 batch, 3 heads, 6, \d+\), packed positions\]"):
            check.rotate_pairs(via(wrong))


def test_packed_positions_are_drawn_with_their_kinds():
    seen = set()
    for _ in range(200):
        positions = check._packed_positions(check.fresh_generator())
        assert positions.shape == (2, 6) and int(positions.min()) >= 0 and int(positions.max()) < 64
        row0, row1 = positions.tolist()
        assert row0[0] > 0, f"{row0}: row 0 must start late (mid-document)"
        assert 0 in row0 and any(b < a for a, b in itertools.pairwise(row0)), f"{row0}: no restart at 0"
        assert row1[0] == 0 and len(set(row1)) < len(row1), f"{row1}: two whole documents repeat positions"
        assert row0 != row1 and row0 != [0, 1, 2, 3, 0, 1]
        seen.add((tuple(row0), tuple(row1)))
    assert len(seen) > 50, "the packed positions barely vary"


def rotate_extra_dim(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos.to(x.dtype).unsqueeze(0), sin.to(x.dtype).unsqueeze(0)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def rotate_float32_out(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def rotate_in_place(x, cos, sin):
    out = rotate_right(x, cos, sin)
    x.copy_(out)
    return out


def test_rotation_right_passes(via, capsys):
    check.rotate_pairs(via(rotate_right))
    assert capsys.readouterr().out.startswith("Exercise 3.2 passed: ")


def test_rotation_by_complex_numbers_passes(via, capsys):
    check.rotate_pairs(via(rotate_complex))
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (rotate_half, "wrong RoPE pairing"),
        (rotate_backwards, "(by −θ)"),
        (rotate_swapped, "cos and sin are swapped"),
        (rotate_concatenated, "concatenated"),
        (rotate_tiled, "repeat_interleave"),
        (rotate_first_position_only, "angles of another position"),
        (rotate_reversed_positions, "angles of another position"),
        (rotate_extra_dim, "broadcasting"),
        (rotate_float32_out, "cast cos and sin to x.dtype"),
        (rotate_in_place, "in place"),
        (functional.apply_rope, "that is the library's own `prenorm_lib.functional.apply_rope`"),
        (lambda x, cos, sin: functional.apply_rope(x, cos, sin), "your code calls `apply_rope`"),
    ],
)
def test_rotation_mistakes_get_their_hint(wrong, words, via):
    with pytest.raises(Hint) as info:
        check.rotate_pairs(via(wrong))
    assert str(info.value).startswith("Exercise 3.2: ")
    assert words in str(info.value)



def test_a_rotation_at_its_own_slightly_wrong_angles_is_not_told_the_positions_are_wrong(via):
    """cos and sin rounded to float16 in a float32 rotation: every token turned by its own angles to within
    1e-3 rad, not close enough for float32, and no position was swapped, so not "another position"."""

    def rotate_rounded_table(x, cos, sin):
        return rotate_right(x, cos.half().float(), sin.half().float())

    with pytest.raises(Hint) as info:
        check.rotate_pairs(via(rotate_rounded_table))
    assert "rotated pairs do not match" in str(info.value) and "another position" not in str(info.value)


# ---------------------------------------------------------------- 3.3: long-range pairs


def test_first_slow_pair_is_21():
    assert check.first_slow_pair() == 21


@pytest.mark.parametrize("answer", [21, 21.0, torch.tensor(21), np.int64(21)])
def test_long_range_right_answer_passes(answer, via, capsys):
    check.long_range_pair(via(answer))
    assert capsys.readouterr().out.startswith("Exercise 3.3 passed: ")


@pytest.mark.parametrize(
    ("answer", "words"),
    [(22, "off by one"), (0, "fastest clock"), (31, "slowest clock"), (40, "numbered 0"), (12, "not quite"),
     ("late pairs", "one whole number"), (20.5, "one whole number")],
)
def test_long_range_wrong_answers(answer, words, via):
    with pytest.raises(Hint) as info:
        check.long_range_pair(via(answer))
    assert str(info.value).startswith("Exercise 3.3: ")
    assert words in str(info.value)


def test_long_range_placeholder_is_not_done(capsys):
    check.long_range_pair(...)
    assert capsys.readouterr().out.startswith("Exercise 3.3 is not done yet — replace each `...`")
