"""Every promised error: the right exception type, and a message naming the argument and its value.

A learner who passes the wrong thing should read what to change, not a shape error from
deep inside a matmul. Each row: what to call, the exception expected, and fragments the
message must contain (the argument's name and the offending value or shape).
"""

from __future__ import annotations

import pytest
import torch

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.ffn import GEGLU, Bilinear, FeedForward, ReGLU, SwiGLU, make_ffn, swiglu_hidden_dim
from prenorm_lib.lab import prose
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM
from prenorm_lib.norm import RMSNorm
from prenorm_lib.positions import SinusoidalPositions, sinusoidal_encoding
from prenorm_lib.rope import RotaryPositionalEmbedding, extend_context, ntk_theta, rotate_complex

LM_ARGS = {"vocab_size": 40, "context_length": 12, "d_model": 16, "num_layers": 1, "num_heads": 4, "d_ff": 32}


def lm(**changes) -> TransformerLM:
    return TransformerLM(**{**LM_ARGS, **changes})


def block(**changes) -> TransformerBlock:
    return TransformerBlock(**{"d_model": 16, "num_heads": 4, "d_ff": 32, "max_seq_len": 8, **changes})


def rope(**changes) -> RotaryPositionalEmbedding:
    return RotaryPositionalEmbedding(**{"theta": 10000.0, "d_k": 8, "max_seq_len": 16, **changes})


def rope_at(positions: torch.Tensor) -> torch.Tensor:
    return rope()(torch.randn(2, 4, 8), positions)  # seq_len = 4


def attention(mask=None, Q=None, K=None, V=None) -> torch.Tensor:
    Q = torch.randn(2, 4, 8) if Q is None else Q
    K = torch.randn(2, 4, 8) if K is None else K
    V = torch.randn(2, 4, 8) if V is None else V
    return functional.scaled_dot_product_attention(Q, K, V, mask)


def case(call, error, *fragments, id):
    return pytest.param(call, error, fragments, id=id)


CASES = [
    # RoPE
    case(lambda: rope(d_k=7), ValueError, "d_k", "7", id="rope-odd-d_k"),
    case(lambda: rope(d_k=8.0), TypeError, "d_k", "8.0", id="rope-float-d_k"),
    case(lambda: rope(theta=0.0), ValueError, "theta", "0", id="rope-zero-theta"),
    case(lambda: rope(max_seq_len=0), ValueError, "max_seq_len", "0", id="rope-zero-max_seq_len"),
    case(lambda: rope(pairing="rotate"), ValueError, "pairing", "'rotate'", id="rope-unknown-pairing"),
    case(lambda: rope_at(torch.tensor([0, 1, 2, 16])), ValueError, "token_positions", "16", "max_seq_len=16",
         id="positions-too-large"),
    case(lambda: rope_at(torch.tensor([-1, 0, 1, 2])), ValueError, "token_positions", "-1", id="positions-negative"),
    case(lambda: rope_at(torch.arange(4.0)), TypeError, "token_positions", "float32", id="positions-float"),
    case(lambda: rope_at(torch.arange(5)), ValueError, "token_positions", "(5,)", id="positions-wrong-length"),
    case(lambda: rope()(torch.randn(2, 4, 6)), ValueError, "x", "(2, 4, 6)", "d_k=8", id="rope-x-last-dim"),
    case(lambda: rope()(torch.randn(8)), ValueError, "x", "(8,)", id="rope-x-without-seq-dim"),
    case(lambda: functional.apply_rope(torch.randn(4, 8), torch.ones(4, 4), torch.zeros(4, 4), "neox"),
         ValueError, "pairing", "'neox'", id="apply_rope-unknown-pairing"),
    case(lambda: MultiHeadSelfAttention(16, 2, max_seq_len=8, rope_theta=1e4)(torch.randn(1, 4, 16),
         torch.tensor([0, 1, 2, 8])), ValueError, "token_positions", "8", id="mhsa-positions-too-large"),
    case(lambda: lm()(torch.randint(0, 40, (1, 4)), torch.tensor([0, 1, 2, 12])), ValueError,
         "token_positions", "12", id="lm-positions-too-large"),
    case(lambda: rope(position_scale=0.0), ValueError, "position_scale", "0", id="rope-zero-position_scale"),
    case(lambda: rotate_complex(torch.randn(4, 8), torch.ones(4, 4)), TypeError, "rotations", "float32",
         id="rotate_complex-real-rotations"),
    case(lambda: rotate_complex(torch.randn(4, 6), torch.ones(4, 4, dtype=torch.complex64)), ValueError, "x",
         "(4, 6)", "2 × rotations.shape[-1] = 8", id="rotate_complex-shape"),
    case(lambda: ntk_theta(1e4, 2, 2.0), ValueError, "d_k", "2", id="ntk_theta-d_k-too-small"),
    case(lambda: ntk_theta(1e4, 16, 0.0), ValueError, "factor", "0", id="ntk_theta-zero-factor"),
    case(lambda: extend_context(lm(), 24, "linear"), ValueError, "scaling", "'linear'", id="extend-unknown-scaling"),
    case(lambda: extend_context(lm(), 6), ValueError, "context_length", "12", "6", id="extend-shorter"),
    case(lambda: extend_context(RMSNorm(8), 24), TypeError, "model", "RMSNorm", id="extend-not-a-model"),
    case(lambda: extend_context(lm(positions="none"), 24, "interpolation"), ValueError, "scaling",
         "'interpolation'", id="extend-rescale-without-rope"),
    # absolute positions
    case(lambda: lm(positions="alibi"), ValueError, "positions", "'alibi'", id="lm-unknown-positions"),
    case(lambda: SinusoidalPositions(7), ValueError, "d_model", "7", id="sinusoidal-odd-d_model"),
    case(lambda: sinusoidal_encoding(torch.arange(4.0), 8), TypeError, "positions", "float32",
         id="sinusoidal-float-positions"),
    case(lambda: SinusoidalPositions(8)(torch.randn(2, 4, 6)), ValueError, "x", "(2, 4, 6)", "d_model=8",
         id="sinusoidal-x-last-dim"),
    # last dimension is not d_model
    case(lambda: RMSNorm(8)(torch.randn(2, 7)), ValueError, "x", "(2, 7)", "d_model=8", id="rmsnorm-last-dim"),
    case(lambda: SwiGLU(8, 32)(torch.randn(2, 7)), ValueError, "x", "(2, 7)", "d_model=8", id="swiglu-last-dim"),
    case(lambda: FeedForward(8)(torch.randn(2, 7)), ValueError, "x", "(2, 7)", "d_model=8", id="ffn-last-dim"),
    case(lambda: GEGLU(8, 32)(torch.randn(2, 7)), ValueError, "x", "(2, 7)", "d_model=8", id="geglu-last-dim"),
    case(lambda: ReGLU(8, 32).hidden(torch.randn(7)), ValueError, "x", "(7,)", "d_model=8", id="reglu-hidden-last-dim"),
    case(lambda: MultiHeadSelfAttention(8, 2)(torch.randn(2, 3, 7)), ValueError, "x", "(2, 3, 7)", "d_model=8",
         id="mhsa-last-dim"),
    case(lambda: block()(torch.randn(1, 3, 15)), ValueError, "x", "(1, 3, 15)", id="block-last-dim"),
    case(lambda: functional.rms_norm(torch.randn(2, 8), torch.ones(7)), ValueError, "weight", "(7,)",
         id="rms_norm-weight-shape"),
    case(lambda: functional.layer_norm(torch.randn(2, 8), torch.ones(7)), ValueError, "weight", "(7,)",
         id="layer_norm-weight-shape"),
    case(lambda: functional.layer_norm(torch.randn(2, 8), torch.ones(8), torch.zeros(9)), ValueError, "bias", "(9,)",
         id="layer_norm-bias-shape"),
    case(lambda: functional.layer_norm(torch.randn(2, 8), torch.ones(1, 8)), ValueError, "weight", "(1, 8)",
         id="layer_norm-weight-2d"),
    case(lambda: functional.layer_norm(torch.ones(2, 8, dtype=torch.int64), torch.ones(8)), TypeError, "x", "int64",
         id="layer_norm-int-input"),
    case(lambda: functional.layer_norm(torch.randn(2, 8), None), TypeError, "weight", "NoneType",
         id="layer_norm-no-weight"),
    case(lambda: RMSNorm(8)([1.0] * 8), TypeError, "x", "list", id="rmsnorm-not-a-tensor"),
    case(lambda: RMSNorm(8)(torch.ones(2, 8, dtype=torch.int64)), TypeError, "x", "int64", id="rmsnorm-int-input"),
    # heads must divide d_model
    case(lambda: MultiHeadSelfAttention(10, 3), ValueError, "d_model=10", "num_heads=3", id="mhsa-indivisible"),
    case(lambda: block(d_model=10, num_heads=3), ValueError, "d_model=10", "num_heads=3", id="block-indivisible"),
    case(lambda: lm(d_model=10, num_heads=3), ValueError, "d_model=10", "num_heads=3", id="lm-indivisible"),
    case(lambda: MultiHeadSelfAttention(16, 2, rope_theta=1e4), ValueError, "max_seq_len", id="mhsa-rope-no-max"),
    # sizes must be positive ints
    case(lambda: RMSNorm(0), ValueError, "d_model", "0", id="rmsnorm-zero-d_model"),
    case(lambda: MultiHeadSelfAttention(8, -1), ValueError, "num_heads", "-1", id="mhsa-negative-heads"),
    case(lambda: SwiGLU(8, d_ff=0), ValueError, "d_ff", "0", id="swiglu-zero-d_ff"),
    case(lambda: FeedForward(8, d_ff=-4), ValueError, "d_ff", "-4", id="ffn-negative-d_ff"),
    case(lambda: Bilinear(8, d_ff=0), ValueError, "d_ff", "0", id="bilinear-zero-d_ff"),
    case(lambda: ReGLU(64, d_ff=128.0), TypeError, "d_ff", "128.0", id="reglu-float-d_ff"),
    case(lambda: GEGLU(0), ValueError, "d_model", "0", id="geglu-zero-d_model"),
    case(lambda: block(d_ff=0), ValueError, "d_ff", "0", id="block-zero-d_ff"),
    case(lambda: block(max_seq_len=-8), ValueError, "max_seq_len", "-8", id="block-negative-max_seq_len"),
    case(lambda: lm(vocab_size=0), ValueError, "vocab_size", "0", id="lm-zero-vocab"),
    case(lambda: lm(context_length=-2), ValueError, "context_length", "-2", id="lm-negative-context"),
    case(lambda: lm(num_layers=0), ValueError, "num_layers", "0", id="lm-zero-layers"),
    case(lambda: lm(d_model=0), ValueError, "d_model", "0", id="lm-zero-d_model"),
    case(lambda: lm(num_heads=-4), ValueError, "num_heads", "-4", id="lm-negative-heads"),
    case(lambda: lm(d_ff=0), ValueError, "d_ff", "0", id="lm-zero-d_ff"),
    case(lambda: Linear(0, 4), ValueError, "in_features", "0", id="linear-zero-in"),
    case(lambda: Embedding(4, -3), ValueError, "embedding_dim", "-3", id="embedding-negative-dim"),
    case(lambda: functional.causal_mask(0), ValueError, "seq_len", "0", id="causal_mask-zero"),
    case(lambda: swiglu_hidden_dim(-5), ValueError, "d_model", "-5", id="hidden_dim-negative"),
    case(lambda: RMSNorm(64.0), TypeError, "d_model", "64.0", id="rmsnorm-float-d_model"),
    case(lambda: RMSNorm(True), TypeError, "d_model", "True", id="rmsnorm-bool-d_model"),
    case(lambda: MultiHeadSelfAttention(64, 4.0), TypeError, "num_heads", "4.0", id="mhsa-float-heads"),
    case(lambda: MultiHeadSelfAttention("64", 4), TypeError, "d_model", "'64'", id="mhsa-str-d_model"),
    case(lambda: SwiGLU(64, d_ff=128.0), TypeError, "d_ff", "128.0", id="swiglu-float-d_ff"),
    case(lambda: lm(vocab_size=40.0), TypeError, "vocab_size", "40.0", id="lm-float-vocab"),
    case(lambda: lm(d_model=16.0), TypeError, "d_model", "16.0", id="lm-float-d_model"),
    # eps must be a finite number > 0
    case(lambda: RMSNorm(8, eps=0.0), ValueError, "eps", "0.0", id="rmsnorm-zero-eps"),
    case(lambda: RMSNorm(8, eps=-1e-5), ValueError, "eps", "-1e-05", id="rmsnorm-negative-eps"),
    case(lambda: RMSNorm(8, eps=float("inf")), ValueError, "eps", "inf", id="rmsnorm-infinite-eps"),
    case(lambda: RMSNorm(8, eps=float("nan")), ValueError, "eps", "nan", id="rmsnorm-nan-eps"),
    case(lambda: RMSNorm(8, eps="1e-5"), TypeError, "eps", "'1e-5'", id="rmsnorm-str-eps"),
    case(lambda: functional.rms_norm(torch.randn(2, 8), torch.ones(8), eps=0), ValueError, "eps", "0",
         id="rms_norm-zero-eps"),
    case(lambda: functional.layer_norm(torch.randn(2, 8), torch.ones(8), eps=-1.0), ValueError, "eps", "-1.0",
         id="layer_norm-negative-eps"),
    case(lambda: block(eps=0.0), ValueError, "eps", "0.0", id="block-zero-eps"),
    case(lambda: lm(eps=-1.0), ValueError, "eps", "-1.0", id="lm-negative-eps"),
    # attention inputs
    case(lambda: attention(mask=torch.ones(4, 4)), TypeError, "mask", "float32", id="mask-float"),
    case(lambda: attention(mask=torch.ones(4, 5, dtype=torch.bool)), ValueError, "mask", "(4, 5)",
         id="mask-wrong-shape"),
    case(lambda: attention(mask=[[True] * 4] * 4), TypeError, "mask", "list", id="mask-not-a-tensor"),
    case(lambda: attention(Q=torch.ones(2, 4, 8, dtype=torch.int64)), TypeError, "Q", "int64", id="Q-int"),
    case(lambda: attention(K=torch.randn(2, 4, 6)), ValueError, "K", "(2, 4, 6)", id="K-wrong-d_k"),
    case(lambda: attention(V=torch.randn(2, 5, 8)), ValueError, "V", "(2, 5, 8)", id="V-wrong-rows"),
    # unknown names
    case(lambda: block(norm="layernorm"), ValueError, "norm", "'layernorm'", id="block-unknown-norm"),
    case(lambda: block(norm="peri"), ValueError, "norm", "'peri'", "'sandwich'", id="block-unknown-frontier-norm"),
    case(lambda: block(norm="deepnorm"), ValueError, "num_layers", "deepnorm", "None", id="block-deepnorm-no-depth"),
    case(lambda: block(scaled_init=True), ValueError, "num_layers", "scaled_init", "None",
         id="block-scaled-init-no-depth"),
    case(lambda: block(norm="deepnorm", num_layers=0), ValueError, "num_layers", "0", id="block-zero-num_layers"),
    case(lambda: block(scaled_init="yes", num_layers=2), TypeError, "scaled_init", "'yes'",
         id="block-scaled-init-not-bool"),
    case(lambda: block(qk_norm=1), TypeError, "qk_norm", "1", id="block-qk-norm-not-bool"),
    case(lambda: lm(norm="deepnorm", num_layers=2.0), TypeError, "num_layers", "2.0", id="lm-float-num_layers"),
    case(lambda: block(ffn="gelu"), ValueError, "ffn", "'gelu'", id="block-unknown-ffn"),
    case(lambda: lm(norm="post_ln"), ValueError, "norm", "'post_ln'", id="lm-unknown-norm"),
    case(lambda: lm(ffn="moe"), ValueError, "ffn", "'moe'", id="lm-unknown-ffn"),
    case(lambda: FeedForward(8, activation="gelu"), ValueError, "activation", "'gelu'", id="ffn-unknown-activation"),
    case(lambda: make_ffn("glu2", 8), ValueError, "ffn", "'glu2'", id="make_ffn-unknown"),
    # the prose corpus
    case(lambda: prose.make_prose_corpus(validation_every=1), ValueError, "validation_every", "1",
         id="prose-hold-out-everything"),
    case(lambda: prose.make_prose_corpus(validation_every=2.0), TypeError, "validation_every", "2.0",
         id="prose-float-validation_every"),
    case(lambda: prose.strip_rst(b"Title"), TypeError, "source", "bytes", id="strip_rst-bytes"),
    case(lambda: prose.source_files("no/such/_sources"), ValueError, "sources_dir", "no/such/_sources",
         id="prose-missing-sources"),
    case(lambda: prose.ByteTokenizer().decode([65, 256]), ValueError, "ids", "256", id="bytes-id-too-large"),
    case(lambda: prose.ByteTokenizer().encode(b"abc"), TypeError, "text", "bytes", id="bytes-encode-bytes"),
    # token ids
    case(lambda: lm()(torch.zeros(1, 4)), TypeError, "token_ids", "float32", id="token_ids-float"),
    case(lambda: lm()(torch.zeros(1, 4, dtype=torch.bool)), TypeError, "token_ids", "bool", id="token_ids-bool"),
    case(lambda: lm()([[1, 2, 3]]), TypeError, "token_ids", "list", id="token_ids-not-a-tensor"),
    case(lambda: lm()(torch.tensor([[1, 2, 99]])), ValueError, "token_ids", "99", id="token_ids-too-large"),
    case(lambda: lm()(torch.tensor([[1, -3, 2]])), ValueError, "token_ids", "-3", id="token_ids-negative"),
    case(lambda: lm()(torch.zeros(1, 13, dtype=torch.int64)), ValueError, "seq_len=13", "context_length=12",
         id="sequence-longer-than-context"),
]


@pytest.mark.parametrize(("call", "error", "fragments"), CASES)
def test_bad_input_raises_a_clear_error(call, error, fragments):
    with pytest.raises(error) as raised:
        call()
    assert type(raised.value) is error
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from {message!r}"
