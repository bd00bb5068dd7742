"""Near misses fail, and the tolerances that make them fail are pinned (issue 28, item 4).

A near miss is an answer that is right almost everywhere: right on the checker's first
input and off by 1e-3 (relative, plus 1e-3 absolute) on every later one, or right
except for one row. Each tensor checker must reject both. Loosening ``expect_close``'s
default tolerance to 0.1, or the RMSNorm kernel check's float32 tolerance to 5e-2, let
such answers through: the last two tests make exactly those mutations (monkeypatched,
never in the committed code) and show that the near-miss tests then go red.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from prenorm_lib import functional
from prenorm_lib.checks import Hint, attention, block, core, ffn, probes, rmsnorm, rope
from prenorm_lib.ffn import swiglu_hidden_dim
from prenorm_lib.layers import Linear

pytest_plugins = ["learner_wire"]

OFF = 1e-3


def nudged(out: torch.Tensor, where: str) -> torch.Tensor:
    """``out`` moved by 1e-3·(1 + |out|): everywhere (``"all"``) or in its last row only (``"row"``).

    Float16 and bfloat16 outputs are left alone: 1e-3 is below their own resolution, so there
    it would be rounding, not a near miss. Every checker has float32 cases.
    """
    if out.dtype in (torch.float16, torch.bfloat16):
        return out
    step = (OFF * (1 + out.detach().abs().double())).to(out.dtype)
    if where == "all":
        return out + step
    mask = torch.zeros_like(out, dtype=torch.bool)
    if out.dim() >= 2:
        mask[..., -1, :] = True
    else:
        mask[-1:] = True
    return torch.where(mask, out + step, out)


class NearMiss:
    """Turns a right output into a near miss: ``"later"`` is right on the first call only, ``"row"`` is off in
    one row on every call, ``"right"`` leaves it alone (the control)."""

    def __init__(self, kind: str):
        self.kind, self.calls = kind, 0

    def __call__(self, out):
        self.calls += 1
        if self.kind == "right" or (self.kind == "later" and self.calls == 1):
            return out
        return nudged(out, "all" if self.kind == "later" else "row")


def near_function(right, kind: str):
    miss = NearMiss(kind)

    def learner(*args):
        return miss(right(*args))

    return learner


def sdpa(Q, K, V, mask=None):
    return attention._sdpa(Q, K, V, mask).to(Q.dtype)


def silu(x):
    return x * torch.sigmoid(x)


def cache(theta, d_k, max_seq_len):
    angles = functional.rope_angles(theta, d_k, max_seq_len)
    return angles.cos(), angles.sin()


def near_cache(kind: str):
    """A cos/sin cache whose sin is the near miss."""
    miss = NearMiss(kind)

    def learner(theta, d_k, max_seq_len):
        cos, sin = cache(theta, d_k, max_seq_len)
        return cos, miss(sin)

    return learner


def pre_norm(x, ln1, attn, ln2, ffn_):
    h = x + attn(ln1(x))
    return h + ffn_(ln2(h))


def post_norm(x, ln1, attn, ln2, ffn_):
    z = ln1(x + attn(x))
    return ln2(z + ffn_(z))


def near_norm_module(kind: str):
    miss = NearMiss(kind)

    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

        def forward(self, x):
            x32 = x.float()
            return miss((x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype))

    return Norm


def near_attention_layer(kind: str):
    """The checker's own reference inside a learner's layer (the projections are the learner's), made a near miss."""
    miss = NearMiss(kind)

    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
            super().__init__()
            self.shape = attention.Layer(d_model, num_heads, max_seq_len, rope_theta)
            self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
            self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)

        def forward(self, x, token_positions=None):
            positions = torch.arange(x.shape[-2]) if token_positions is None else token_positions
            weights = {name: getattr(self, name).weight for name in attention.PROJECTIONS}
            return miss(attention._mhsa(x, weights, positions, self.shape).to(x.dtype))

    return CausalSelfAttention


# checker, the near miss of each kind; the ids name the exercise
NEAR_MISSES = {
    "1.1": (rmsnorm.rms_norm, lambda kind: near_function(functional.rms_norm, kind)),
    "1.2": (rmsnorm.rms_norm_module, near_norm_module),
    "2.1": (ffn.silu, lambda kind: near_function(silu, kind)),
    "2.2": (ffn.swiglu, lambda kind: near_function(functional.swiglu, kind)),
    "3.1": (rope.cos_sin_cache, near_cache),
    "3.2": (rope.rotate_pairs, lambda kind: near_function(functional.apply_rope, kind)),
    "4.1": (attention.stable_softmax, lambda kind: near_function(torch.softmax, kind)),
    "4.3": (attention.attention, lambda kind: near_function(sdpa, kind)),
    "4.4": (attention.causal_self_attention, near_attention_layer),
    "5.1": (block.pre_norm_forward, lambda kind: near_function(pre_norm, kind)),
    "5.2": (block.post_norm_forward, lambda kind: near_function(post_norm, kind)),
}


def rejected(exercise: str, kind: str, wrap=lambda obj: obj) -> None:
    """The near miss of ``kind`` for ``exercise`` must end in that exercise's Hint."""
    check, make = NEAR_MISSES[exercise]
    with pytest.raises(Hint, match=rf"^Exercise {re.escape(exercise)}: "):
        check.core(wrap(make(kind)))


@pytest.mark.parametrize("kind", ["later", "row"])
@pytest.mark.parametrize("exercise", list(NEAR_MISSES))
def test_a_near_miss_fails(exercise, kind, via):
    rejected(exercise, kind, via)


@pytest.mark.parametrize("exercise", list(NEAR_MISSES))
def test_the_right_answer_behind_each_near_miss_passes(exercise, capsys):
    """The near misses are near: the same learner without the nudge passes."""
    check, make = NEAR_MISSES[exercise]
    check.core(make("right"))
    assert f"Exercise {exercise} passed: " in capsys.readouterr().out


def test_hidden_dim_right_but_for_one_width_fails():
    """2.3 answers in whole numbers: the near miss is one width off by one multiple of 64."""
    calls = []

    def learner(d_model):
        calls.append(d_model)
        right = swiglu_hidden_dim(d_model)
        return right + 64 if len(calls) == 7 else right

    with pytest.raises(Hint, match=r"^Exercise 2\.3: for d_model = \d+ you returned \d+, expected"):
        ffn.hidden_dim.core(learner)


# --- the tolerances the near misses pin ------------------------------------------------------------

DEFAULT_TOLERANCE_USERS = ["1.2", "2.2", "4.3", "4.4", "5.1", "5.2"]


@pytest.mark.parametrize("exercise", DEFAULT_TOLERANCE_USERS)
def test_loosening_expect_closes_default_tolerance_turns_the_near_miss_tests_red(exercise, monkeypatch):
    """The mutation: expect_close's default atol and rtol 0.1 instead of 1e-5 and 1e-4. These checkers compare
    with the default, so their near-miss test then fails (the near miss passes)."""
    defaults = core.expect_close.__defaults__
    assert defaults[:2] == (1e-5, 1e-4)
    monkeypatch.setattr(core.expect_close, "__defaults__", (0.1, 0.1, *defaults[2:]))
    with pytest.raises(pytest.fail.Exception):
        rejected(exercise, "later")


def test_loosening_the_kernels_float32_tolerance_turns_the_near_miss_test_red(monkeypatch):
    """The mutation: the RMSNorm kernel check's full-precision tolerance (float32, and float64 with it: one
    default in ``_tolerances``) 5e-2 instead of (1e-5, 1e-4)."""
    assert rmsnorm._tolerances(torch.float32) == rmsnorm._tolerances(torch.float64) == (1e-5, 1e-4)
    real, half = rmsnorm._tolerances, (torch.float16, torch.bfloat16)
    monkeypatch.setattr(rmsnorm, "_tolerances", lambda dtype: real(dtype) if dtype in half else (5e-2, 5e-2))
    for kind in ("later", "row"):
        with pytest.raises(pytest.fail.Exception):
            rejected("1.1", kind)


def test_nudge_is_the_size_the_docstring_says():
    out = torch.tensor([[0.0, 2.0], [1.0, -3.0]])
    assert torch.allclose(nudged(out, "all") - out, torch.tensor([[1e-3, 3e-3], [2e-3, 4e-3]]), atol=1e-6)
    assert torch.equal(nudged(out.half(), "all"), out.half())
    assert torch.equal(nudged(out, "row")[0], out[0]) and not torch.equal(nudged(out, "row")[1], out[1])
    assert math.isclose(float(nudged(torch.tensor([5.0]), "row")), 5.006, rel_tol=1e-6)


# --- a pass needs the values: the lints can only fail a check (issue 31, item 2) ----------------------


def lints_off(monkeypatch) -> None:
    """A kernel that reports nothing against its learner: no library origin, no source, no input changed."""
    from prenorm_lib.checks import remote

    real = probes.facts_of
    monkeypatch.setattr(probes, "facts_of", lambda obj, attributes=(): {**real(obj, attributes), "origin": []})

    def learner_source(obj):  # the probe keeps its name, so the agent finds it there too
        return ""

    monkeypatch.setattr(probes, "learner_source", learner_source)
    monkeypatch.setattr(core, "_changed_inputs", lambda sent, pristine: False)
    monkeypatch.setattr(remote.Learner, "_changed", lambda self, after, sent: [])


@pytest.mark.parametrize("exercise", list(NEAR_MISSES))
def test_with_every_lint_silenced_a_near_miss_still_fails(exercise, via, monkeypatch):
    """The library-copy refusals and the in-place hint are decided from what the kernel reports; silencing all of
    them (as a patched kernel could) lets no near miss through, because the verdict is the values'."""
    lints_off(monkeypatch)
    rejected(exercise, "later", via)


def softmax_in_place(x, dim):
    x -= x.amax(dim=dim, keepdim=True)
    return torch.softmax(x, dim=dim)


@pytest.mark.parametrize("learner", [functional.softmax, softmax_in_place], ids=["library", "in place"])
def test_silencing_the_lints_is_real(learner, via, monkeypatch, capsys):
    """The control: the same silencing lets the library's own softmax, and one that calls torch.softmax after
    changing x in place, through 4.1 (right values), so the near misses above fail on their values alone."""
    with pytest.raises(Hint, match=r"^Exercise 4\.1: (that is the library's own|your function changed its input)"):
        attention.stable_softmax.core(via(learner))
    lints_off(monkeypatch)
    attention.stable_softmax.core(via(learner))
    assert "Exercise 4.1 passed: " in capsys.readouterr().out
