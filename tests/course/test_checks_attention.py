"""The attention checkers pass correct answers and name each typical mistake with its own hint."""

import math
import sys
from typing import ClassVar

import numpy as np
import pytest
import torch
from torch import nn

from prenorm_course.exercises import check as exercises_check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.checks import Hint, probes
from prenorm_lib.checks import attention as check
from prenorm_lib.checks.core import NotDone
from prenorm_lib.layers import Linear
from prenorm_lib.rope import RotaryPositionalEmbedding

pytest_plugins = ["learner_wire"]

# ---------------------------------------------------------------- 4.1: stable softmax


def softmax_right(x, dim):
    shifted = x - x.amax(dim=dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_in_float32(x, dim):
    x32 = x.float()
    exp = torch.exp(x32 - x32.amax(dim=dim, keepdim=True))
    return (exp / exp.sum(dim=dim, keepdim=True)).to(x.dtype)


def softmax_no_max(x, dim):
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_global_max(x, dim):
    exp = torch.exp(x - x.max())
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_last_dim(x, dim):
    return softmax_right(x, -1)


def softmax_log(x, dim):
    shifted = x - x.amax(dim=dim, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def softmax_float32_out(x, dim):
    return softmax_right(x.float(), dim)


def softmax_in_place(x, dim):
    x -= x.amax(dim=dim, keepdim=True)
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_torch(x, dim):
    return torch.softmax(x, dim=dim)


def softmax_method(x, dim):
    return x.softmax(dim)


def softmax_unfinished(x, dim):
    raise NotImplementedError("Exercise 4.1: write a stable softmax")


def test_softmax_right_passes(via, capsys):
    check.stable_softmax(via(softmax_right))
    assert capsys.readouterr().out.startswith("Exercise 4.1 passed: ")


def test_softmax_computed_in_float32_passes(via, capsys):
    check.stable_softmax(via(softmax_in_float32))
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (softmax_no_max, "subtract the maximum"),
        (softmax_global_max, "each row's own maximum"),
        (softmax_last_dim, "ignores `dim`"),
        (softmax_log, "log-probabilities"),
        (softmax_float32_out, "return x's dtype"),
        (softmax_in_place, "in place"),
        (functional.softmax, "that is the library's own `prenorm_lib.functional.softmax`"),
        (softmax_torch, "your code calls `.softmax`"),
        (softmax_method, "your code calls `.softmax`"),
    ],
)
def test_softmax_mistakes_get_their_hint(wrong, words, via):
    with pytest.raises(Hint) as info:
        check.stable_softmax(via(wrong))
    assert str(info.value).startswith("Exercise 4.1: ")
    assert words in str(info.value)


def test_softmax_over_the_wrong_dim_is_named():
    def other_dim(x, dim):
        return softmax_right(x, 0 if dim != 0 else -1)

    with pytest.raises(Hint, match=r"ignores `dim`|you normalised over dimension \d, not over dim="):
        check.stable_softmax(other_dim)


def test_softmax_unfinished_is_not_done(via, capsys):
    check.stable_softmax(via(softmax_unfinished))
    assert capsys.readouterr().out.startswith("Exercise 4.1 is not done yet — ")
    with pytest.raises(NotDone):
        check.stable_softmax.core(via(softmax_unfinished))


# ---------------------------------------------------------------- 4.2: spread of q·k


@pytest.mark.parametrize("answer", [8, 8.0, torch.tensor(8.0), np.float64(8.0), math.sqrt(64)])
def test_spread_right_answer_passes(answer, via, capsys):
    check.score_spread(via(answer))
    assert capsys.readouterr().out.startswith("Exercise 4.2 passed: ")


@pytest.mark.parametrize(
    ("answer", "words"),
    [(64, "the variance of q·k"), (1, "one product"), (4096, "not d_k²"), (3, "not quite"),
     ("eight", "one number")],
)
def test_spread_wrong_answers(answer, words, via):
    with pytest.raises(Hint) as info:
        check.score_spread(via(answer))
    assert str(info.value).startswith("Exercise 4.2: ")
    assert words in str(info.value)


def test_spread_placeholder_is_not_done(capsys):
    check.score_spread(...)
    assert capsys.readouterr().out.startswith("Exercise 4.2 is not done yet — replace each `...`")


def test_spread_answer_is_what_sampling_measures():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(200_000, 64, generator=gen), torch.randn(200_000, 64, generator=gen)
    assert abs((q * k).sum(-1).std().item() - 8) < 0.1


# ---------------------------------------------------------------- 4.3: attention with a mask


def attention_right(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax_right(scores, -1) @ V


def attention_large_negative(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-1e9))
    return softmax_right(scores, -1) @ V


def attention_variant(**kwargs):
    def wrong(Q, K, V, mask=None):
        return check._sdpa(Q, K, V, mask, **kwargs).to(Q.dtype)
    return wrong


def attention_weights_only(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax_right(scores, -1)


def attention_from_library(Q, K, V, mask=None):
    return functional.scaled_dot_product_attention(Q, K, V, mask)


def attention_torch(Q, K, V, mask=None):
    return nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def test_attention_right_passes(via, capsys):
    check.attention(via(attention_right))
    assert capsys.readouterr().out.startswith("Exercise 4.3 passed: ")


def test_attention_with_a_large_negative_fill_passes(via, capsys):
    check.attention(via(attention_large_negative))
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (attention_variant(scale="none"), "not scaled"),
        (attention_variant(scale="dk"), "you divided by d_k"),
        (attention_variant(scale="sqrt_dv"), "√d_v"),
        (attention_variant(softmax_dim=-2), "over the query axis"),
        (attention_variant(fill="0"), "set to 0"),
        (attention_variant(after=True), "after the softmax"),
        (attention_variant(inverted=True), "inverted"),
        (attention_weights_only, "attention weights"),
        (functional.scaled_dot_product_attention,
         "that is the library's own `prenorm_lib.functional.scaled_dot_product_attention`"),
        (attention_from_library, "your code calls `scaled_dot_product_attention`"),
        (attention_torch, "your code calls `scaled_dot_product_attention`"),
    ],
)
def test_attention_mistakes_get_their_hint(wrong, words, via):
    with pytest.raises(Hint) as info:
        check.attention(via(wrong))
    assert str(info.value).startswith("Exercise 4.3: ")
    assert words in str(info.value)


# ---------------------------------------------------------------- 4.4: causal MHSA with RoPE


class Attention(nn.Module):
    """A learner's layer: the CS336 interface, the library's Linear and RoPE, optional mistakes."""

    mistakes: ClassVar[dict] = {}

    def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.rope = RotaryPositionalEmbedding(rope_theta, self.d_head, max_seq_len)
        self.rope_all = RotaryPositionalEmbedding(rope_theta, d_model, max_seq_len)

    def forward(self, x, token_positions=None):
        m = self.mistakes
        T = x.shape[-2]
        positions = torch.arange(T) if token_positions is None or m.get("ignore_positions") else token_positions
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, d_model)
        if m.get("rope_concatenated"):
            q, k = self.rope_all(q, positions), self.rope_all(k, positions)
        split = (self.d_head, self.num_heads) if m.get("split_wrong") else (self.num_heads, self.d_head)
        q, k, v = (t.unflatten(-1, split) for t in (q, k, v))  # (B, T, ·, ·)
        if m.get("split_wrong"):
            q, k, v = (t.transpose(-1, -2) for t in (q, k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, d_head)
        if not m.get("rope_concatenated") and not m.get("no_rope"):
            q, k = self.rope(q, positions), self.rope(k, positions)
        if m.get("rope_on_v"):
            v = self.rope(v, positions)
        mask = torch.ones(T, T, dtype=torch.bool).tril(-1 if m.get("strict_mask") else 0)
        if m.get("no_mask"):
            mask = torch.ones(T, T, dtype=torch.bool)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head * (self.num_heads if m.get("scale_model") else 1))
        out = softmax_right(scores.masked_fill(~mask, float("-inf")), -1) @ v  # (B, H, T, d_head)
        out = out.transpose(1, 2).flatten(-2)  # (B, T, d_model)
        return out if m.get("no_output_proj") else self.output_proj(out)


def layer_with(**mistakes):
    return type("Wrong", (Attention,), {"mistakes": mistakes})


def test_layer_right_passes(via, capsys):
    check.causal_self_attention(via(Attention))
    assert capsys.readouterr().out.startswith("Exercise 4.4 passed: ")


@pytest.mark.parametrize("seed", range(4))
def test_reference_equals_the_library_layer(seed):
    gen = torch.Generator().manual_seed(seed)
    drawn = check._layer(gen)
    layer = MultiHeadSelfAttention(*drawn)
    weights = {name: getattr(layer, name).weight.detach() for name in check.PROJECTIONS}
    for _, x, positions in check._mhsa_cases(drawn, gen):
        at = torch.arange(x.shape[-2]) if positions is None else positions
        want = layer(x) if positions is None else layer(x, positions)
        torch.testing.assert_close(check._mhsa(x, weights, at, drawn).float(), want, atol=1e-5, rtol=1e-4)


class NoProjections(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)


class WithBias(Attention):
    def __init__(self, *args):
        super().__init__(*args)
        self.v_proj = nn.Linear(self.q_proj.weight.shape[1], self.q_proj.weight.shape[0])


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (layer_with(no_mask=True), "no causal mask"),
        (layer_with(strict_mask=True), "excludes the diagonal"),
        (layer_with(no_output_proj=True), "output projection is missing"),
        (layer_with(rope_on_v=True), "to the values too"),
        (layer_with(no_rope=True), "no RoPE"),
        (layer_with(rope_concatenated=True), "concatenated heads"),
        (layer_with(ignore_positions=True), "token_positions was ignored"),
        (layer_with(scale_model=True), "√d_model"),
        (layer_with(split_wrong=True), "wrong axis"),
        (NoProjections, "no `q_proj`"),
        (WithBias, "parameters, expected"),
        (MultiHeadSelfAttention, "that is the library's own `prenorm_lib.attention.MultiHeadSelfAttention`"),
    ],
)
def test_layer_mistakes_get_their_hint(wrong, words, via):
    with pytest.raises(Hint) as info:
        check.causal_self_attention(via(wrong))
    assert str(info.value).startswith("Exercise 4.4: ")
    assert words in str(info.value)


@pytest.mark.parametrize(("variant", "words"), [({"split": "no_transpose"}, "mixes tokens"),
                                                 ({"merge": "no_transpose"}, "merged without")])
def test_layout_mistakes_are_told_apart(variant, words):
    layer = check.Layer(24, 3, 16, 10000.0)
    weights = {name: torch.randn(24, 24) / 5 for name in check.PROJECTIONS}
    x = torch.randn(2, 6, 24)
    wrong = check._mhsa(x, weights, torch.arange(6), layer, **variant)
    others = [check._mhsa(x, weights, torch.arange(6), layer, **v) for v, _ in check.MHSA_MISTAKES if v != variant]
    assert not any(check._close(wrong, other) for other in others)
    assert any(words in hint for v, hint in check.MHSA_MISTAKES if v == variant)


def test_layer_built_on_the_library_is_refused(via):
    class Wrapper(nn.Module):
        def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
            super().__init__()
            self.inner = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, rope_theta)
            self.q_proj, self.k_proj = self.inner.q_proj, self.inner.k_proj
            self.v_proj, self.output_proj = self.inner.v_proj, self.inner.output_proj

        def forward(self, x, token_positions=None):
            return self.inner(x, token_positions)

    with pytest.raises(Hint, match="your code calls `MultiHeadSelfAttention`"):
        check.causal_self_attention(via(Wrapper))


# ------------------------------------- 4.4 rests on values: a gradient step, not the kernel's facts (issue 31)


def forge_parameters(monkeypatch):
    """Patch the kernel-side probe the way the hold-out cheat did: each projection's weight, a plain tensor,
    is reported as an nn.Parameter, and the parameter count as the four (d_model, d_model) weights."""
    real = probes.facts_of

    def forged(obj, attributes=()):
        facts = real(obj, attributes)
        weights = {name: value for name, value in facts["attributes"].items() if value is not None}
        for value in weights.values():
            value["types"] = ["torch.nn.parameter.Parameter", *value["types"]]
        if weights:
            facts["parameters"] = [[name, list(value["tensor"].shape)] for name, value in weights.items()]
        return facts

    monkeypatch.setattr(probes, "facts_of", forged)


class PlainWeights(Attention):
    """Right values from plain tensors: each projection's weight is an attribute, not an nn.Parameter."""

    def __init__(self, *args):
        super().__init__(*args)
        for name in check.PROJECTIONS:
            projection = getattr(self, name)
            weight = projection.weight.detach().clone()
            del projection.weight
            projection.weight = weight


class Detached(Attention):
    """Parameters as reported, but forward computes with detached copies of them: the optimiser moves nothing."""

    def forward(self, x, token_positions=None):
        saved = {name: getattr(self, name).weight for name in check.PROJECTIONS}
        for name, weight in saved.items():
            getattr(self, name)._parameters["weight"] = weight.detach()
        try:
            return super().forward(x, token_positions)
        finally:
            for name, weight in saved.items():
                getattr(self, name)._parameters["weight"] = weight


def test_plain_tensor_weights_are_told_by_the_kernels_own_facts(via):
    """Without the forgery the reported facts already name the mistake: the layer has no parameters."""
    with pytest.raises(Hint, match=r"^Exercise 4\.4: the module has 0 parameters, expected"):
        check.causal_self_attention(via(PlainWeights))


def test_plain_tensor_weights_reported_as_parameters_fail(via, monkeypatch):
    forge_parameters(monkeypatch)
    with pytest.raises(Hint, match=r"^Exercise 4\.4: after one gradient step the output is wrong"):
        check.causal_self_attention(via(PlainWeights))


def test_a_forward_that_does_not_use_the_reported_parameters_fails(via):
    with pytest.raises(Hint, match=r"^Exercise 4\.4: after one gradient step the output is wrong"):
        check.causal_self_attention(via(Detached))


def test_the_right_layer_passes_under_the_forgery(via, monkeypatch, capsys):
    """The forgery reports the truth about a right layer: the gradient step passes it."""
    forge_parameters(monkeypatch)
    check.causal_self_attention(via(Attention))
    assert capsys.readouterr().out.startswith("Exercise 4.4 passed: ")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_a_kernel_that_reports_plain_tensors_as_parameters_does_not_pass_4_4():
    """The cheat in a real graded kernel: the solution's layer with plain-tensor weights, its facts forged."""
    root = repo_root()
    name = "04_attention.ipynb"
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / name), read_notebook(solution_path(root, name)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 4.4"))
    cell.source += FORGED_PLAIN_WEIGHTS
    result = exercises_check.check_notebook(nb, name, root, 60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["4.4"][0] == exercises_check.HINT, statuses
    assert "after one gradient step" in statuses["4.4"][1], statuses
    assert statuses["4.3"][0] == exercises_check.PASSED, statuses


FORGED_PLAIN_WEIGHTS = '''
import prenorm_lib.checks.probes as _core
_real_facts = _core.facts_of
def _forged(obj, attributes=()):
    facts = _real_facts(obj, attributes)
    weights = {n: v for n, v in facts["attributes"].items() if v is not None}
    for v in weights.values():
        v["types"] = ["torch.nn.parameter.Parameter", *v["types"]]
    if weights:
        facts["parameters"] = [[n, list(v["tensor"].shape)] for n, v in weights.items()]
    return facts
_core.facts_of = _forged
_Right = CausalSelfAttention
class CausalSelfAttention(_Right):
    def __init__(self, *args):
        super().__init__(*args)
        for name in ("q_proj", "k_proj", "v_proj", "output_proj"):
            projection = getattr(self, name)
            weight = projection.weight.detach().clone()
            del projection.weight
            projection.weight = weight
'''


# ----------------------------- the refusals are lints: in the grader their hint says what they rest on


@pytest.mark.parametrize(("learner", "words", "basis"), [
    (functional.softmax, "that is the library's own", "the type names"),
    (softmax_torch, "your code calls `.softmax`", "the source"),
], ids=["object", "calls"])
def test_a_refusal_in_the_grader_says_it_rests_on_what_the_kernel_reported(learner, words, basis, via):
    with pytest.raises(Hint) as info:
        check.stable_softmax(via(learner))
    assert words in str(info.value)
    reported = f" [decided from {basis} the learner's kernel reported]"
    wired = via(learner) is not learner
    assert str(info.value).endswith(reported) == wired, str(info.value)  # inline the learner's objects are its own
