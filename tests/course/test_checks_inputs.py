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

from prenorm_course.exercises.agent import Agent
from prenorm_course.exercises.remote import Learner
from prenorm_lib import functional
from prenorm_lib.checks import Hint, core, rmsnorm, rope

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
