"""RoPE against two formulations written here: RoFormer's complex numbers and Llama's rotate_half.

Plus the properties the notebook claims: rotations keep norms, scores depend only on the
offset m − n, the explicit block-diagonal matrix gives the same result, and the two
pairings are one rotation in two storage orders.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

from prenorm_lib import functional
from prenorm_lib.model import TransformerLM
from prenorm_lib.rope import (
    YARN_ALPHA,
    YARN_BETA,
    RotaryPositionalEmbedding,
    complex_rotations,
    extend_context,
    interleaved_to_half_permutation,
    ntk_theta,
    rotate_complex,
    rotation_matrix,
    yarn_qk_scale,
    yarn_speeds,
)

seeds = st.integers(0, 2**16)
even_d_k = st.integers(1, 16).map(lambda half: 2 * half)
thetas = st.sampled_from([100.0, 10000.0, 500000.0])


def inverse_frequencies(theta: float, d_k: int) -> torch.Tensor:
    """theta^(-2k/d_k) for k = 0 … d_k/2 − 1, in float64."""
    return 1.0 / theta ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)


def rope_complex(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """RoFormer's view: pair (2k, 2k+1) is the complex number x_2k + i·x_2k+1, times e^{i·m·θ_k}."""
    d_k = x.shape[-1]
    angles = positions.to(torch.float64)[..., None] * inverse_frequencies(theta, d_k)  # (..., T, d_k/2)
    turn = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d_k // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)


def rope_rotate_half(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Hugging Face Llama's view: x·cos + rotate_half(x)·sin with cos, sin repeated over both halves."""
    angles = positions.to(torch.float64)[..., None] * inverse_frequencies(theta, x.shape[-1])
    angles = torch.cat((angles, angles), dim=-1)  # (..., T, d_k)
    x1, x2 = x.to(torch.float64).chunk(2, dim=-1)
    rotated_half = torch.cat((-x2, x1), dim=-1)
    return (x.to(torch.float64) * angles.cos() + rotated_half * angles.sin()).to(x.dtype)


@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    seq_len=st.integers(1, 12),
    d_k=even_d_k,
    theta=thetas,
    offset=st.integers(0, 400),
    seed=seeds,
)
def test_interleaved_matches_complex_multiplication(lead, seq_len, d_k, theta, offset, seed):
    torch.manual_seed(seed)
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len=512)
    x = torch.randn(*lead, seq_len, d_k)
    positions = torch.arange(offset, offset + seq_len)
    assert_close(rope(x, positions), rope_complex(x, positions, theta), rtol=1e-5, atol=1e-5)


@given(seq_len=st.integers(1, 12), d_k=even_d_k, theta=thetas, offset=st.integers(0, 400), seed=seeds)
def test_half_pairing_matches_llama_rotate_half(seq_len, d_k, theta, offset, seed):
    torch.manual_seed(seed)
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len=512, pairing="half")
    x = torch.randn(2, seq_len, d_k)
    positions = torch.arange(offset, offset + seq_len)
    assert_close(rope(x, positions), rope_rotate_half(x, positions, theta), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@given(d_k=even_d_k, seed=seeds)
def test_every_pair_keeps_its_length(pairing, d_k, seed):
    torch.manual_seed(seed)
    rope = RotaryPositionalEmbedding(10000.0, d_k, max_seq_len=256, pairing=pairing)
    x = torch.randn(3, 20, d_k)
    out = rope(x, torch.randint(0, 256, (20,)))

    def pair_lengths(t):
        first, second = (t[..., 0::2], t[..., 1::2]) if pairing == "interleaved" else t.chunk(2, dim=-1)
        return torch.hypot(first, second)

    assert_close(pair_lengths(out), pair_lengths(x))
    assert_close(out.norm(dim=-1), x.norm(dim=-1))


@given(m=st.integers(0, 1023), n=st.integers(0, 1023), shift=st.integers(0, 1024), seed=seeds)
def test_score_depends_only_on_relative_position(m, n, shift, seed):
    """<RoPE(q, m), RoPE(k, n)> = <RoPE(q, m + s), RoPE(k, n + s)> for every shift s."""
    torch.manual_seed(seed)
    rope = RotaryPositionalEmbedding(10000.0, 32, max_seq_len=2048)
    q, k = torch.randn(1, 32), torch.randn(1, 32)

    def score(query_position, key_position):
        rotated_q = rope(q, torch.tensor([query_position]))
        rotated_k = rope(k, torch.tensor([key_position]))
        return (rotated_q * rotated_k).sum()

    assert_close(score(m + shift, n + shift), score(m, n), rtol=1e-4, atol=1e-4)


def test_score_does_change_with_relative_position():
    """The contrast that gives the previous test teeth: a different offset, a different score."""
    rope = RotaryPositionalEmbedding(10000.0, 32, max_seq_len=64)
    q = k = torch.randn(1, 32)
    scores = [(rope(q, torch.tensor([m])) * rope(k, torch.tensor([0]))).sum() for m in range(4)]
    assert len({round(float(s), 4) for s in scores}) == 4


@pytest.mark.parametrize("position", [0, 1, 2, 17, 100, 1000])
def test_equals_explicit_block_diagonal_rotation(position):
    rope = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=1024)
    x = torch.randn(5, 1, 8)  # five vectors, each a sequence of length 1
    R = rotation_matrix(10000.0, 8, position)  # (d_k, d_k)
    expected = x @ R.T  # R x for each row vector
    assert_close(rope(x, torch.tensor([position])), expected, rtol=1e-5, atol=1e-5)


def test_rotation_matrix_is_block_diagonal_and_orthogonal():
    R = rotation_matrix(10000.0, 8, 3)
    off_blocks = R.clone()
    for k in range(0, 8, 2):
        off_blocks[k : k + 2, k : k + 2] = 0
    assert torch.equal(off_blocks, torch.zeros(8, 8))
    assert_close(R @ R.T, torch.eye(8))


@given(d_k=even_d_k, offset=st.integers(0, 100), seed=seeds)
def test_interleaved_and_half_agree_after_permutation(d_k, offset, seed):
    torch.manual_seed(seed)
    interleaved = RotaryPositionalEmbedding(10000.0, d_k, max_seq_len=128, pairing="interleaved")
    half = RotaryPositionalEmbedding(10000.0, d_k, max_seq_len=128, pairing="half")
    perm = interleaved_to_half_permutation(d_k)
    x = torch.randn(2, 7, d_k)
    positions = torch.arange(offset, offset + 7)
    assert_close(half(x[..., perm], positions), interleaved(x, positions)[..., perm])


def test_the_two_pairings_differ_without_the_permutation():
    x = torch.randn(1, 4, 8)
    interleaved = RotaryPositionalEmbedding(10000.0, 8, 16, pairing="interleaved")
    half = RotaryPositionalEmbedding(10000.0, 8, 16, pairing="half")
    assert (interleaved(x) - half(x)).abs().max() > 1e-2


def test_permutation_is_evens_then_odds():
    assert interleaved_to_half_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


@pytest.mark.parametrize("positions_shape", ["(B, 1, T)", "(T,)"])
def test_positions_broadcast_over_batch_and_heads(positions_shape):
    B, H, T, d_k = 2, 3, 5, 8
    rope = RotaryPositionalEmbedding(10000.0, d_k, max_seq_len=64)
    x = torch.randn(B, H, T, d_k)
    if positions_shape == "(T,)":
        positions = torch.arange(10, 10 + T)
    else:
        positions = torch.stack((torch.arange(T), torch.arange(20, 20 + T)))[:, None, :]  # (B, 1, T)
    out = rope(x, positions)
    assert out.shape == x.shape
    assert_close(out, rope_complex(x, positions.expand(B, H, T), 10000.0), rtol=1e-5, atol=1e-5)


def test_default_positions_are_zero_to_seq_len():
    rope = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=16)
    x = torch.randn(2, 6, 8)
    assert torch.equal(rope(x), rope(x, torch.arange(6)))


def test_arbitrary_positions_equal_slicing_a_longer_sequence():
    """Generation at an offset or packed rows: gathering positions = rotating the full sequence, then slicing."""
    rope = RotaryPositionalEmbedding(10000.0, 16, max_seq_len=64)
    full = torch.randn(2, 40, 16)
    rotated_full = rope(full)  # positions 0 … 39
    picked = torch.tensor([3, 4, 5, 17, 18, 39, 0])  # neither contiguous nor sorted
    assert_close(rope(full[:, picked], picked), rotated_full[:, picked])


def test_packed_sequences_restart_their_positions():
    rope = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=16)
    first, second = torch.randn(3, 8), torch.randn(4, 8)
    packed = torch.cat((first, second))  # (7, 8): two documents in one row
    positions = torch.tensor([0, 1, 2, 0, 1, 2, 3])
    out = rope(packed, positions)
    assert_close(out[:3], rope(first))
    assert_close(out[3:], rope(second))


def test_cos_sin_cache_is_not_saved_in_the_state_dict():
    rope = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=16)
    assert dict(rope.state_dict()) == {}
    assert {name for name, _ in rope.named_buffers()} == {"cos", "sin"}
    assert list(rope.parameters()) == []


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_position_zero_is_the_identity(pairing):
    rope = RotaryPositionalEmbedding(10000.0, 12, max_seq_len=8, pairing=pairing)
    x = torch.randn(4, 1, 12)
    assert torch.equal(rope(x, torch.tensor([0])), x)


# ---- the complex-number form (Meta's reference code) --------------------------------------


@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seq_len=st.integers(1, 12), d_k=even_d_k,
       theta=thetas, offset=st.integers(0, 400), seed=seeds)
def test_complex_form_equals_the_elementwise_real_form(lead, seq_len, d_k, theta, offset, seed):
    torch.manual_seed(seed)
    x = torch.randn(*lead, seq_len, d_k)
    positions = torch.arange(offset, offset + seq_len)
    rotations = complex_rotations(theta, d_k, 512)[positions]  # (seq_len, d_k/2)
    angles = functional.rope_angles(theta, d_k, 512)[positions]  # (seq_len, d_k/2)
    expected = functional.apply_rope(x, angles.cos().float(), angles.sin().float())  # the real elementwise form
    assert_close(rotate_complex(x, rotations), expected, rtol=1e-5, atol=1e-5)


def test_module_gives_the_real_form_forward_and_backward():
    """The module rotates interleaved pairs as complex numbers: the same numbers as the real form, gradients too."""
    rope = RotaryPositionalEmbedding(10000.0, 16, max_seq_len=64)
    x = torch.randn(3, 40, 4, 16).transpose(1, 2).requires_grad_(True)  # (B, H, T, d_k), laid out as split heads
    positions = torch.arange(5, 45)
    real = functional.apply_rope(x, rope.cos[positions], rope.sin[positions])
    mine = rope(x, positions)
    assert_close(mine, real, rtol=0, atol=1e-6)
    upstream = torch.randn_like(real)
    (grad_real,) = torch.autograd.grad(real, x, upstream)
    (grad_mine,) = torch.autograd.grad(mine, x, upstream)
    assert_close(grad_mine, grad_real, rtol=0, atol=1e-6)


def test_complex_form_copes_with_strides_a_complex_view_cannot_express():
    x = torch.randn(2, 5, 17)[..., 1:]  # odd storage offset: no complex view of it exists
    rotations = complex_rotations(10000.0, 16, 5)
    angles = functional.rope_angles(10000.0, 16, 5)
    assert_close(rotate_complex(x, rotations), functional.apply_rope(x, angles.cos().float(), angles.sin().float()))


@pytest.mark.parametrize("position", [0, 1, 5, 100, 1000])
def test_complex_form_equals_the_block_diagonal_matrix(position):
    x = torch.randn(4, 1, 16)
    rotations = complex_rotations(10000.0, 16, position + 1)[position : position + 1]  # (1, 8)
    assert_close(rotate_complex(x, rotations), x @ rotation_matrix(10000.0, 16, position).T, rtol=1e-5, atol=1e-5)


def test_complex_rotations_are_unit_numbers_at_the_rope_angles():
    rotations = complex_rotations(10000.0, 8, 50)
    assert rotations.shape == (50, 4) and rotations.dtype == torch.complex64
    assert_close(rotations.abs(), torch.ones(50, 4))
    angles = 7 * inverse_frequencies(10000.0, 8)  # position 7
    assert_close(torch.view_as_real(rotations[7]).double(), torch.stack((angles.cos(), angles.sin()), -1),
                 rtol=1e-6, atol=1e-6)


def test_complex_form_keeps_the_input_dtype():
    x = torch.randn(3, 8, dtype=torch.float16)
    out = rotate_complex(x, complex_rotations(10000.0, 8, 3))
    assert out.dtype == torch.float16
    assert_close(out.float(), rotate_complex(x.float(), complex_rotations(10000.0, 8, 3)), rtol=1e-3, atol=1e-3)


# ---- reading beyond the training length ---------------------------------------------------


def test_position_scale_turns_by_the_scaled_position():
    """Position interpolation: position m with scale 1/2 gets exactly the angles of position m/2."""
    x = torch.randn(2, 8)
    squeezed = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=64, position_scale=0.5)
    plain = RotaryPositionalEmbedding(10000.0, 8, max_seq_len=64)
    assert_close(squeezed(x, torch.tensor([10, 42])), plain(x, torch.tensor([5, 21])))
    assert (squeezed(x, torch.tensor([10, 42])) - plain(x, torch.tensor([10, 42]))).abs().max() > 1e-2


def test_ntk_theta_keeps_the_fastest_pair_and_interpolates_the_slowest():
    d_k, factor = 16, 2.0
    before = inverse_frequencies(10000.0, d_k)
    after = inverse_frequencies(ntk_theta(10000.0, d_k, factor), d_k)
    assert after[0] == before[0] == 1.0
    assert_close(after[-1], before[-1] / factor)
    assert torch.all(after[1:] < before[1:]) and torch.all(after[1:-1] > before[1:-1] / factor)
    assert ntk_theta(10000.0, d_k, 1.0) == 10000.0


def small_lm(positions: str = "rope") -> TransformerLM:
    return TransformerLM(40, 12, 16, 2, 4, 32, positions=positions)


def test_extended_model_agrees_with_the_original_inside_the_training_length():
    model = small_lm()
    longer = extend_context(model, 24)
    tokens = torch.randint(0, 40, (2, 24))
    assert longer.context_length == 24 and model.context_length == 12
    assert_close(longer(tokens)[:, :12], model(tokens[:, :12]))
    assert longer(tokens).shape == (2, 24, 40)
    with pytest.raises(ValueError, match="context_length=12"):
        model(tokens)  # the original is untouched
    assert longer.state_dict().keys() == model.state_dict().keys()


@pytest.mark.parametrize("positions", ["sinusoidal", "none"])
def test_models_without_rope_extend_without_rescaling(positions):
    model = small_lm(positions)
    longer = extend_context(model, 24)
    tokens = torch.randint(0, 40, (1, 24))
    assert_close(longer(tokens)[:, :12], model(tokens[:, :12]))
    with pytest.raises(ValueError, match="this model has none"):
        extend_context(model, 24, "ntk")


def test_interpolation_squeezes_positions_into_the_trained_range():
    longer = extend_context(small_lm(), 36, "interpolation")
    ropes = [block.attn.rope for block in longer.layers]
    assert all(r.position_scale == pytest.approx(1 / 3) and r.max_seq_len == 36 for r in ropes)
    expected = torch.cos(35 / 3 * inverse_frequencies(10000.0, 4)).float()  # position 35 turns as 35/3 did
    assert_close(ropes[0].cos[35], expected, rtol=1e-6, atol=1e-6)


def test_ntk_scaling_changes_theta_only():
    longer = extend_context(small_lm(), 24, "ntk")
    rope = longer.layers[0].attn.rope
    assert rope.theta == pytest.approx(ntk_theta(10000.0, 4, 2.0)) and rope.position_scale == 1.0


def test_extend_context_refuses_a_shorter_context():
    with pytest.raises(ValueError, match="context_length must be >= the model's context_length=12, got 8"):
        extend_context(small_lm(), 8)


# ---- the CS336 handout's angle ---------------------------------------------------------------


def test_the_module_matches_the_handouts_own_rope_test():
    """The handout's test_rope snapshot (spring 2025, tests/_snapshots/test_rope.npz), a few of its numbers.

    Its fixture: torch.manual_seed(4), x = randn(4, 12, 64), Θ = 10000, positions 0 … 11. These
    are output[0, 11, 2:10], pairs 1 to 4 at position 11. The handout's text (v1.0.2, §3.5.3)
    prints θ_{i,k} = i/Θ^{2k/d} for k from 1; its test follows i/Θ^{(2k−2)/d}, as the course does.
    """
    snapshot = torch.tensor([0.84364164, -2.2138076, -0.55039316, -1.3621452,
                             0.72741777, 0.4164139, 0.9333887, -2.2188501])
    torch.manual_seed(4)
    x = torch.randn(4, 12, 64)
    ours = RotaryPositionalEmbedding(10000.0, 64, 12)(x, torch.arange(12))
    assert_close(ours[0, 11, 2:10], snapshot, rtol=0, atol=1e-6)
    k = torch.arange(1, 33, dtype=torch.float64)  # the text's k ∈ {1, …, d/2}
    as_printed = torch.outer(torch.arange(12, dtype=torch.float64), 10000.0 ** (-2 * k / 64))  # i / Θ^(2k/d)
    printed = functional.apply_rope(x, as_printed.cos().float(), as_printed.sin().float())
    assert (printed[0, 11, 2:10] - snapshot).abs().max() > 0.1  # the formula as printed fails that test


# ---- partial RoPE (p-RoPE) -------------------------------------------------------------------


def p_rope_reference(x: torch.Tensor, positions: torch.Tensor, theta: float, p: float) -> torch.Tensor:
    """Barbero et al.'s p-RoPE written out: the first ⌊p·d/2⌋ pairs keep timescale Θ^(2k/d), the rest ∞."""
    d_k = x.shape[-1]
    kept = int(p * d_k // 2)
    timescale = [theta ** (2 * k / d_k) if k < kept else float("inf") for k in range(d_k // 2)]
    angles = positions.to(torch.float64)[..., None] / torch.tensor(timescale, dtype=torch.float64)
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d_k // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@given(p=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), d_k=st.sampled_from([4, 8, 16, 64]), seed=seeds)
def test_partial_rope_rotates_only_the_fastest_pairs(pairing, p, d_k, seed):
    torch.manual_seed(seed)
    x, positions = torch.randn(3, 9, d_k), torch.randint(0, 200, (9,))
    partial = RotaryPositionalEmbedding(10000.0, d_k, 200, rotated_fraction=p, pairing=pairing)
    if pairing == "interleaved":
        assert_close(partial(x, positions), p_rope_reference(x, positions, 10000.0, p), rtol=1e-5, atol=1e-5)
    else:  # the same rotation in the half-split storage order
        perm = interleaved_to_half_permutation(d_k)
        expected = p_rope_reference(x, positions, 10000.0, p)[..., perm]
        assert_close(partial(x[..., perm], positions), expected, rtol=1e-5, atol=1e-5)


def test_partial_rope_leaves_the_slow_pairs_alone_and_keeps_the_rest():
    x = torch.randn(5, 16)
    positions = torch.arange(5) * 37
    partial = RotaryPositionalEmbedding(10000.0, 16, 256, rotated_fraction=0.25)(x, positions)
    plain = RotaryPositionalEmbedding(10000.0, 16, 256)(x, positions)
    assert_close(partial[:, 4:], x[:, 4:], rtol=0, atol=0)  # pairs 2 … 7: not rotated, at every position
    assert_close(partial[:, :4], plain[:, :4])  # pairs 0 and 1: RoPE's own fastest clocks
    assert (partial[:, 4:] - plain[:, 4:]).abs().max() > 1e-2
    nothing = RotaryPositionalEmbedding(10000.0, 16, 256, rotated_fraction=0.0)(x, positions)
    assert_close(nothing, x, rtol=0, atol=0)  # p = 0 is no positions at all (NoPE)
    assert functional.rope_angles(10000.0, 16, 3, 0.75)[2].count_nonzero() == 6
    assert functional.rotated_pairs(16, 0.75) == 6 and functional.rotated_pairs(8, 0.5) == 2


@pytest.mark.parametrize(("fraction", "error"), [(1.5, ValueError), (-0.1, ValueError), ("half", TypeError),
                                                 (True, TypeError)])
def test_rotated_fraction_must_be_a_share(fraction, error):
    with pytest.raises(error, match="rotated_fraction must"):
        RotaryPositionalEmbedding(10000.0, 8, 16, rotated_fraction=fraction)


# ---- YaRN (Peng et al. 2023, §3.2 and §3.4) -----------------------------------------------------


def yarn_by_hand(theta: float, d_k: int, s: float, L: int, alpha: float, beta: float) -> list[float]:
    """Eqs. 13, 17, 18, 20 of the paper, one pair at a time, in plain Python."""
    speeds = []
    for d in range(d_k // 2):
        theta_d = theta ** (-2 * d / d_k)
        r = L / (2 * math.pi / theta_d)  # r(d) = L / λ_d
        gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
        speeds.append((1 - gamma) * theta_d / s + gamma * theta_d)
    return speeds


@pytest.mark.parametrize(("d_k", "s", "L", "alpha", "beta"),
                         [(16, 2.0, 32, 1.0, 32.0), (16, 4.0, 32, 1.0, 4.0), (128, 16.0, 4096, 1.0, 32.0),
                          (64, 8.0, 2048, 2.0, 16.0)])
def test_yarn_speeds_are_the_papers_ntk_by_parts(d_k, s, L, alpha, beta):
    ours = yarn_speeds(10000.0, d_k, s, L, alpha, beta)
    assert ours.tolist() == pytest.approx(yarn_by_hand(10000.0, d_k, s, L, alpha, beta), rel=1e-12)


def test_yarn_keeps_fast_pairs_interpolates_slow_ones_and_blends_between():
    # Llama's values at L = 4096, d = 128: pairs turning > 32 times keep their speed, < once are θ/s.
    d_k, s, L = 128, 8.0, 4096
    plain = functional.rope_angles(10000.0, d_k, 2)[1]
    turns = L * plain / (2 * math.pi)
    ours = yarn_speeds(10000.0, d_k, s, L)
    assert torch.equal(ours[turns > YARN_BETA], plain[turns > YARN_BETA])
    assert_close(ours[turns < YARN_ALPHA], plain[turns < YARN_ALPHA] / s, rtol=1e-12, atol=0)
    between = (turns >= YARN_ALPHA) & (turns <= YARN_BETA)
    assert between.any() and bool(((ours[between] > plain[between] / s) & (ours[between] < plain[between])).all())
    assert_close(yarn_speeds(10000.0, d_k, 1.0, L), plain, rtol=1e-15, atol=0)  # s = 1: RoPE itself


def test_yarn_temperature_is_the_papers_and_divides_the_logits_by_t():
    assert yarn_qk_scale(1.0) == 1.0 and yarn_qk_scale(0.5) == 1.0
    assert yarn_qk_scale(16.0) == pytest.approx(0.1 * math.log(16.0) + 1)  # √(1/t), Eq. 22
    torch.manual_seed(0)
    q, k = torch.randn(1, 3, 16), torch.randn(1, 3, 16)
    positions = torch.tensor([0, 5, 9])
    scaled = RotaryPositionalEmbedding(10000.0, 16, 32, qk_scale=yarn_qk_scale(4.0))
    plain = RotaryPositionalEmbedding(10000.0, 16, 32)
    logits = scaled(q, positions) @ scaled(k, positions).transpose(-2, -1)
    inverse_t = (0.1 * math.log(4.0) + 1) ** 2  # 1/t
    assert_close(logits, inverse_t * (plain(q, positions) @ plain(k, positions).transpose(-2, -1)))


def test_extend_context_with_yarn_sets_the_speeds_and_the_temperature():
    model = small_lm()  # context 12, d_k = 4: turns within 12 are 1.9 and 0.019, both below β = 32
    longer = extend_context(model, 48, "yarn", yarn_alpha=1.0, yarn_beta=1.5)
    rope = longer.layers[0].attn.rope
    assert rope.max_seq_len == 48 and rope.qk_scale == pytest.approx(0.1 * math.log(4.0) + 1)
    assert_close(rope.speeds, yarn_speeds(10000.0, 4, 4.0, 12, 1.0, 1.5))
    assert rope.speeds[0] == 1.0 and rope.speeds[1] == pytest.approx(0.01 / 4)  # kept; interpolated
    cold = extend_context(model, 48, "yarn", yarn_temperature=False).layers[0].attn.rope
    assert cold.qk_scale == 1.0
    with pytest.raises(ValueError, match="already rescaled"):
        extend_context(longer, 96, "yarn")
    assert extend_context(longer, 96).layers[0].attn.rope.qk_scale == rope.qk_scale  # "none" keeps it all


def test_extend_context_keeps_partial_rope():
    model = small_lm()
    for block in model.layers:
        block.attn.rope = RotaryPositionalEmbedding(10000.0, 4, 12, rotated_fraction=0.5)
    for scaling in ("none", "interpolation", "ntk", "yarn"):
        rope = extend_context(model, 24, scaling).layers[1].attn.rope
        assert rope.rotated_fraction == 0.5 and torch.equal(rope.sin[:, 1], torch.zeros(24)), scaling


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"speeds": torch.ones(3)}, r"speeds must be a float tensor of shape \(d_k/2,\) = \(4,\)"),
    ({"speeds": torch.tensor([1.0, -1.0, 0.1, 0.0])}, "speeds must be finite and >= 0"),
    ({"qk_scale": 0.0}, "qk_scale must be a finite number > 0"),
])
def test_bad_speeds_and_scales_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RotaryPositionalEmbedding(10000.0, 8, 16, **kwargs)


def test_yarn_refuses_a_ramp_that_runs_backwards():
    with pytest.raises(ValueError, match="beta must be larger than alpha"):
        yarn_speeds(10000.0, 16, 2.0, 32, alpha=4.0, beta=2.0)
