"""Rotary position embedding (RoPE) as a module with a cos/sin cache.

Introduced in notebook 03. The cache holds cos and sin of every (position, pair) angle up
to ``max_seq_len``; ``forward`` gathers the rows of the positions it is given, so packed
sequences and offsets (e.g. generation that continues at position 100) need nothing new.

Also here: the other ways to write the same rotation (the explicit block-diagonal
matrix, Meta's complex-number form), partial RoPE (``rotated_fraction``: only the fastest
pairs turn), and what it takes for a model trained at one context length to read a longer
one (:func:`extend_context`: position interpolation, NTK-aware Θ, or YaRN).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping

import torch
from torch import nn

from prenorm_lib import functional, validation
from prenorm_lib.positions import LogLengthTemperature


class RotaryPositionalEmbedding(nn.Module):
    """Rotate query/key pairs by position-dependent angles; no learnable parameters.

    ``pairing="interleaved"`` (default) rotates dimensions (2k, 2k+1) as in RoFormer and
    the CS336 handout, as a complex product (:func:`rotate_complex`); ``pairing="half"``
    rotates (k, k + d_k/2) as Hugging Face's Llama does (``functional.apply_rope``). The
    cos/sin buffers are non-persistent: they are derived from ``theta`` and never saved in
    a state dict.

    ``position_scale`` multiplies every position before it is turned into angles:
    1 (default) is plain RoPE; L/L′ < 1 is Chen et al.'s position interpolation, which
    squeezes positions 0 … L′ − 1 into the range of angles a model trained at length L saw.

    ``rotated_fraction`` p < 1 is partial RoPE (Barbero et al.'s p-RoPE): only the fastest
    ⌊p · d_k/2⌋ pairs turn; the others pass through unrotated, the same at every position
    (``functional.rope_angles``).

    ``speeds`` replaces the per-pair speeds Θ^(−2k/d_k) by any others, shape (d_k/2,): the
    way a targeted interpolation such as YaRN's (:func:`yarn_speeds`) slows some pairs and
    not others. ``qk_scale`` multiplies every rotated query and key (default 1): YaRN's
    "length scaling", √(1/t), which multiplies every attention logit by 1/t. With a
    ``qk_scale`` other than 1 the map is a rotation times a constant, no longer a rotation.
    """

    def __init__(
        self, theta: float, d_k: int, max_seq_len: int, device=None, pairing: str = "interleaved",
        position_scale: float = 1.0, rotated_fraction: float = 1.0, speeds: torch.Tensor | None = None,
        qk_scale: float = 1.0,
    ):
        super().__init__()
        self.position_scale = validation.positive_float("position_scale", position_scale)
        self.qk_scale = validation.positive_float("qk_scale", qk_scale)
        angles = functional.rope_angles(theta, d_k, max_seq_len, rotated_fraction)  # (max_seq_len, d_k/2), validates
        self.theta, self.d_k, self.max_seq_len = float(theta), d_k, max_seq_len
        self.rotated_fraction = float(rotated_fraction)
        self.speeds = None
        if speeds is not None:  # per-pair speeds of the caller's choosing, the p-RoPE cut kept
            self.speeds = _checked_speeds(speeds, d_k).clone()
            turning = (angles[1] != 0).to(torch.float64)  # (d_k/2,): 0 for the pairs p-RoPE leaves still
            angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), self.speeds * turning)
        angles = angles * position_scale  # (max_seq_len, d_k/2)
        self.pairing = validation.choice("pairing", pairing, ("interleaved", "half"))
        self.register_buffer("cos", (qk_scale * angles.cos()).to(torch.float32).to(device), persistent=False)
        self.register_buffer("sin", (qk_scale * angles.sin()).to(torch.float32).to(device), persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Rotate ``x`` (..., seq_len, d_k) at ``token_positions`` (..., seq_len).

        ``token_positions`` broadcasts against the leading dimensions of ``x``; when it is
        omitted the positions are 0, 1, …, seq_len − 1.
        """
        validation.floating("x", x)
        validation.last_dim("x", x, self.d_k, "d_k")
        if x.ndim < 2:
            raise ValueError(f"x must be (..., seq_len, d_k), got shape {tuple(x.shape)}")
        seq_len = x.shape[-2]
        if token_positions is None:  # positions 0 … seq_len−1: a slice of the cache, no gather
            if seq_len > self.max_seq_len:
                raise ValueError(
                    f"x has seq_len={seq_len}, so its positions reach {seq_len - 1}, but they must be "
                    f"< max_seq_len={self.max_seq_len}; build the module with a larger max_seq_len"
                )
            cos, sin = self.cos[:seq_len], self.sin[:seq_len]  # (seq_len, d_k/2)
        else:
            self._check_positions(token_positions, seq_len)
            cos = self.cos[token_positions]  # (..., seq_len, d_k/2)
            sin = self.sin[token_positions]  # (..., seq_len, d_k/2)
        # The real form, same numbers, where complex numbers cost: MPS lacks complex ops, and
        # torch.compile's Inductor generates no code for them (it would fall back to eager).
        if self.pairing == "half" or x.device.type == "mps" or torch.compiler.is_compiling():
            return functional.apply_rope(x, cos, sin, self.pairing)  # (..., seq_len, d_k)
        # Interleaved pairs are complex numbers, and the rotation one complex product: on a CPU
        # it runs forward and backward in a third of the time of the real form's four passes,
        # and gives the same numbers (tests/model/test_rope.py checks it against the real forms).
        return rotate_complex(x, torch.complex(cos, sin))  # (..., seq_len, d_k)

    def _check_positions(self, positions: torch.Tensor, seq_len: int) -> None:
        validation.tensor("token_positions", positions)
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"token_positions must be an integer tensor, got dtype {positions.dtype}")
        if positions.ndim == 0 or positions.shape[-1] != seq_len:
            raise ValueError(
                f"token_positions must end in seq_len={seq_len} (the second-to-last dim of x), "
                f"got shape {tuple(positions.shape)}"
            )
        if not validation.values_checked(positions):
            return
        low, high = int(positions.min()), int(positions.max())
        if low < 0:
            raise ValueError(f"token_positions must be >= 0, got {low}")
        if high >= self.max_seq_len:
            raise ValueError(
                f"token_positions must be < max_seq_len={self.max_seq_len}, got {high}; "
                f"build the module with a larger max_seq_len"
            )

    def extra_repr(self) -> str:
        options = [f"theta={self.theta:g}", f"d_k={self.d_k}", f"max_seq_len={self.max_seq_len}",
                   f"pairing={self.pairing!r}"]
        if self.position_scale != 1.0:
            options.append(f"position_scale={self.position_scale:g}")
        if self.rotated_fraction != 1.0:
            options.append(f"rotated_fraction={self.rotated_fraction:g}")
        if self.speeds is not None:
            options.append("speeds=given")
        if self.qk_scale != 1.0:
            options.append(f"qk_scale={self.qk_scale:.4g}")
        return ", ".join(options)


def _checked_speeds(speeds: object, d_k: int) -> torch.Tensor:
    validation.tensor("speeds", speeds)
    if speeds.shape != (d_k // 2,) or not speeds.is_floating_point():
        raise ValueError(f"speeds must be a float tensor of shape (d_k/2,) = ({d_k // 2},), "
                         f"got {speeds.dtype} of shape {tuple(speeds.shape)}")
    if not torch.isfinite(speeds).all() or (speeds < 0).any():
        raise ValueError("speeds must be finite and >= 0 (radians per position), got "
                         f"{[round(v, 4) for v in speeds.tolist()]}")
    return speeds.to(torch.float64)


def rotation_matrix(theta: float, d_k: int, position: int) -> torch.Tensor:
    """The explicit block-diagonal d_k × d_k rotation R^i of the handout (interleaved pairs).

    For teaching and for tests only: applying RoPE through this matrix costs O(d_k²) per
    vector instead of O(d_k), which the RoPE notebook and ``prenorm_course.bench`` measure.
    """
    angles = functional.rope_angles(theta, d_k, position + 1)[position]  # (d_k/2,)
    cos, sin = angles.cos(), angles.sin()
    R = torch.zeros(d_k, d_k, dtype=torch.float64)
    idx = torch.arange(0, d_k, 2)
    R[idx, idx], R[idx, idx + 1] = cos, -sin
    R[idx + 1, idx], R[idx + 1, idx + 1] = sin, cos
    return R.to(torch.float32)


def interleaved_to_half_permutation(d_k: int) -> torch.Tensor:
    """The permutation that turns the interleaved pair layout into the half-split one.

    ``perm = [0, 2, 4, …, 1, 3, 5, …]``: ``x[..., perm]`` puts the first member of every
    interleaved pair (2k) at position k and the second (2k + 1) at k + d_k/2, which is
    exactly where the half-split pairing looks for them. Hence, for any ``x``,
    ``rope_half(x[..., perm]) == rope_interleaved(x)[..., perm]``: one rotation, two
    storage orders.
    """
    validation.positive_int("d_k", d_k)
    if d_k % 2:
        raise ValueError(f"d_k must be even for RoPE, got {d_k}")
    return torch.cat((torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)))


def complex_rotations(theta: float, d_k: int, max_seq_len: int) -> torch.Tensor:
    """e^{i·m·θ_k} for every position m < ``max_seq_len`` and pair k: (max_seq_len, d_k/2), complex64.

    The complex counterpart of the cos/sin cache (real part cos, imaginary part sin), as
    Meta's reference Llama code precomputes it.
    """
    angles = functional.rope_angles(theta, d_k, max_seq_len)  # (max_seq_len, d_k/2), validates
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)


def rotate_complex(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """RoPE written with complex numbers: pair (x_2k, x_2k+1) is x_2k + i·x_2k+1, times e^{iα}.

    Multiplying by a unit complex number *is* a rotation of the plane, so the whole of
    RoPE is one elementwise product. ``x`` is (..., seq_len, d_k) and ``rotations``
    (..., seq_len, d_k/2), e.g. rows of :func:`complex_rotations`. Interleaved pairs,
    like the RoFormer paper's complex notation and Meta's ``apply_rotary_emb``; the
    arithmetic runs in (at least) float32, the result has ``x``'s dtype.
    """
    validation.floating("x", x)
    validation.tensor("rotations", rotations)
    if not rotations.is_complex():
        raise TypeError(f"rotations must be a complex tensor (e^(i·angle)), got dtype {rotations.dtype}")
    if x.ndim < 2 or x.shape[-1] % 2 or x.shape[-1] // 2 != rotations.shape[-1]:
        raise ValueError(
            f"x must be (..., seq_len, d_k) with d_k = 2 × rotations.shape[-1] = {2 * rotations.shape[-1]}, "
            f"got shape {tuple(x.shape)}"
        )
    real = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2))  # (..., seq_len, d_k/2, 2)
    try:
        pairs = torch.view_as_complex(real)  # (..., seq_len, d_k/2) complex, a view: no copy
    except RuntimeError:  # strides a complex view cannot express (e.g. an odd offset): copy once
        pairs = torch.view_as_complex(real.contiguous())
    return torch.view_as_real(pairs * rotations).flatten(-2).to(x.dtype)  # (..., seq_len, d_k)


CONTEXT_SCALINGS = ("none", "interpolation", "ntk", "yarn")
# YaRN's α and β as Peng et al. found them for the Llama family (§3.2: "α = 1 and β = 32"); they
# add that the values "should be tuned on a case-by-case basis".
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def ntk_theta(theta: float, d_k: int, factor: float) -> float:
    """The "NTK-aware" base for reading ``factor`` × the training length: Θ′ = Θ · factor^(d/(d−2)).

    Pair k then turns by Θ′^(−2k/d) = Θ^(−2k/d) · factor^(−2k/(d−2)) per position: the
    fastest pair (k = 0) keeps its speed, the slowest (k = d/2 − 1) is slowed by exactly
    ``factor`` — interpolated like Chen et al.'s positions — and the pairs between are
    slowed by a geometric blend of the two.
    """
    validation.positive_float("theta", theta)
    validation.positive_int("d_k", d_k)
    if d_k < 4 or d_k % 2:
        raise ValueError(f"d_k must be even and at least 4 for NTK-aware scaling (it divides by d_k − 2), got {d_k}")
    validation.positive_float("factor", factor)
    return theta * factor ** (d_k / (d_k - 2))


def yarn_speeds(theta: float, d_k: int, factor: float, trained_length: int,
                alpha: float = YARN_ALPHA, beta: float = YARN_BETA) -> torch.Tensor:
    """YaRN's per-pair speeds, "NTK-by-parts" (Peng et al. 2023, §3.2, Eqs. 13, 17, 18, 20): (d_k/2,), float64.

    Pair d turns θ_d = Θ^(−2d/d_k) per position; its wavelength is λ_d = 2π/θ_d (Eq. 13) and
    r(d) = L/λ_d counts the turns it makes within the training length L (Eq. 17). The ramp
    γ(r) is 0 for r < α, 1 for r > β and (r − α)/(β − α) between (Eq. 18), and the new speed is

        h(θ_d) = (1 − γ(r(d))) · θ_d / s + γ(r(d)) · θ_d        (Eq. 20, s = ``factor``):

    pairs that turn fewer than α times within L are interpolated exactly as Chen et al.'s
    positions are (θ_d/s), pairs that turn more than β times keep their speed, and those
    between get a blend. Eq. 17 prints b′ (the NTK-aware base) inside λ_d; this follows
    Eq. 13's λ_d = 2π/θ_d with the model's own base, as the authors' code does.
    """
    validation.positive_float("theta", theta)
    validation.positive_float("factor", factor)
    validation.positive_int("trained_length", trained_length)
    validation.positive_float("alpha", alpha)
    validation.positive_float("beta", beta)
    if beta <= alpha:
        raise ValueError(f"beta must be larger than alpha (the ramp runs from α to β turns), got alpha={alpha}, "
                         f"beta={beta}")
    speeds = functional.rope_angles(theta, d_k, 2)[1]  # (d_k/2,) θ_d, radians per position; validates d_k
    turns = trained_length * speeds / (2 * math.pi)  # r(d) = L / λ_d
    ramp = ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0)  # γ(r)
    return (1 - ramp) * speeds / factor + ramp * speeds


def yarn_qk_scale(factor: float) -> float:
    """YaRN's "length scaling" √(1/t) = 0.1 · ln(s) + 1 (Peng et al. 2023, §3.4, Eq. 22); 1 for s ≤ 1.

    Multiplying queries and keys by √(1/t) divides every attention logit by the temperature
    t: for s > 1, t < 1 and the softmax is sharpened, by more the longer the extension.
    """
    validation.positive_float("factor", factor)
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def extend_context(model: nn.Module, context_length: int, scaling: str = "none", *,
                   yarn_alpha: float = YARN_ALPHA, yarn_beta: float = YARN_BETA,
                   yarn_temperature: bool = True, nope_temperature: Mapping[str, float] | None = None) -> nn.Module:
    """A copy of ``model`` (a TransformerLM) that reads ``context_length`` tokens, its weights untouched.

    RoPE has no weights, only a cos/sin cache sized for the training length L
    (``model.context_length``); the copy's caches cover ``context_length`` = L′ = s·L:

    - ``"none"``: the same angles, continued. Positions L … L′ − 1 turn the slow clocks
      further than training ever did.
    - ``"interpolation"`` (Chen et al. 2023): positions are scaled by L/L′, so every angle
      lies in the trained range; neighbours are now 1/s positions apart.
    - ``"ntk"``: Θ becomes :func:`ntk_theta` (Θ, d_k, s): the fast pairs keep their
      resolution, the slow ones are interpolated.
    - ``"yarn"`` (Peng et al. 2023): each pair's speed becomes :func:`yarn_speeds` with
      ``yarn_alpha``, ``yarn_beta`` ("NTK-by-parts"), and, unless ``yarn_temperature`` is
      False, queries and keys are multiplied by :func:`yarn_qk_scale` (s).

    Partial RoPE (a module's ``rotated_fraction``) is kept: the pairs it leaves unrotated
    stay so. A model without RoPE (sinusoidal or no positions) accepts only ``"none"``.

    ``nope_temperature`` (``{"floor_scale": …, "attn_scale": …}``) gives every attention layer
    without positions — a model's NoPE layers (``nope_layer_interval``), or all of a model
    without positions — Llama 4's log-length temperature on its queries
    (:class:`~prenorm_lib.positions.LogLengthTemperature`), an inference-time option in
    Meta's reference code (``attn_temperature_tuning``).
    """
    validation.positive_int("context_length", context_length)
    validation.choice("scaling", scaling, CONTEXT_SCALINGS)
    trained = getattr(model, "context_length", None)
    if not isinstance(model, nn.Module) or not isinstance(trained, int):
        raise TypeError(f"model must be a TransformerLM (a module with a context_length), got {type(model).__name__}")
    if context_length < trained:
        raise ValueError(f"context_length must be >= the model's context_length={trained}, got {context_length}")
    factor = context_length / trained
    longer = copy.deepcopy(model)
    found = False
    for parent in longer.modules():
        for name, rope in parent.named_children():
            if isinstance(rope, RotaryPositionalEmbedding):
                found = True
                setattr(parent, name, _extended(rope, context_length, scaling, factor, trained,
                                                 yarn_alpha, yarn_beta, yarn_temperature))
    if scaling != "none" and not found:
        raise ValueError(f"scaling={scaling!r} rescales RoPE, but this model has none; use scaling='none'")
    if nope_temperature is not None:
        _add_nope_temperature(longer, nope_temperature)
    longer.context_length = context_length
    return longer


def _add_nope_temperature(model: nn.Module, settings: Mapping[str, float]) -> None:
    if not isinstance(settings, Mapping) or set(settings) - {"floor_scale", "attn_scale"}:
        raise ValueError(f"nope_temperature must be a mapping with floor_scale (and attn_scale), got {settings!r}")
    if getattr(getattr(model, "config", None), "positions", None) == "sinusoidal":
        raise ValueError("nope_temperature scales the queries of layers without positions; this model's "
                         "positions are sinusoidal (in its embeddings), so it has no such layer")
    layers = [m for m in model.modules() if hasattr(m, "query_temperature") and getattr(m, "rope", 0) is None]
    if not layers:
        raise ValueError("nope_temperature scales the queries of layers without positions, and this model has none "
                         "(build it with nope_layer_interval, or positions='none')")
    for attention in layers:
        attention.query_temperature = LogLengthTemperature(**settings)


def _extended(rope: RotaryPositionalEmbedding, context_length: int, scaling: str, factor: float, trained: int,
              alpha: float, beta: float, temperature: bool) -> RotaryPositionalEmbedding:
    """``rope`` rebuilt for ``context_length`` positions under ``scaling`` (see :func:`extend_context`)."""
    if scaling != "none" and (rope.speeds is not None or rope.qk_scale != 1.0):
        raise ValueError(f"scaling={scaling!r} rescales RoPE from its trained speeds, but this model's RoPE was "
                         f"already rescaled (speeds or qk_scale set); extend the model as it was trained")
    theta, speeds, qk_scale, scale = rope.theta, rope.speeds, rope.qk_scale, rope.position_scale
    if scaling == "ntk":
        theta = ntk_theta(rope.theta, rope.d_k, factor)
    elif scaling == "interpolation":
        scale = rope.position_scale / factor
    elif scaling == "yarn":
        speeds = yarn_speeds(rope.theta, rope.d_k, factor, trained, alpha, beta)
        qk_scale = yarn_qk_scale(factor) if temperature else 1.0
    return RotaryPositionalEmbedding(
        theta, rope.d_k, context_length, device=rope.cos.device, pairing=rope.pairing, position_scale=scale,
        rotated_fraction=rope.rotated_fraction, speeds=speeds, qk_scale=qk_scale,
    )
