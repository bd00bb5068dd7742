"""The lint that watches what runs (issue 36, item 2): torch's own answer under a name the source never spells.

Each road here is right in its values and passes the source lint (reading the learner's code
cannot see a name built from strings, ``torch.ops.aten``, an alias, a class of torch or a
decoy ``__wrapped__``): with the operator record silenced, each one passes its check -- the
checkers before this lint. With the record (``probes.traced_ops``, run where the learner's
function lives), each gets the hint that names what ran. Both where the learner's function
is an object here and where it sits behind the grader's wire.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from prenorm_lib.checks import Hint, attention, ffn, probes, rmsnorm, rope

pytest_plugins = ["learner_wire"]


def rms_by_string(x, weight, eps=1e-5):
    norm = getattr(torch, "rms_" + "norm")
    return norm(x.float(), (x.shape[-1],), weight.float(), eps).to(x.dtype)


def rms_by_aten(x, weight, eps=1e-5):
    return torch.ops.aten.rms_norm(x.float(), [x.shape[-1]], weight.float(), eps).to(x.dtype)


def rms_by_native_layer_norm(x, weight, eps=1e-5):
    d, x32 = x.shape[-1], x.float()
    both = torch.cat([x32, -x32], -1)  # mean 0, variance mean(x²): LayerNorm of it is RMSNorm of x
    out = torch.ops.aten.native_layer_norm(both, [2 * d], None, None, eps)[0]
    return (out[..., :d] * weight.float()).to(x.dtype)


def rms_by_instance_norm(x, weight, eps=1e-5):
    d, x32 = x.shape[-1], x.float()
    both = torch.cat([x32, -x32], -1).reshape(-1, 1, 2 * d)  # one channel, 2d positions
    out = F.instance_norm(both, eps=eps).reshape(*x.shape[:-1], 2 * d)
    return (out[..., :d] * weight.float()).to(x.dtype)


def softmax_by_alias(x, dim):
    return getattr(torch.special, "soft" + "max")(x.double(), dim).to(x.dtype)


def softmax_by_categorical(x, dim):
    logits = x.double().movedim(dim, -1)
    return torch.distributions.Categorical(logits=logits, validate_args=False).probs.movedim(-1, dim).to(x.dtype)


def _decoy(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def softmax_behind_a_decoy(x, dim):
    return torch.softmax(x.double(), dim).to(x.dtype)


softmax_behind_a_decoy.__wrapped__ = _decoy  # inspect.getsource reads the decoy


def attention_by_flex(Q, K, V, mask=None):
    from torch.nn.attention.flex_attention import flex_attention

    lead = Q.shape[:-2]
    q, k, v = (t.reshape(-1, 1, *t.shape[-2:]).double() for t in (Q, K, V))
    if mask is not None:
        allowed = mask.expand(*lead, *mask.shape[-2:]).reshape(-1, *mask.shape[-2:])
        score_mod = lambda score, b, h, i, j: torch.where(allowed[b, i, j], score, -float("inf"))
    else:
        score_mod = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flex_attention(q, k, v, score_mod=score_mod)
    return out.reshape(*lead, Q.shape[-2], V.shape[-1]).to(Q.dtype)


def silu_by_string(x):
    return getattr(torch.ops.aten, "si" + "lu")(x)


ROADS = [
    (rmsnorm.rms_norm, rms_by_string, "rms_norm"),
    (rmsnorm.rms_norm, rms_by_aten, "rms_norm"),
    (rmsnorm.rms_norm, rms_by_native_layer_norm, "native_layer_norm"),
    (rmsnorm.rms_norm, rms_by_instance_norm, "instance_norm"),
    (ffn.silu, silu_by_string, "silu"),
    (attention.stable_softmax, softmax_by_alias, "softmax"),
    (attention.stable_softmax, softmax_by_categorical, "softmax"),
    (attention.stable_softmax, softmax_behind_a_decoy, "softmax"),
]


def _silenced(fn, args, kwargs=None):
    return []


@pytest.mark.parametrize(("checker", "road", "ran"), ROADS, ids=lambda v: getattr(v, "__name__", None))
def test_torchs_answer_by_another_name_is_seen_running(checker, road, ran, via, monkeypatch, capsys):
    with monkeypatch.context() as patched:  # the checkers before this lint: the road passes
        _silenced.__name__ = "traced_ops"
        patched.setattr(probes, "traced_ops", _silenced)
        checker.core(via(road))
        assert f"Exercise {checker.exercise_id} passed" in capsys.readouterr().out
    with pytest.raises(Hint, match="your code runs torch's") as info:
        checker.core(via(road))
    assert ran in str(info.value)


def test_flex_attention_is_named_by_the_record_and_fails_4_3(via):
    """Flex attention runs on CPU without gradients (its backward is not implemented there), so 4.3 fails it on
    the gradient; the record names it too (under a mode it refuses to run, and the record keeps its name)."""
    gen = torch.Generator().manual_seed(0)
    Q, K = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    V = torch.randn(2, 5, 6, generator=gen)
    names = probes.traced_ops(lambda *a: attention_by_flex(*a), [Q, K, V, None])
    assert "torch.nn.attention.flex_attention.flex_attention" in names and any(n.startswith("!") for n in names)
    with pytest.raises(Hint, match=r"flex|FlexAttention"):
        attention.attention.core(via(attention_by_flex))


def test_an_honest_answer_runs_nothing_refused(via, capsys):
    """The lint's control: the handout's own forms pass with the record on."""
    def kernel(x, weight, eps=1e-5):
        x32 = x.float()
        return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)

    def rotate(x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        c, s = cos.to(x.dtype), sin.to(x.dtype)
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)

    for checker, answer in ((rmsnorm.rms_norm, kernel), (attention.stable_softmax, _decoy),
                            (ffn.silu, lambda x: x * torch.sigmoid(x)), (rope.rotate_pairs, rotate)):
        checker.core(via(answer))
        assert f"Exercise {checker.exercise_id} passed" in capsys.readouterr().out


@pytest.mark.slow
def test_in_a_graded_kernel_the_record_is_made_there_and_named_in_the_hint():
    import sys

    if sys.platform != "linux":
        pytest.skip("bubblewrap confines kernels on Linux only")
    from prenorm_course.exercises import check
    from prenorm_course.exercises.build import read_notebook
    from prenorm_course.exercises.paths import repo_root, solution_path
    from prenorm_course.exercises.verify import filled_in

    root, name = repo_root(), "04_attention.ipynb"
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / name), read_notebook(solution_path(root, name)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 4.1"))
    cell.source = (cell.source.split("\n", 1)[0] + "\nimport torch\n"
                   "def stable_softmax(x, dim):\n"
                   "    return getattr(torch.special, 'soft' + 'max')(x.double(), dim).to(x.dtype)\n")
    result = check.check_notebook(nb, name, root, 120)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["4.1"][0] == check.HINT and "runs torch's `" in statuses["4.1"][1], statuses
    assert "[decided from the operators the learner's kernel reported]" in statuses["4.1"][1]
    assert statuses["4.3"][0] == statuses["4.4"][0] == check.PASSED, statuses
