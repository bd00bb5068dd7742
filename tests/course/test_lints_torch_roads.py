"""torch's other roads to an answer, found by a red-team round: each now meets the lint.

These are torch's own implementations (a lint, README says, not a guarantee): LayerNorm of
``[x, −x]`` and the Python RMSNorm among torch's decompositions for 1.1, the C binding of
SiLU and GLU of ``[x, x]`` for 2.1, softmin of ``−x`` and ``torch._softmax`` for 4.1, the math
kernel of fused attention and the function reached through ``__call__`` for 4.3, and the ONNX
rotary embedding for 3.2. Each passed its check before the patterns were widened.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch.onnx.ops as onnx_ops
from torch._decomp import decompositions

from prenorm_lib.checks import Hint, attention, ffn, rmsnorm, rope


def rms_by_layer_norm(x, weight, eps=1e-5):
    d = x.shape[-1]
    return torch.layer_norm(torch.cat([x, -x], -1), (2 * d,), torch.cat([weight, weight]), None, eps)[..., :d]


def rms_by_decomposition(x, weight, eps=1e-5):
    return decompositions._fused_rms_norm(x, [x.shape[-1]], weight, eps)[0]


def silu_by_c_binding(x):
    return torch._C._nn.silu(x)


def silu_by_glu(x):
    return torch.nn.GLU(-1)(torch.cat([x, x], -1))


def softmax_by_softmin(x, dim):
    return F.softmin(-x, dim)


def softmax_private(x, dim):
    return torch._softmax(x, dim, False)


def attention_math_kernel(Q, K, V, mask=None):
    additive = None if mask is None else torch.zeros(mask.shape, dtype=Q.dtype).masked_fill(~mask, float("-inf"))
    return torch.ops.aten._scaled_dot_product_attention_math(Q, K, V, attn_mask=additive)[0]


def attention_through_call(Q, K, V, mask=None):
    return F.scaled_dot_product_attention.__call__(Q, K, V, attn_mask=mask)


def rotation_by_onnx(x, cos, sin):
    *lead, T, D = x.shape
    c = cos.to(x.dtype).expand(*lead, T, D // 2).reshape(-1, T, D // 2)
    s = sin.to(x.dtype).expand(*lead, T, D // 2).reshape(-1, T, D // 2)
    return onnx_ops.rotary_embedding(x.reshape(-1, 1, T, D), c, s, interleaved=True).reshape(x.shape)


@pytest.mark.parametrize(("checker", "road", "called"), [
    (rmsnorm.rms_norm, rms_by_layer_norm, "layer_norm"),
    (rmsnorm.rms_norm, rms_by_decomposition, "decompositions"),
    (ffn.silu, silu_by_c_binding, "_nn.silu"),
    (ffn.silu, silu_by_glu, "GLU"),
    (attention.stable_softmax, softmax_by_softmin, "softmin"),
    (attention.stable_softmax, softmax_private, "_softmax"),
    (attention.attention, attention_math_kernel, "_scaled_dot_product"),
    (attention.attention, attention_through_call, "scaled_dot_product_attention"),
    (rope.rotate_pairs, rotation_by_onnx, "rotary_embedding"),
], ids=lambda value: getattr(value, "__name__", None) if callable(value) else None)
def test_torchs_other_roads_meet_the_lint(checker, road, called):
    if road is rotation_by_onnx:  # torch's ONNX op has no backward: the input's gradient fails it before the lint
        with pytest.raises(Hint, match="no autograd formula"):
            checker.core(road)
        return
    with pytest.raises(Hint, match="your code calls") as info:
        checker.core(road)
    assert called in str(info.value)
