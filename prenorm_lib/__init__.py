"""prenorm_lib — the library behind the prenorm course.

The top level is the model a learner builds, one file per piece, in the order the
notebooks introduce them: the stateless kernels (:mod:`~prenorm_lib.functional`), bias-free
``Linear`` and ``Embedding`` (:mod:`~prenorm_lib.layers`), RMSNorm and the point-wise functions that
can replace it (:mod:`~prenorm_lib.norm`),
the feed-forward networks (:mod:`~prenorm_lib.ffn`), rotary and absolute positions
(:mod:`~prenorm_lib.rope`, :mod:`~prenorm_lib.positions`), attention, the block and the
language model, the model's configuration and its table of norm placements
(:mod:`~prenorm_lib.config`), plus the argument checks they share (:mod:`~prenorm_lib.validation`).
Modules own the parameters, named and laid out as in the CS336 assignment, so state dicts
load both ways.

Two neighbours import the model, never the other way round:

- :mod:`prenorm_lib.lab` — experiments *on* the model: corpora, the training loop, probes,
  timing, figures, sliders and the experiment records;
- :mod:`prenorm_lib.checks` — the exercise checkers a notebook calls after each exercise.

The course's own tools (grading, building exercise notebooks, the site, the classroom, the
benchmark) live beside this package in ``prenorm_course/`` and are not installed with it.

``prenorm_lib.setup()``, the first line of every notebook, is the lab's
:func:`~prenorm_lib.lab.reproducible.setup`; it is imported on first use, so importing
the model alone loads no plotting library.
"""

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.config import ModelConfig
from prenorm_lib.ffn import GEGLU, Bilinear, FeedForward, ReGLU, SwiGLU, swiglu_hidden_dim
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM
from prenorm_lib.norm import DynamicErf, DynamicTanh, RMSNorm
from prenorm_lib.rope import RotaryPositionalEmbedding

_FROM_THE_LAB = ("setup", "seed_everything")

__all__ = [
    "GEGLU",
    "Bilinear",
    "DynamicErf",
    "DynamicTanh",
    "Embedding",
    "FeedForward",
    "Linear",
    "ModelConfig",
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


def __getattr__(name: str):
    """``prenorm_lib.setup`` and ``prenorm_lib.seed_everything``, loaded from the lab when first asked for."""
    if name in _FROM_THE_LAB:
        from prenorm_lib.lab import reproducible

        return getattr(reproducible, name)
    raise AttributeError(f"module 'prenorm_lib' has no attribute {name!r}")
