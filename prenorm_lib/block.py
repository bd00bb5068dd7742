"""The Transformer block, with the normalisation placed before, after, around, or nowhere.

Introduced in notebook 05. Each placement is a separate, explicit code path, so that no
reader can mistake one for another:

- ``norm="pre"`` (GPT-2 onwards, Llama, CS336): ``h = x + Attn(ln1(x))``,
  ``y = h + FFN(ln2(h))``. The residual stream from input to output never passes through
  a norm.
- ``norm="post"`` (Vaswani et al. 2017): ``z = ln1(x + Attn(x))``, ``y = ln2(z + FFN(z))``.
  Every sub-layer's sum is renormalised, so the stream is rescaled twice per block.
- ``norm="none"``: ``h = x + Attn(x)``, ``y = h + FFN(h)`` — the ablation without
  normalisation.

What current models changed after pre-norm (notebook 05, "the frontier"):

- ``norm="sandwich"`` (CogView, Gemma 2; Peri-LN): a norm before *and* after each
  sub-layer, ``h = x + ln1_out(Attn(ln1(x)))``.
- ``norm="reordered"`` (OLMo 2): the norm only on the sub-layer's output,
  ``h = x + ln1_out(Attn(x))``.
- ``norm="deepnorm"`` (Wang et al. 2022): post-norm with an up-weighted stream,
  ``z = ln1(α·x + Attn(x))``, α = (2L)^(1/4), and the branches' weights initialised down
  by β = (8L)^(−1/4).
- ``norm="rezero"`` (Bachlechner et al. 2020): no norm; ``h = x + α_attn·Attn(x)`` with a
  learnable α that starts at 0, so every block starts as the identity.
- ``norm="mix_ln"`` (Li, Yin & Liu 2024): post-norm in the first ⌊α·L⌋ blocks of the stack,
  pre-norm in the rest (α = ``post_ln_fraction``, 0.25 by default).
- ``norm="layernorm_scaling"`` (Sun et al. 2025): pre-norm with each norm's output divided
  by √ℓ in block ℓ = 1 … L, ``h = x + Attn(ln1(x)/√ℓ)``.

The facts of each placement — its forward method, its input and output norms, whether it
needs the depth or the block's index, whether the model needs a final norm — are one row of
:data:`prenorm_lib.config.PLACEMENTS`.

More options combine with the placements (fields of :class:`prenorm_lib.config.ModelConfig`):
``qk_norm`` normalises queries and keys — ``"flat"`` over the whole projection as OLMo 2 does,
``"per_head"`` (or ``True``) per head as Qwen3 does (see :mod:`prenorm_lib.attention`);
``scaled_init=True`` initialises the last matrix of each branch down by 1/√(2L), so that 2L
branches add a bounded amount to the stream at initialisation; ``normaliser="dyt"`` or
``"derf"`` puts a point-wise function in the place of every RMSNorm (see
:mod:`prenorm_lib.norm`); ``residual_scaling="depth_mup"`` or ``"completep"`` multiplies each
branch of a pre-norm block by (L/L₀)^(−1/2) or (L/L₀)^(−1).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.config import PLACEMENTS, ModelConfig, Placement, placements_in
from prenorm_lib.ffn import make_ffn
from prenorm_lib.layers import Linear
from prenorm_lib.norm import make_norm

NORMS = tuple(PLACEMENTS)  # every placement, in the table's order
NORM_PLACEMENTS = placements_in("course")  # the three placements notebook 05 compares (and exercise 5.3)


def deepnorm_constants(num_layers: int) -> tuple[float, float]:
    """DeepNorm's (α, β) for a decoder-only stack of ``num_layers`` blocks: ((2L)^(1/4), (8L)^(−1/4))."""
    validation.positive_int("num_layers", num_layers)
    return (2 * num_layers) ** 0.25, (8 * num_layers) ** -0.25


def _scale_weights(factor: float, linears: list[Linear]) -> None:
    """Multiply freshly initialised weights by ``factor`` (DeepNorm's β, the 1/√(2L) of scaled_init)."""
    with torch.no_grad():
        for linear in linears:
            linear.weight.mul_(factor)


class TransformerBlock(nn.Module):
    """Causal self-attention and a feed-forward network, each with a residual connection.

    Submodules are named as in the CS336 handout (``ln1``, ``attn``, ``ln2``, ``ffn``) so
    state dicts are interchangeable; with the default options there is nothing else. A
    norm on a sub-layer's *output* (sandwich, reordered) is ``ln1_out`` / ``ln2_out``;
    ReZero's scalars are ``alpha_attn`` / ``alpha_ffn``. Where a placement has no input
    norm (``none``, ``reordered``, ``rezero``), ``ln1`` and ``ln2`` are identities and own
    no parameters. Each placement is a row of :data:`prenorm_lib.config.PLACEMENTS`.

    ``num_layers`` is the depth L of the stack the block belongs to; DeepNorm and
    ``scaled_init`` need it. The keyword arguments are the CS336 block's and the options
    that predate :class:`~prenorm_lib.config.ModelConfig`; every other option, and the
    placements that differ from block to block (Mix-LN, LayerNorm Scaling), come through
    :meth:`from_config` with the block's index in the stack.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        max_seq_len: int,
        rope_theta: float | None = 10000.0,
        norm: str = "pre",
        ffn: str = "swiglu",
        eps: float = 1e-5,
        qk_norm: bool | str = False,
        scaled_init: bool = False,
        num_layers: int | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        placement = PLACEMENTS[validation.choice("norm", norm, NORMS)]
        validation.positive_int("d_ff", d_ff)
        validation.positive_int("max_seq_len", max_seq_len)
        if num_layers is not None:
            validation.positive_int("num_layers", num_layers)
        elif placement.needs_depth or scaled_init is True:
            needs = f'norm="{norm}"' if placement.needs_depth else "scaled_init=True"
            raise ValueError(f"num_layers (the depth of the stack) is required with {needs}, got None")
        if placement.needs_layer:
            raise ValueError(f'norm="{norm}" differs from block to block: build the block with '
                             f"TransformerBlock.from_config(config, layer_index)")
        config = ModelConfig(
            vocab_size=1,  # a block has no vocabulary; the field belongs to the model
            context_length=max_seq_len, d_model=d_model, num_layers=1 if num_layers is None else num_layers,
            num_heads=num_heads, d_ff=d_ff, rope_theta=rope_theta, norm=norm, ffn=ffn, eps=eps,
            qk_norm=qk_norm, scaled_init=scaled_init,
        )
        self._build(config, 0, device, dtype)

    @classmethod
    def from_config(cls, config: ModelConfig, layer_index: int = 0, device=None, dtype=None) -> TransformerBlock:
        """Block ``layer_index`` (0 … L − 1) of the stack that ``config`` describes."""
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        in_stack = isinstance(layer_index, int) and not isinstance(layer_index, bool)
        if not in_stack or not 0 <= layer_index < config.num_layers:
            raise ValueError(f"layer_index must be an int in [0, num_layers={config.num_layers}), got {layer_index!r}")
        block = cls.__new__(cls)
        nn.Module.__init__(block)
        block._build(config, layer_index, device, dtype)
        return block

    def _build(self, config: ModelConfig, layer_index: int, device, dtype) -> None:
        """Make the parameters, in the order that fixes the random draws: attention, FFN, then norms."""
        self.config, self.layer_index = config, layer_index
        self.placement: Placement = config.placement
        self.norm = config.norm
        scaled = config.residual_scaling != "none"
        self._forward = self.placement.scaled_forward if scaled else self.placement.forward
        d_model = config.d_model

        def norm(role: str, size: int = d_model) -> nn.Module:  # a normaliser of the attention sub-layer or the rest
            return make_norm(config.normaliser, size, eps=config.eps, alpha0=config.alpha0(role),
                             device=device, dtype=dtype)

        self.attn = MultiHeadSelfAttention(
            d_model, config.num_heads, max_seq_len=config.context_length,
            rope_theta=config.rope_theta if config.layer_has_rope(layer_index) else None,  # a NoPE layer: None
            rope_fraction=config.rope_fraction,
            qk_norm=config.qk_norm, eps=config.eps, norm_factory=lambda size: norm("attention", size),
            device=device, dtype=dtype, gate=config.attn_gate, sink=config.attn_sink,
            logit_softcap=config.attn_logit_softcap,
        )
        self.ffn = make_ffn(config.ffn, d_model, config.d_ff, device=device, dtype=dtype)
        if self.placement.input_norms:
            self.ln1, self.ln2 = norm("attention"), norm("other")
        else:
            self.ln1, self.ln2 = nn.Identity(), nn.Identity()
        if self.placement.output_norms:
            self.ln1_out, self.ln2_out = norm("attention"), norm("other")
        if self.placement.setup is not None:
            getattr(self, self.placement.setup)(config, layer_index, device, dtype)
        if self._forward == "scaled_pre_norm_forward":
            self.branch_multiplier = config.branch_multiplier  # 1 without residual scaling
            self.norm_output_scale = getattr(self, "norm_output_scale", 1.0)  # LayerNorm Scaling's setup sets it
        if config.scaled_init:
            _scale_weights(1 / math.sqrt(2 * config.num_layers), [self.attn.output_proj, self.ffn.w2])

    # ---- each placement's own scalars and constants (the rows' ``setup``) ---------------------

    def rezero_setup(self, config: ModelConfig, layer_index: int, device, dtype) -> None:
        """ReZero's α and α', one learnable scalar per branch, starting at 0."""
        self.alpha_attn = nn.Parameter(torch.zeros((), device=device, dtype=dtype))
        self.alpha_ffn = nn.Parameter(torch.zeros((), device=device, dtype=dtype))

    def deepnorm_setup(self, config: ModelConfig, layer_index: int, device, dtype) -> None:
        """DeepNorm's stream weight α, and its β on the branches' freshly drawn weights."""
        # β scales what the branches add (values, attention output, FFN); queries and keys
        # only decide where attention looks, so they keep their scale.
        self.deepnorm_alpha, beta = deepnorm_constants(config.num_layers)
        ffn_linears = [m for m in self.ffn.modules() if isinstance(m, Linear)]
        _scale_weights(beta, [self.attn.v_proj, self.attn.output_proj, *ffn_linears])

    def mix_ln_setup(self, config: ModelConfig, layer_index: int, device, dtype) -> None:
        """Mix-LN: this block is post-norm if it is one of the first ⌊post_ln_fraction · L⌋."""
        self.mix_ln_post = layer_index < config.mix_ln_post_blocks

    def layernorm_scaling_setup(self, config: ModelConfig, layer_index: int, device, dtype) -> None:
        """LayerNorm Scaling: block ℓ = layer_index + 1 multiplies its norms' outputs by 1/√ℓ."""
        self.norm_output_scale = 1 / math.sqrt(layer_index + 1)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        return getattr(self, self._forward)(x, token_positions)  # looked up per call: the row's method, by name

    def extra_repr(self) -> str:
        return f"norm={self.norm!r}" + (f", layer_index={self.layer_index}" if self.placement.needs_layer else "")

    def pre_norm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Attn(Norm(x)), then + FFN(Norm(·)): the norms sit on the branches only."""
        h = x + self.attn(self.ln1(x), token_positions)  # (..., T, d_model)
        return h + self.ffn(self.ln2(h))

    def post_norm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Norm(x + Attn(x)), then Norm(z + FFN(z)): the norms sit on the residual stream."""
        z = self.ln1(x + self.attn(x, token_positions))  # (..., T, d_model)
        return self.ln2(z + self.ffn(z))

    def unnormalised_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Attn(x), then + FFN(·): residual connections and nothing to rescale them."""
        h = x + self.attn(x, token_positions)
        return h + self.ffn(h)

    def sandwich_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Norm(Attn(Norm(x))): pre-norm, and each branch's output normalised before it is added."""
        h = x + self.ln1_out(self.attn(self.ln1(x), token_positions))  # (..., T, d_model)
        return h + self.ln2_out(self.ffn(self.ln2(h)))

    def reordered_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + Norm(Attn(x)) (OLMo 2): the branch reads the raw stream, its output is normalised."""
        h = x + self.ln1_out(self.attn(x, token_positions))  # (..., T, d_model)
        return h + self.ln2_out(self.ffn(h))

    def deepnorm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Norm(α·x + Attn(x)), then Norm(α·z + FFN(z)): post-norm that trusts the stream α times more."""
        alpha = self.deepnorm_alpha
        z = self.ln1(alpha * x + self.attn(x, token_positions))  # (..., T, d_model)
        return self.ln2(alpha * z + self.ffn(z))

    def rezero_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + α·Attn(x), then + α'·FFN(·), α and α' learnt from 0: no norm, each block starts as the identity."""
        h = x + self.alpha_attn * self.attn(x, token_positions)  # (..., T, d_model)
        return h + self.alpha_ffn * self.ffn(h)

    def mix_ln_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Mix-LN: :meth:`post_norm_forward` in the bottom blocks, :meth:`pre_norm_forward` above them."""
        if self.mix_ln_post:
            return self.post_norm_forward(x, token_positions)
        return self.pre_norm_forward(x, token_positions)

    def scaled_pre_norm_forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """x + m·Attn(s·Norm(x)), then + m·FFN(s·Norm(·)): pre-norm with two depth factors.

        s scales each norm's output (LayerNorm Scaling: 1/√ℓ in block ℓ), m each branch
        (depth-μP: (L/L₀)^(−1/2), CompleteP: (L/L₀)^(−1)); either is 1 where not chosen.
        """
        s, m = self.norm_output_scale, self.branch_multiplier
        h = x + m * self.attn(s * self.ln1(x), token_positions)  # (..., T, d_model)
        return h + m * self.ffn(s * self.ln2(h))
