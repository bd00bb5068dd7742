"""What a checker hands to learner code: fresh inputs every time, copies, and a named hint for a mutated one.

* References are computed from the checker's own tensors, which learner code never gets
  (it gets copies), so a function that writes into an input cannot move the reference;
  the write itself is a hint naming the input (class 12 of issue 21).
* Inputs are drawn afresh on each check from a seed the checker's process draws, so a
  table of one run's inputs and outputs does not pass the next run (class 13).
"""

import json

import pytest
import torch

from prenorm_lib import functional
from prenorm_lib.checks import Hint, core, rmsnorm, rope
from prenorm_lib.checks.agent import Agent
from prenorm_lib.checks.remote import Learner

pytest_plugins = ["learner_wire"]


def rotate_then_spoil_cos(x, cos, sin):
    """A right rotation that then writes into the shared cos cache."""
    out = functional.apply_rope(x.clone(), cos.clone(), sin.clone())
    cos.zero_()
    return out


def test_a_rotation_that_writes_into_cos_is_named_not_graded_against_the_spoilt_cos(via):
    with pytest.raises(Hint, match=r"changed its input cos in place — the cos/sin cache is shared"):
        rope.rotate_pairs.core(via(rotate_then_spoil_cos))


class ZeroesItsInput(torch.nn.Module):
    """A right RMSNorm module whose forward then zeroes the caller's x."""

    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        x.zero_()
        return out


def test_a_module_that_zeroes_its_input_is_named(via):
    with pytest.raises(Hint, match=r"changed its input x in place"):
        rmsnorm.rms_norm_module.core(via(ZeroesItsInput))


def test_the_checkers_tensors_never_reach_learner_code(via):
    seen = []

    def keeps(x):
        seen.append(x)
        return x.sum()

    x = torch.ones(3)
    core.call_learner("9.9", via(keeps), x)
    if seen:  # in this process: the learner got a copy, not the checker's tensor
        assert seen[0] is not x
    x2 = torch.ones(3)
    with pytest.raises(Hint, match=r"changed its input w in place"):
        core.call_learner("9.9", via(lambda a, w: w.add_(1)), x, x2, arg_names=("x", "w"))
    assert torch.equal(x2, torch.ones(3))


def test_fresh_generators_draw_different_inputs():
    a, b = (torch.randn(8, generator=core.fresh_generator()) for _ in range(2))
    assert not torch.equal(a, b)


def _key(*args):
    return tuple((t.dtype, t.view(-1).view(torch.uint8).numpy().tobytes()) if isinstance(t, torch.Tensor) else t
                 for t in args)


def _table(cases, reference):
    """A lookup table from the bytes of one run's inputs to the right outputs."""
    return {_key(*(t.contiguous() if isinstance(t, torch.Tensor) else t for t in args)): reference(*args)
            for args in cases}


def test_a_lookup_table_of_yesterdays_kernel_inputs_fails(via):
    table = _table([c[1:] for c in rmsnorm._kernel_cases()], functional.rms_norm)

    def looked_up(x, weight, eps):
        key = _key(x.contiguous(), weight.contiguous(), eps)
        return table[key].clone() if key in table else torch.zeros_like(x)

    with pytest.raises(Hint):
        rmsnorm.rms_norm.core(via(looked_up))


def test_a_lookup_table_of_yesterdays_rotation_inputs_fails(via):
    table = _table([c[1:] for c in rope._rotation_cases()], functional.apply_rope)

    def looked_up(x, cos, sin):
        key = _key(x.contiguous(), cos.contiguous(), sin.contiguous())
        return table[key].clone() if key in table else torch.zeros_like(x)

    with pytest.raises(Hint):
        rope.rotate_pairs.core(via(looked_up))


# ------------------------------------------------ facts decided here, not in the learner's process


class RandomGain(torch.nn.Module):
    """RMSNorm whose gain starts random instead of at ones (a typical mistake)."""

    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.rand(d_model, device=device, dtype=dtype) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def patched_kernel(namespace, monkeypatch):
    """A learner 'process' whose torch comparisons all say "equal" while it answers a request."""
    agent = Agent(namespace)

    def send(request):
        with monkeypatch.context() as patch:
            patch.setattr(torch.Tensor, "__eq__", lambda self, other: torch.ones(self.shape, dtype=torch.bool))
            patch.setattr(torch.Tensor, "all", lambda self, *a, **k: torch.tensor(True))
            reply = agent.handle(json.dumps(request))
        return json.loads(reply)

    return Learner(send)


def test_module_facts_are_decided_in_the_grader_from_bytes(monkeypatch):
    """'Does the gain start at ones' is answered here, from the weight's bytes, not by a comparison there."""
    learner = patched_kernel({"answer": RandomGain}, monkeypatch)
    with pytest.raises(Hint, match="does not start at ones"):
        rmsnorm.rms_norm_module.core(learner.lookup("answer"))


def test_a_lookup_table_of_yesterdays_widths_fails(via):
    from prenorm_lib.checks import ffn
    from prenorm_lib.ffn import swiglu_hidden_dim

    cases = ffn._d_models() if hasattr(ffn, "_d_models") else ffn._D_MODELS
    table = {d: swiglu_hidden_dim(d) for d in cases}

    def looked_up(d_model):
        return table.get(d_model, 64)

    with pytest.raises(Hint):
        ffn.hidden_dim.core(via(looked_up))


# ------------------------------------------- right only on yesterday's fixed inputs (class 13)
# Each learner below is right on the one input a checker used to hold fixed and makes the
# typical mistake everywhere else: it passes a checker with fixed inputs, and must not pass one
# that draws them.

YESTERDAYS_EXTREMES = torch.tensor([-1000.0, -100.0, -20.0, 0.0, 20.0, 100.0, 1000.0])
YESTERDAYS_SILU = YESTERDAYS_EXTREMES * torch.sigmoid(YESTERDAYS_EXTREMES)


def silu_keyed_on_yesterdays_extremes(x):
    """The right SiLU for the old extreme input, the exp-overflowing x·eˣ/(1 + eˣ) elsewhere."""
    if x.shape == YESTERDAYS_EXTREMES.shape and torch.equal(x, YESTERDAYS_EXTREMES):
        return YESTERDAYS_SILU.clone()
    wide = x.float()
    return (wide * torch.exp(wide) / (1 + torch.exp(wide))).to(x.dtype)


def test_a_silu_right_only_on_yesterdays_extremes_fails(via):
    from prenorm_lib.checks import ffn

    with pytest.raises(Hint, match=r"^Exercise 2\.1: silu\(-?\d+(\.\d)?\) gave nan instead of a number"):
        ffn.silu.core(via(silu_keyed_on_yesterdays_extremes))


YESTERDAYS_PACKED_ROW = functional.rope_angles(10000.0, 8, 64)[[0, 1, 2, 3, 0, 1]]  # the old first batch row


def rotate_keyed_on_yesterdays_packing(x, cos, sin):
    """Right when the first packed row holds the old positions 0 1 2 3 0 1; else positions 0 … T−1 for every row."""
    if cos.ndim == 4 and not torch.allclose(cos[0, 0].double(), YESTERDAYS_PACKED_ROW.cos(), atol=1e-6):
        table = functional.rope_angles(10000.0, x.shape[-1], 64)[: x.shape[-2]]
        cos, sin = table.cos(), table.sin()
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def test_a_rotation_right_only_on_yesterdays_packed_positions_fails(via):
    # the tables' Θ and d_k are drawn too now, so the old case may already fail before the packed one
    with pytest.raises(Hint, match=r"^Exercise 3\.2: "):
        rope.rotate_pairs.core(via(rotate_keyed_on_yesterdays_packing))


def test_the_fp16_prediction_is_judged_on_a_fresh_vector_of_its_kind(monkeypatch):
    """Exercise 1.3 takes answers, not code, so no table can be keyed on its vector; it is drawn all the same,
    and every draw is of the kind the question is about: x² overflows fp16, the RMS itself fits."""
    seen = []
    real = rmsnorm.functional.rms_norm

    def recording(x, *args, **kwargs):
        seen.append(x.clone())
        return real(x, *args, **kwargs)

    monkeypatch.setattr(rmsnorm.functional, "rms_norm", recording)
    for _ in range(20):
        rmsnorm.fp16_prediction.core("inf", "0")
    assert len(seen) == 20
    assert len({tuple(x.tolist()) for x in seen}) == 20, "the same vector came back: it is not drawn per check"
    for x in seen:
        assert x.dtype == torch.float16
        assert bool(torch.isinf(x * x).all()), f"{x}: some x² fits fp16"
        rms = x.float().pow(2).mean().sqrt()
        assert torch.isfinite(rms.half()), f"{x}: the RMS itself overflows fp16"
        assert bool((x > 0).any() and (x < 0).any()), f"{x}: one sign only"
