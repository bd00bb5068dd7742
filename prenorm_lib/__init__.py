"""prenorm_lib — the library behind the prenorm course.

The notebooks explain and visualise; this package holds every piece of code they reuse.
Stateless kernels live in :mod:`prenorm_lib.functional`; the modules below own the
parameters, named and laid out as in the CS336 assignment so state dicts load both ways.
"""

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.ffn import GEGLU, Bilinear, FeedForward, ReGLU, SwiGLU, swiglu_hidden_dim
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM
from prenorm_lib.norm import RMSNorm
from prenorm_lib.reproducible import seed_everything, setup
from prenorm_lib.rope import RotaryPositionalEmbedding

__all__ = [
    "GEGLU",
    "Bilinear",
    "Embedding",
    "FeedForward",
    "Linear",
    "MultiHeadSelfAttention",
    "RMSNorm",
    "ReGLU",
    "RotaryPositionalEmbedding",
    "SwiGLU",
    "TransformerBlock",
    "TransformerLM",
    "functional",
    "seed_everything",
    "setup",
    "swiglu_hidden_dim",
]
