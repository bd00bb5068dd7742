"""The model's configuration: one frozen, validated record, and the table of norm placements.

``ModelConfig`` holds every choice that decides a :class:`~prenorm_lib.model.TransformerLM`
(nanoGPT's ``GPTConfig`` and Hugging Face's ``LlamaConfig`` are the pattern): the six sizes
of the CS336 constructor, then one field per option, each with its default and a comment.
It checks itself when made, and each message names the field, the value and what was
expected. ``TransformerLM.from_config(config)`` builds the model;
``TransformerLM(vocab_size, …, d_ff, **options)`` — CS336's front door — makes the same
config from its arguments, so the two doors give the same model, parameter for parameter.

**Adding an option** is one field below, its check in ``__post_init__`` (when more than a
type), and the line in the module that reads ``config.<field>``: the block and the
attention are built from the config (``TransformerBlock.from_config``), so nothing else is
passed along by hand. The lab's ``build_model(corpus, seed, **options)`` and the experiment
records accept the new field at once; a record's ``CONFIG`` names only what it changes.

**Adding a placement** is one row of :data:`PLACEMENTS` (and, when it needs one, its
forward method on :class:`~prenorm_lib.block.TransformerBlock`) plus a reference test that
writes its formula out again (``tests/model/test_block.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prenorm_lib import validation
from prenorm_lib.attention import GATES, qk_norm_form
from prenorm_lib.ffn import FFN_KINDS
from prenorm_lib.norm import NORMALISERS, POINTWISE
from prenorm_lib.positions import POSITION_KINDS


@dataclass(frozen=True)
class Placement:
    """Where one placement puts the normalisation, and what the block and model need for it.

    ``forward`` names the :class:`~prenorm_lib.block.TransformerBlock` method that computes
    the block; ``setup`` (or None) the method that makes the placement's own scalars and
    constants once the norms exist. ``input_norms``: ``ln1``/``ln2`` are norms (else
    identities); ``output_norms``: the block has ``ln1_out``/``ln2_out`` on the branches'
    outputs. ``final_norm``: the stream is never normalised inside the stack, so the model
    needs ``ln_final`` before its head. ``needs_depth``: constants depend on the depth L;
    ``needs_layer``: blocks differ by their place ℓ in the stack. ``scaled_forward``: the
    method that computes this placement with depth-μP's or CompleteP's branch multipliers
    (None where they do not apply). ``group``: ``"course"`` for the three placements of
    notebook 05's main comparison (and exercise 5.3), ``"frontier"`` for what came after.
    """

    name: str
    forward: str
    input_norms: bool
    output_norms: bool
    final_norm: bool
    group: str
    summary: str
    needs_depth: bool = False
    needs_layer: bool = False
    setup: str | None = None
    scaled_forward: str | None = None


PLACEMENTS: dict[str, Placement] = {row.name: row for row in (
    Placement("pre", "pre_norm_forward", input_norms=True, output_norms=False, final_norm=True, group="course",
              summary="x + F(Norm(x)): GPT-2 onwards, Llama, CS336", scaled_forward="scaled_pre_norm_forward"),
    Placement("post", "post_norm_forward", input_norms=True, output_norms=False, final_norm=False, group="course",
              summary="Norm(x + F(x)): Vaswani et al. 2017"),
    Placement("none", "unnormalised_forward", input_norms=False, output_norms=False, final_norm=False,
              group="course", summary="x + F(x): the ablation without normalisation"),
    Placement("sandwich", "sandwich_forward", input_norms=True, output_norms=True, final_norm=True,
              group="frontier", summary="x + Norm(F(Norm(x))): CogView, Gemma 2, Peri-LN"),
    Placement("reordered", "reordered_forward", input_norms=False, output_norms=True, final_norm=True,
              group="frontier", summary="x + Norm(F(x)): OLMo 2"),
    Placement("deepnorm", "deepnorm_forward", input_norms=True, output_norms=False, final_norm=False,
              group="frontier", summary="Norm(α·x + F(x)), α = (2L)^(1/4), branches initialised × (8L)^(−1/4): "
              "Wang et al. 2022", needs_depth=True, setup="deepnorm_setup"),
    Placement("rezero", "rezero_forward", input_norms=False, output_norms=False, final_norm=False,
              group="frontier", summary="x + α·F(x), α learnt from 0: Bachlechner et al. 2020",
              setup="rezero_setup"),
    Placement("mix_ln", "mix_ln_forward", input_norms=True, output_norms=False, final_norm=True, group="frontier",
              summary="post-norm in the first ⌊αL⌋ blocks, pre-norm after: Mix-LN, Li, Yin & Liu 2024",
              needs_depth=True, needs_layer=True, setup="mix_ln_setup"),
    Placement("layernorm_scaling", "scaled_pre_norm_forward", input_norms=True, output_norms=False,
              final_norm=True, group="frontier",
              summary="x + F(Norm(x)/√ℓ) in block ℓ = 1 … L: LayerNorm Scaling, Sun et al. 2025",
              needs_layer=True, setup="layernorm_scaling_setup", scaled_forward="scaled_pre_norm_forward"),
)}


def placements_in(group: str) -> tuple[str, ...]:
    """The names of the placements of ``group`` ("course" or "frontier"), in table order."""
    validation.choice("group", group, ("course", "frontier"))
    return tuple(name for name, row in PLACEMENTS.items() if row.group == group)


# Residual-branch multipliers by depth: x + (L/L_base)^(−a) · F(·). Depth-μP (Yang et al. 2023)
# has a = 1/2, CompleteP (Dey et al. 2025) a = 1; "none" is the standard parametrisation. The
# rules are those of Dey et al.'s reference code (EleutherAI/nanoGPT-mup, branch completep: both
# branches of every block multiplied, the blocks' Adam learning rate times (L/L_base)^(a−1) and
# their ε times (L/L_base)^(−a), no depth factor in the initialisation) — the model applies the
# multiplier, the lab's training loop the learning rate and ε (lab.train._parameter_groups).
# Where the course departs: (1) both papers build on μP in width; the course keeps its standard
# width parametrisation (CS336's initialisation, one learning rate), so only the depth half of
# their rules is here; (2) Yang et al. derive depth-μP for blocks of one layer and report
# "fundamental limitations" for deeper blocks "(such as modern transformers)" (abstract) — every
# block here is such a block; (3) Adam's base ε is torch's 1e-8, theirs 1e-12; (4) L counts
# blocks (each with two branches), L_base is ``base_depth``.
RESIDUAL_SCALINGS: dict[str, float] = {"none": 0.0, "depth_mup": 0.5, "completep": 1.0}
MIX_LN_POST_FRACTION = 0.25  # Mix-LN's α: the share of blocks, from the bottom, in post-norm


@dataclass(frozen=True)
class ModelConfig:
    """Everything that decides a TransformerLM. Frozen: a changed copy is ``dataclasses.replace``.

    The first six fields are the CS336 constructor's; the rest are options with the
    defaults of the handout's model (RoPE θ = 10000, pre-norm RMSNorm, SwiGLU).
    """

    # The CS336 sizes.
    vocab_size: int
    context_length: int  # also the RoPE cache's length
    d_model: int
    num_layers: int
    num_heads: int  # each head gets d_model / num_heads channels
    d_ff: int
    # Positions: "rope" turns queries and keys by θ; "sinusoidal" adds Vaswani et al.'s vectors to
    # the embeddings; "none" gives none. rope_theta=None is the older spelling of "none".
    rope_theta: float | None = 10000.0
    positions: str = "rope"
    # Partial RoPE (Barbero et al.'s p-RoPE): the share of each head's pairs RoPE rotates, the
    # fastest ⌊p · d_head/2⌋; the others pass unrotated. 1: RoPE; 0: nothing rotated.
    rope_fraction: float = 1.0
    # A layer without positions every n-th, counting layers from 1 (the others RoPE): Llama 4's
    # nope_layer_interval and SmolLM3's no_rope_layer_interval, both 4. None: RoPE in every layer.
    nope_layer_interval: int | None = None
    # The block: the norm placement (a row of PLACEMENTS), the feed-forward network, RMSNorm's ε.
    norm: str = "pre"
    ffn: str = "swiglu"
    eps: float = 1e-5
    # QK-norm: False, "per_head" (Qwen3; True means this) or "flat" (OLMo 2).
    qk_norm: bool | str = False
    # Initialise the last matrix of each branch down by 1/√(2L) (GPT-2's scaled init, N read as 2L).
    scaled_init: bool = False
    # What normalises: "rmsnorm", or a point-wise function in every norm's place — "dyt"
    # (Dynamic Tanh) or "derf" (Dynamic erf), each starting its α at the α₀ below: attention's
    # for the norms of the attention sub-layer (ln1, ln1_out, QK-norm), other's for the rest
    # (ln2, ln2_out, the final norm), the split DyT's §7.2 tunes for language models.
    normaliser: str = "rmsnorm"
    alpha0_attention: float = 0.5
    alpha0_other: float = 0.5
    # Mix-LN: the share of blocks (from the bottom) in post-norm; ⌊share · L⌋ blocks.
    post_ln_fraction: float = MIX_LN_POST_FRACTION
    # Residual-branch multipliers (L/base_depth)^(−a): "depth_mup" (a = 1/2), "completep" (a = 1).
    residual_scaling: str = "none"
    base_depth: int = 1
    # The attention output (notebook 04 §8): Qiu et al.'s sigmoid gate after SDPA, "headwise" or
    # "elementwise" (None: none), and gpt-oss's learned sink logit, one per head. The gate's weights
    # are drawn right after each layer's attention projections, so every later weight differs from a
    # plain model's of the same seed; the attention_sinks record adds the options to a plain model
    # instead, to keep the shared weights equal.
    attn_gate: str | None = None
    attn_sink: bool = False
    # Gemma 2's logit soft-capping, c·tanh(logit/c): on every attention score (Gemma 2: 50) and on
    # the final logits (Gemma 2: 30). None: no cap.
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff", "base_depth"):
            validation.positive_int(name, getattr(self, name))
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads} "
                             f"(each head gets d_model / num_heads dimensions)")
        validation.choice("positions", self.positions, POSITION_KINDS)
        if self.positions == "rope" and self.rope_theta is None:
            object.__setattr__(self, "positions", "none")  # the older spelling of a model without positions
        if self.positions != "rope":
            object.__setattr__(self, "rope_theta", None)  # nothing is rotated
        else:
            validation.positive_float("rope_theta", self.rope_theta)
        placement = validation.choice("norm", self.norm, PLACEMENTS)
        validation.choice("ffn", self.ffn, FFN_KINDS)
        validation.positive_float("eps", self.eps)  # checked even where no RMSNorm uses it
        qk_norm_form(self.qk_norm)
        if not isinstance(self.scaled_init, bool):
            raise TypeError(f"scaled_init must be True or False, got {self.scaled_init!r}")
        if self.attn_gate is not None:
            validation.choice("attn_gate", self.attn_gate, GATES)
        if not isinstance(self.attn_sink, bool):
            raise TypeError(f"attn_sink must be True or False, got {self.attn_sink!r}")
        self._check_positions()
        self._check_normaliser(PLACEMENTS[placement])
        self._check_mix_ln()
        self._check_residual_scaling(PLACEMENTS[placement])
        for name in ("attn_logit_softcap", "final_logit_softcap"):
            if getattr(self, name) is not None:
                validation.positive_float(name, getattr(self, name))

    def _check_positions(self) -> None:
        fraction, interval = self.rope_fraction, self.nope_layer_interval
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"rope_fraction must be a share in [0, 1] (of each head's pairs rotated), "
                             f"got {fraction!r}")
        if interval is not None:
            validation.positive_int("nope_layer_interval", interval)
            if interval == 1:
                raise ValueError("nope_layer_interval=1 removes RoPE from every layer: that is positions='none'")
            if interval > self.num_layers:
                raise ValueError(f"nope_layer_interval={interval} leaves no layer without positions in "
                                 f"num_layers={self.num_layers}; use more layers or a smaller interval")
        changed = [name for name, value, default in (("rope_fraction", fraction, 1.0),
                                                     ("nope_layer_interval", interval, None)) if value != default]
        if changed and self.positions != "rope":
            raise ValueError(f"{changed[0]} changes where RoPE turns; with positions={self.positions!r} it would "
                             f"change nothing, got {getattr(self, changed[0])!r}")

    def layer_has_rope(self, layer_index: int) -> bool:
        """Whether block ``layer_index`` (0 … L − 1) rotates its queries and keys: RoPE, and not a NoPE layer.

        With ``nope_layer_interval`` n, block ℓ = layer_index + 1 has no positions when n divides ℓ,
        as in Llama 4's reference code (``(layer_id + 1) % nope_layer_interval == 0``).
        """
        if self.positions != "rope":
            return False
        return self.nope_layer_interval is None or (layer_index + 1) % self.nope_layer_interval != 0

    def _check_normaliser(self, placement: Placement) -> None:
        validation.choice("normaliser", self.normaliser, NORMALISERS)
        for name in ("alpha0_attention", "alpha0_other"):
            value = validation.positive_float(name, getattr(self, name))
            if self.normaliser not in POINTWISE and value != ModelConfig.__dataclass_fields__[name].default:
                raise ValueError(f"{name} is the initial α of DyT or Derf; with normaliser={self.normaliser!r} "
                                 f"it would change nothing, got {getattr(self, name)}")
        if self.normaliser != "rmsnorm" and not (placement.input_norms or placement.output_norms):
            raise ValueError(f"normaliser={self.normaliser!r} replaces the model's norms, but norm={self.norm!r} "
                             f"has none to replace")

    def _check_mix_ln(self) -> None:
        fraction = self.post_ln_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
            raise ValueError(f"post_ln_fraction must be a fraction in (0, 1), got {fraction!r}")
        if self.norm != "mix_ln":
            if fraction != MIX_LN_POST_FRACTION:
                raise ValueError(f"post_ln_fraction is Mix-LN's split; with norm={self.norm!r} it would change "
                                 f"nothing, got {fraction}")
            return
        post = self.mix_ln_post_blocks
        if post == 0:
            raise ValueError(f"norm='mix_ln' with num_layers={self.num_layers} and post_ln_fraction={fraction} puts "
                             f"⌊{fraction * self.num_layers:g}⌋ = 0 blocks in post-norm: that is pre-norm; "
                             f"use more layers or a larger fraction")

    def _check_residual_scaling(self, placement: Placement) -> None:
        validation.choice("residual_scaling", self.residual_scaling, RESIDUAL_SCALINGS)
        if self.residual_scaling == "none":
            if self.base_depth != 1:
                raise ValueError(f"base_depth is the reference depth of residual_scaling; with "
                                 f"residual_scaling='none' it would change nothing, got {self.base_depth}")
            return
        if placement.scaled_forward is None:
            scalable = [name for name, row in PLACEMENTS.items() if row.scaled_forward]
            raise ValueError(f"residual_scaling={self.residual_scaling!r} multiplies the branches of a pre-norm "
                             f"block; norm must be one of {scalable}, got {self.norm!r}")
        if self.scaled_init:
            raise ValueError(f"residual_scaling={self.residual_scaling!r} already scales the branches by depth; "
                             f"scaled_init=True would scale them a second time (CompleteP's code drops the "
                             f"1/√(2L) init): use one of them")

    @property
    def placement(self) -> Placement:
        """The row of :data:`PLACEMENTS` for ``norm``."""
        return PLACEMENTS[self.norm]

    @property
    def mix_ln_post_blocks(self) -> int:
        """Mix-LN's number of post-norm blocks at the bottom of the stack, ⌊post_ln_fraction · L⌋."""
        return math.floor(self.post_ln_fraction * self.num_layers)

    @property
    def residual_exponent(self) -> float:
        """a in the branch multiplier (L/base_depth)^(−a): 0, 1/2 (depth-μP) or 1 (CompleteP)."""
        return RESIDUAL_SCALINGS[self.residual_scaling]

    @property
    def branch_multiplier(self) -> float:
        """What each residual branch is multiplied by: (L/base_depth)^(−a), 1 without residual scaling."""
        return (self.num_layers / self.base_depth) ** -self.residual_exponent

    @property
    def hidden_lr_scale(self) -> float:
        """Adam's learning rate of the blocks' parameters, relative to the rest: (L/base_depth)^(a−1).

        Dey et al.'s rule for the depth exponent a (their reference code): 1/√(L/base_depth) for
        depth-μP, 1 for CompleteP, 1 for the standard parametrisation.
        """
        return (self.num_layers / self.base_depth) ** (self.residual_exponent - 1) if self.residual_exponent else 1.0

    @property
    def hidden_eps_scale(self) -> float:
        """Adam's ε for the blocks' parameters, relative to the rest: (L/base_depth)^(−a) (same source)."""
        return self.branch_multiplier

    def alpha0(self, role: str) -> float:
        """The initial α of a point-wise normaliser in ``role``: "attention" or "other"."""
        validation.choice("role", role, ("attention", "other"))
        return self.alpha0_attention if role == "attention" else self.alpha0_other

    def as_kwargs(self) -> dict[str, Any]:
        """Every field as a keyword argument: ``TransformerLM(**config.as_kwargs())`` is ``from_config``."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def check_names(cls, names: Iterable[str], who: str) -> None:
        """Refuse option names that are no field of ModelConfig, naming the fields there are."""
        unknown = sorted(set(names) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"{who} got unknown option(s) {unknown}; expected fields of ModelConfig: "
                             f"{list(cls.field_names())}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], who: str = "ModelConfig") -> ModelConfig:
        """A config from a mapping of field names (a record's JSON, a sweep's row), checked by name first."""
        cls.check_names(options, who)
        return cls(**options)
