"""Any learner output, of any shape or type, ends in a hint, never a traceback (issue 28, item 4).

Hypothesis draws malformed outputs and hands each checker a learner that returns one:
plain values (None, numbers with nan and inf, strings, lists, dicts, tuples, Ellipsis)
and the right answer bent out of shape (another dtype, complex, a meta or sparse tensor,
nan or inf in it, a dimension added, dropped or transposed, a slice, a 0-d tensor, a
NumPy array, a Python list, a pair of tensors). Each check must pass, say "not done" or
raise its ``Hint``; any other exception is a crash the learner would see as a traceback.
Every draw runs in both places a checker runs: on the object itself and through the
grader's wire.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from learner_wire import through_wire
from torch import nn

from prenorm_lib import functional
from prenorm_lib.checks import Hint, attention, block, ffn, rmsnorm, rope
from prenorm_lib.checks.core import NotDone
from prenorm_lib.ffn import swiglu_hidden_dim
from prenorm_lib.layers import Linear

# 1.2's forward calls the learner's 1.1 kernel by its name; here the library's stands in for it
my_rms_norm = functional.rms_norm

PLACES = {"local": lambda obj: obj, "wire": through_wire}
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

plain_values = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.just(...), st.lists(st.floats(allow_nan=True), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), st.tuples(st.integers(), st.text(max_size=2)),
    st.just(float("nan")), st.just(float("inf")), st.just(object()),
)


def _sparse(t):
    return t.to_sparse() if t.dim() > 0 and not t.is_complex() else t


BENDS = {
    "same": lambda t: t,
    "float64": lambda t: t.double(),
    "float16": lambda t: t.half(),
    "int64": lambda t: t.long(),
    "bool": lambda t: t > 0,
    "complex": lambda t: t.to(torch.complex64),
    "meta": lambda t: t.to("meta"),
    "sparse": _sparse,
    "nan": lambda t: torch.full_like(t, float("nan")),
    "inf": lambda t: torch.full_like(t, float("inf")),
    "one nan": lambda t: t.flatten().index_fill(0, torch.tensor([0]), float("nan")).reshape(t.shape) if t.numel()
    else t,
    "unsqueezed": lambda t: t.unsqueeze(0),
    "summed": lambda t: t.sum(-1) if t.dim() else t,
    "transposed": lambda t: t.transpose(0, -1) if t.dim() else t,
    "sliced": lambda t: t[..., :-1] if t.dim() else t,
    "0-d": lambda t: t.sum(),
    "empty": lambda t: t.new_empty(0),
    "numpy": lambda t: t.detach().float().numpy(),
    "list": lambda t: t.detach().tolist(),
    "pair": lambda t: (t, t),
    "requires grad": lambda t: t.detach().float().requires_grad_(),
}

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool,
          torch.complex64)


@st.composite
def any_tensors(draw):
    """A tensor of any small shape and dtype, holding ordinary values, nan, inf or huge ones."""
    shape = draw(st.lists(st.integers(0, 5), max_size=4))
    dtype = draw(st.sampled_from(DTYPES))
    fill = draw(st.sampled_from([0.0, 1.0, -3.5, float("nan"), float("inf"), -float("inf"), 1e30]))
    t = torch.full(shape, fill, dtype=torch.float64).to(dtype) if dtype.is_floating_point or dtype.is_complex \
        else torch.zeros(shape, dtype=dtype)
    return t.to("meta") if draw(st.booleans()) and draw(st.booleans()) else t


outputs = st.one_of(st.sampled_from(sorted(BENDS)).map(lambda name: ("bend", name)),
                    plain_values.map(lambda value: ("plain", value)),
                    any_tensors().map(lambda value: ("plain", value)))


def shaped(right, drawn):
    """The learner's output: ``right`` bent as drawn, or a plain value in its place."""
    kind, value = drawn
    if kind == "plain":
        return value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex casts and sparse tensors warn
        return BENDS[value](right)


def ends_in_a_hint(check, learner, place: str) -> None:
    """Run ``check`` on ``learner``: it may pass, say not done, or hint; nothing else."""
    with contextlib.suppress(Hint, NotDone):
        check.core(PLACES[place](learner))


def function_returning(right, drawn):
    def learner(*args):
        return shaped(right(*args), drawn)

    return learner


def sdpa(Q, K, V, mask=None):
    return attention._sdpa(Q, K, V, mask).to(Q.dtype)


def cache(theta, d_k, max_seq_len):
    angles = functional.rope_angles(theta, d_k, max_seq_len)
    return angles.cos().float(), angles.sin().float()


def pre_norm(x, ln1, attn, ln2, ffn_):
    h = x + attn(ln1(x))
    return h + ffn_(ln2(h))


def post_norm(x, ln1, attn, ln2, ffn_):
    z = ln1(x + attn(x))
    return ln2(z + ffn_(z))


FUNCTIONS = {
    "1.1": (rmsnorm.rms_norm, functional.rms_norm),
    "2.1": (ffn.silu, lambda x: x * torch.sigmoid(x)),
    "2.2": (ffn.swiglu, functional.swiglu),
    "3.2": (rope.rotate_pairs, functional.apply_rope),
    "4.1": (attention.stable_softmax, torch.softmax),
    "4.3": (attention.attention, sdpa),
    "5.1": (block.pre_norm_forward, pre_norm),
    "5.2": (block.post_norm_forward, post_norm),
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("exercise", list(FUNCTIONS))
@FUZZ
@given(drawn=outputs)
def test_a_function_returning_anything_gets_a_hint(exercise, place, drawn):
    check, right = FUNCTIONS[exercise]
    ends_in_a_hint(check, function_returning(right, drawn), place)


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("bend", sorted(BENDS))
@pytest.mark.parametrize("exercise", [*FUNCTIONS, "1.2", "4.4"])
def test_every_bent_answer_gets_a_hint(exercise, bend, place):
    """Each bend of the right answer, for every checker of a tensor: not left to the draw."""
    if exercise in FUNCTIONS:
        check, right = FUNCTIONS[exercise]
        learner = function_returning(right, ("bend", bend))
    else:
        check, module = MODULES[exercise]
        learner = module(("bend", bend))
    ends_in_a_hint(check, learner, place)


@pytest.mark.parametrize("place", list(PLACES))
@FUZZ
@given(cos=outputs, sin=outputs, whole=st.one_of(st.none(), plain_values))
def test_a_cache_returning_anything_gets_a_hint(place, cos, sin, whole):
    """3.1 returns a pair: each member bent on its own, or something else in the pair's place."""

    def learner(theta, d_k, max_seq_len):
        c, s = cache(theta, d_k, max_seq_len)
        return (shaped(c, cos), shaped(s, sin)) if whole is None else whole

    ends_in_a_hint(rope.cos_sin_cache, learner, place)


@pytest.mark.parametrize("place", list(PLACES))
@FUZZ
@given(drawn=st.one_of(plain_values, st.sampled_from([64.0, 1e300, -64, 2**70, "704"]),
                       st.sampled_from(["tensor", "float", "numpy"])))
def test_a_width_rule_returning_anything_gets_a_hint(place, drawn):
    def learner(d_model):
        right = swiglu_hidden_dim(d_model)
        if drawn == "tensor":
            return torch.tensor(right)
        if drawn == "float":
            return float(right)
        if drawn == "numpy":
            return torch.tensor(right).numpy()
        return drawn

    ends_in_a_hint(ffn.hidden_dim, learner, place)


def norm_module(drawn):
    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

        def forward(self, x):
            return shaped(my_rms_norm(x, self.weight, self.eps), drawn)

    return Norm


def attention_layer(drawn):
    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
            super().__init__()
            self.shape = attention.Layer(d_model, num_heads, max_seq_len, rope_theta)
            self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
            self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)

        def forward(self, x, token_positions=None):
            positions = torch.arange(x.shape[-2]) if token_positions is None else token_positions
            weights = {name: getattr(self, name).weight for name in attention.PROJECTIONS}
            return shaped(attention._mhsa(x, weights, positions, self.shape).to(x.dtype), drawn)

    return CausalSelfAttention


MODULES = {"1.2": (rmsnorm.rms_norm_module, norm_module), "4.4": (attention.causal_self_attention, attention_layer)}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("exercise", list(MODULES))
@FUZZ
@given(drawn=outputs)
def test_a_module_whose_forward_returns_anything_gets_a_hint(exercise, place, drawn):
    check, module = MODULES[exercise]
    ends_in_a_hint(check, module(drawn), place)


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize(("check", "scalar"), [
    (attention.score_spread, math.sqrt(64)), (rope.long_range_pair, rope.first_slow_pair())], ids=["4.2", "3.3"])
@FUZZ
@given(drawn=outputs)
def test_a_numeric_answer_of_any_type_gets_a_hint(check, scalar, place, drawn):
    ends_in_a_hint(check, shaped(torch.tensor(float(scalar)), drawn), place)


@pytest.mark.parametrize("place", list(PLACES))
@FUZZ
@given(square=plain_values, normalised=plain_values)
def test_a_prediction_of_any_type_gets_a_hint(place, square, normalised):
    with contextlib.suppress(Hint, NotDone):
        rmsnorm.fp16_prediction.core(PLACES[place](square), PLACES[place](normalised))


@pytest.mark.parametrize("place", list(PLACES))
@FUZZ
@given(prediction=st.one_of(
    plain_values,
    st.dictionaries(st.sampled_from(["pre", "post", "none", "PRE", 1]), st.one_of(
        st.sampled_from(["trains", "stalls", "diverges", " Trains "]), plain_values), max_size=4)))
def test_a_divergence_prediction_of_any_type_gets_a_hint(place, prediction):
    with contextlib.suppress(Hint, NotDone):
        block.divergence_prediction.core(PLACES[place](prediction))


def kernel_wrong_only_on_a_vector(x, weight, eps):
    """Right on batches; on a 1-D input it hard-codes d_model (the mistake that crashed 1.1 with IndexError,
    when the checker's "mean over dim −2" variant ran on the vector)."""
    if x.dim() == 1:
        return x.new_zeros(x.shape)
    return functional.rms_norm(x, weight, eps)


@pytest.mark.parametrize("place", list(PLACES))
def test_a_kernel_wrong_only_on_a_vector_gets_a_hint(place):
    with pytest.raises(Hint, match=r"^Exercise 1\.1: on a single \d-vector"):
        rmsnorm.rms_norm.core(PLACES[place](kernel_wrong_only_on_a_vector))
