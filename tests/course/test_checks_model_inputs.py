"""Notebook 06's checkers draw every size and trust values, not reports (issue 31, items 2 and 3).

Item 3: each check draws every constructor argument (widths, heads, d_ff, θ, the context
length, the vocabulary, the layers) and the input shapes afresh, never the sizes the checks
used to send (d_model 24, 3 heads, d_ff 40, 16 positions, θ = 10 000, 30 tokens, 2 layers,
Linear 256 × 384, Embedding 512 × 96). So a module special-cased to those sizes fails every
draw, and the handout's modules pass every draw.

Item 2: a pass rests on values. A module whose weights the optimiser cannot train (plain
tensors kept as buffers: the right names, the right state dict, the right outputs) used to
pass; one gradient step now tells. And the reference outputs come from the grader's own
weights, never from the state dict the learner's module reports.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_checks_model import RIGHT, MyAttention, MyBlock, MyEmbedding, MyLinear, MyLM, MyRoPE, MySwiGLU
from torch import nn

from prenorm_lib import RMSNorm
from prenorm_lib.checks import Hint
from prenorm_lib.checks import model as check

pytest_plugins = ["learner_wire"]

DRAWS = 4  # checks per special-cased module: every one must fail


def fails_every_time(checker, learner, pattern: str, draws: int = DRAWS) -> None:
    for _ in range(draws):
        with pytest.raises(Hint, match=pattern):
            checker.core(learner)


# --- the handout's modules pass on every draw, and the draws vary --------------------------------


@pytest.mark.parametrize(("checker", "cls"), RIGHT, ids=lambda v: getattr(v, "__name__", ""))
def test_the_handouts_modules_pass_many_draws(checker, cls, via, capsys):
    for _ in range(6):
        checker.core(via(cls))
    assert capsys.readouterr().out.count(f"Exercise {checker.exercise_id} passed: ") == 6


def test_the_sizes_vary_and_avoid_the_old_ones():
    drawn = [check._sizes(check.fresh_generator()) for _ in range(300)]
    for field, old in (("d_model", 24), ("num_heads", 3), ("d_ff", 40), ("max_seq_len", 16), ("vocab", 30),
                       ("num_layers", 2)):
        values = {getattr(s, field) for s in drawn}
        assert old not in values and len(values) >= 2, field
    assert all(s.d_model % s.num_heads == 0 and (s.d_model // s.num_heads) % 2 == 0 for s in drawn)
    assert all(not 7000 <= s.theta <= 14000 for s in drawn) and len({s.theta for s in drawn}) > 100
    widths = {check._linear_sizes(check.fresh_generator()) for _ in range(100)}
    assert len(widths) > 50 and all(sum(w) != 640 and 1.5 < max(w) / min(w) < 2.5 for w in widths)


def test_positions_reach_the_last_one_and_are_never_consecutive_from_zero():
    gen = check.fresh_generator()
    for _ in range(50):
        positions = check._positions(gen, 6, 20)
        assert positions[-1] == 19 and not torch.equal(positions, torch.arange(6))


# --- a module special-cased to the old sizes fails every draw -------------------------------------


class LinearSizedForTheOldCheck(MyLinear):
    """σ written in for the sizes 6.1 used to send (256 + 384 = 640)."""

    def __init__(self, in_features, out_features, device=None, dtype=None):
        nn.Module.__init__(self)
        std = math.sqrt(2 / 640)
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)


class EmbeddingWith512Rows(MyEmbedding):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__(512, embedding_dim)


class SwiGLUWithDff40(MySwiGLU):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__(d_model, 40)


class RoPEWithTheta10000(MyRoPE):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__(10000.0, d_k, max_seq_len)


class RoPEWith16Positions(MyRoPE):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__(theta, d_k, 16)


class RoPEWithDk8(MyRoPE):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__(theta, 8, max_seq_len)


class AttentionWith3Heads(MyAttention):
    def __init__(self, d_model, num_heads, max_seq_len, theta, device=None, dtype=None):
        super().__init__(d_model, 3, max_seq_len, theta)


class AttentionWithTheta10000(MyAttention):
    def __init__(self, d_model, num_heads, max_seq_len, theta, device=None, dtype=None):
        super().__init__(d_model, num_heads, max_seq_len, 10000.0)


class BlockWithTheta10000(MyBlock):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__(d_model, num_heads, d_ff, max_seq_len, 10000.0)


class BlockWithDff40(MyBlock):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__(d_model, num_heads, 40, max_seq_len, theta)


class LMIgnoringRopeTheta(MyLM):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, 10000.0)


class LMIgnoringContextLength(MyLM):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__(vocab_size, 16, d_model, num_layers, num_heads, d_ff, rope_theta)


class LMWithTwoLayers(MyLM):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__(vocab_size, context_length, d_model, 2, num_heads, d_ff, rope_theta)


@pytest.mark.parametrize(("checker", "cls", "pattern"), [
    (check.linear, LinearSizedForTheOldCheck, r"standard deviation is .*2 / \d+, truncated"),
    (check.embedding, EmbeddingWith512Rows, r"weight has shape \(512, \d+\)"),
    (check.swiglu, SwiGLUWithDff40, r"w1\.weight has shape \(40, \d+\)"),
    (check.rope, RoPEWithTheta10000, r"uses θ = 10000, not the theta argument"),
    (check.rope, RoPEWith16Positions, r"raised IndexError"),
    (check.rope, RoPEWithDk8, r"raised RuntimeError|shape"),
    (check.attention, AttentionWith3Heads, r"raised RuntimeError|differs from the library's"),
    (check.attention, AttentionWithTheta10000, r"uses θ = 10000, not the layer's theta argument"),
    (check.block, BlockWithTheta10000, r"the error is in attn, your attention: the rotation uses θ = 10000"),
    (check.block, BlockWithDff40, r"ffn\.w1\.weight has shape \(40, \d+\)"),
    (check.language_model, LMIgnoringRopeTheta, r"the error is in layers\.0\.attn, your attention: the rotation uses "
                                                r"θ = 10000"),
    (check.language_model, LMIgnoringContextLength, r"raised IndexError"),
    (check.language_model, LMWithTwoLayers, r"missing layers\.2|unexpected layers\.1"),
], ids=lambda v: getattr(v, "__name__", None) if not isinstance(v, str) else "")
def test_a_module_special_cased_to_the_old_sizes_fails_every_draw(checker, cls, pattern, via):
    fails_every_time(checker, via(cls), rf"^Exercise {checker.exercise_id}: .*(?:{pattern})")


# --- weights the optimiser cannot train fail, though names, state dict and outputs are right -----


def frozen(cls: type) -> type:
    """``cls`` with every parameter turned into a buffer of the same name after construction: the state
    dict, the loading and the outputs are those of the handout's module; only training differs."""

    def build(self, *args, **kwargs):
        cls.__init__(self, *args, **kwargs)
        for module in list(self.modules()):
            for name, parameter in list(module._parameters.items()):
                del module._parameters[name]
                module.register_buffer(name, parameter.detach().clone())

    return type(f"Frozen{cls.__name__}", (cls,), {"__init__": build})


TRAINED = [(checker, cls) for checker, cls in RIGHT if checker is not check.rope]


@pytest.mark.parametrize(("checker", "cls"), TRAINED, ids=lambda v: getattr(v, "__name__", ""))
def test_weights_kept_as_plain_tensors_fail(checker, cls, via):
    with pytest.raises(Hint, match=rf"^Exercise {checker.exercise_id}: after one gradient step the output is "
                                   r"wrong — every weight .* must be an nn\.Parameter"):
        checker.core(via(frozen(cls)))


class LMWithFrozenHead(MyLM):
    """One weight frozen (``requires_grad=False``): the step must move every weight, not just some."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lm_head.weight.requires_grad_(False)


class SwiGLUWithFrozenNorm(MyBlock):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ln2 = FrozenRMSNorm(self.ln2.weight.shape[0])


class FrozenRMSNorm(RMSNorm):
    def __init__(self, d_model):
        super().__init__(d_model)
        del self._parameters["weight"]
        self.register_buffer("weight", torch.ones(d_model))


@pytest.mark.parametrize(("checker", "cls"), [(check.language_model, LMWithFrozenHead),
                                              (check.block, SwiGLUWithFrozenNorm)],
                         ids=["lm_head frozen", "ln2 a buffer"])
def test_one_weight_the_optimiser_cannot_move_fails(checker, cls, via):
    with pytest.raises(Hint, match=r"after one gradient step the output is wrong"):
        checker.core(via(cls))


def test_the_room_for_rounding_never_hides_a_frozen_weight(monkeypatch):
    """6.6 and 6.7 widen their tolerance by the rounding measured on each draw (``model._rounding``). Over 30 draws of
    each, a block whose ln2 gain cannot train (the smallest weight a step moves) and a model whose lm_head cannot still
    miss the step's outputs by more than 10 times the widened tolerance, in every draw."""
    from prenorm_lib.checks import core

    misses: list[float] = []
    compare = core.expect_close

    def measured(exercise_id, got, want, hint, atol=1e-5, rtol=1e-4, **rest):
        if "after one gradient step" in hint:
            misses.append(float(((got.detach().double() - want.double()).abs()
                                 / (atol + rtol * want.double().abs())).max()))
        return compare(exercise_id, got, want, hint, atol=atol, rtol=rtol, **rest)

    monkeypatch.setattr(core, "expect_close", measured)
    for checker, cls in ((check.block, SwiGLUWithFrozenNorm), (check.language_model, LMWithFrozenHead)):
        misses.clear()
        fails_every_time(checker, cls, r"after one gradient step the output is wrong", draws=30)
        assert len(misses) == 30 and min(misses) > 10, (checker.exercise_id, min(misses))


def test_a_room_far_too_large_would_hide_it(monkeypatch):
    """The test above fires: with a room a million times the measured drift, the frozen ln2 gets past 6.6's gradient
    step (to the next check, which its buffer fails: built on the meta device, it stays on the CPU)."""
    monkeypatch.setattr(check, "ROUNDING_ROOM", 10**6)
    with pytest.raises(Hint, match="device= is ignored"):
        check.block.core(SwiGLUWithFrozenNorm)


class LinearReportingAnotherWeight(MyLinear):
    """Computes with 2W and reports 2W in its state dict, starting from W/2 (so a fresh module looks right).

    The check used to compare with a library copy holding the reported state dict, which then
    computed the same wrong outputs; the reference now holds the grader's own weights.
    """

    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__(in_features, out_features)
        with torch.no_grad():
            self.weight /= 2

    def forward(self, x):
        return x @ (2 * self.weight).T

    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        state["weight"] = 2 * state["weight"]
        return state


def test_the_reference_never_holds_the_weights_the_module_reports(via):
    with pytest.raises(Hint, match=r"^Exercise 6\.1: the output differs from the library's with the same weights"):
        check.linear.core(via(LinearReportingAnotherWeight))
