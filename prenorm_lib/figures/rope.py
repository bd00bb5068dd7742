"""Figures of notebook 03 (RoPE): clocks that turn with position, and RoFormer's decay.

The drawing functions here are also the callbacks of the notebook's sliders, so each one
builds a small figure on a single set of axes (a redraw stays well under 0.2 s).
The computations they show (wavelengths, the relative-position score table, the
long-term decay bound, the memory of the two implementations) live here as plain
functions, so the notebook prints the very numbers the pictures are drawn from.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from prenorm_lib import functional
from prenorm_lib.plotting import COLORS
from prenorm_lib.rope import RotaryPositionalEmbedding

ROPE_COLORS = {"query": COLORS["pre"], "key": COLORS["post"], "trail": COLORS["input"]}
# Bold, spelled out: the house style's "semibold" is missing from DejaVu Sans, and the fallback
# logs a findfont warning to stderr, which nbval would compare.
TITLE = {"fontweight": "bold"}
_CIRCLE = np.exp(1j * np.linspace(0.0, 2.0 * np.pi, 65))  # unit circle, drawn once per clock


def wavelengths(theta: float, d_k: int) -> torch.Tensor:
    """Positions needed for pair k to turn once: 2π / θ_k, shape (d_k/2,), float64.

    θ_k is the angle pair k turns per position (``functional.rope_angles`` at position 1).
    """
    per_position = functional.rope_angles(theta, d_k, 2)[1]  # (d_k/2,) radians per position
    return 2.0 * math.pi / per_position


def draw_wavelengths(theta: float = 10000.0, d_ks: tuple[int, ...] = (16, 128), context: int | None = 32):
    """Wavelength of every pair on a log scale: the first pairs are fast clocks, the last slow."""
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    for d_k, marker in zip(d_ks, ("o", "."), strict=False):
        k = np.arange(d_k // 2)
        ax.plot(k / (d_k // 2), wavelengths(theta, d_k).numpy(), marker=marker, label=f"d_k = {d_k}")
    if context is not None:
        ax.axhline(context, color=COLORS["reference"], linestyle="--", linewidth=1.0)
        ax.text(0.75, context * 0.55, f"context length {context}", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("pair index k / (d_k/2)")
    ax.set_ylabel("wavelength 2π/θ_k (positions)")
    ax.set_title(f"Fast clocks and slow clocks (Θ = {theta:g})", **TITLE)
    ax.legend()
    return fig


def _bare(ax) -> None:
    """Equal aspect, no axes; no ticks at all, which also keeps a slider redraw fast."""
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.axis("off")


def _clock(ax, center: complex, hand: complex, color: str, label: str | None = None, trail=None) -> None:
    """One clock face at ``center``: unit circle, an optional trail of past hands, the hand."""
    ring = center + _CIRCLE
    ax.plot(ring.real, ring.imag, color=COLORS["input"], linewidth=0.8)
    if trail is not None:
        points = center + trail
        ax.plot(points.real, points.imag, ".", color=ROPE_COLORS["trail"], markersize=3)
    ax.plot([center.real, center.real + hand.real], [center.imag, center.imag + hand.imag], color=color,
            linewidth=2.2, solid_capstyle="round", label=label)


def draw_clock_hands(position: int = 5, d_k: int = 16, theta: float = 10000.0, columns: int = 4):
    """Every pair of one vector as a clock hand at ``position``: pair k has turned by position·θ_k.

    The vector starts as (1, 0) in every pair, so the hand's angle *is* the rotation. The
    grey dots are the hand's earlier positions 0 … position − 1 (at most 32 of them):
    dense on the slow clocks, scattered around the dial on the fast ones.
    """
    angles = functional.rope_angles(theta, d_k, position + 1).numpy()  # (position+1, d_k/2)
    period = wavelengths(theta, d_k).numpy()  # (d_k/2,)
    n_pairs = d_k // 2
    rows = math.ceil(n_pairs / columns)
    fig, ax = plt.subplots(figsize=(1.35 * columns, 1.45 * rows + 0.35))
    for k in range(n_pairs):
        center = complex(2.6 * (k % columns), -2.8 * (k // columns))
        past = np.exp(1j * angles[max(0, position - 32) : position, k])
        _clock(ax, center, np.exp(1j * angles[position, k]), ROPE_COLORS["query"], trail=past)
        ax.text(center.real, center.imag - 1.35, f"k={k}  λ={period[k]:.3g}", ha="center", va="top", fontsize=7)
    _bare(ax)
    ax.set_title(f"position m = {position}: pair k turned by m·θ_k", fontsize=10, **TITLE)
    return fig


def shift_example(d_k: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed query and key (d_k,) from their own generator, for the shift demo."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(d_k, generator=gen), torch.randn(d_k, generator=gen)


def shifted_score(offset: int, m: int = 7, n: int = 3, d_k: int = 16, max_seq_len: int = 512) -> float:
    """q·k after rotating q to position m + offset and k to n + offset."""
    q, k = shift_example(d_k)
    rope = RotaryPositionalEmbedding(10000.0, d_k, max_seq_len)
    q_rot = rope(q[None], torch.tensor([m + offset]))[0]
    k_rot = rope(k[None], torch.tensor([n + offset]))[0]
    return float(q_rot @ k_rot)


def draw_shift(offset: int = 0, m: int = 7, n: int = 3, d_k: int = 16, pairs: int = 4):
    """The first ``pairs`` clocks of q (at m + offset) and k (at n + offset).

    Both hands turn as the offset grows, but the angle between them in every pair stays
    put — and so does the score q·k, printed in the title.
    """
    q, k = shift_example(d_k)
    angles = functional.rope_angles(10000.0, d_k, m + n + offset + 1).numpy()  # (…, d_k/2)
    q_pairs = (q[0::2] + 1j * q[1::2]).numpy()  # (d_k/2,) complex: pair k as a 2-D arrow
    k_pairs = (k[0::2] + 1j * k[1::2]).numpy()
    scale = max(np.abs(q_pairs[:pairs]).max(), np.abs(k_pairs[:pairs]).max())
    fig, ax = plt.subplots(figsize=(1.5 * pairs, 1.9))
    for j in range(pairs):
        center = complex(2.6 * j, 0.0)
        _clock(ax, center, q_pairs[j] * np.exp(1j * angles[m + offset, j]) / scale, ROPE_COLORS["query"],
               label="query" if j == 0 else None)
        _clock(ax, center, k_pairs[j] * np.exp(1j * angles[n + offset, j]) / scale, ROPE_COLORS["key"],
               label="key" if j == 0 else None)
        ax.text(center.real, -1.3, f"pair {j}", ha="center", va="top", fontsize=7)
    _bare(ax)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    score = shifted_score(offset, m, n, d_k)
    ax.set_title(f"q at {m + offset}, k at {n + offset}:  q·k = {score:.4f}", fontsize=10, **TITLE)
    return fig


def relative_scores(q: torch.Tensor, k: torch.Tensor, seq_len: int, theta: float = 10000.0) -> torch.Tensor:
    """Score (seq_len, seq_len): entry (m, n) is RoPE(q, m) · RoPE(k, n) for the same q, k (d_k,)."""
    d_k = q.shape[-1]
    rope = RotaryPositionalEmbedding(theta, d_k, seq_len)
    queries = rope(q.expand(seq_len, d_k))  # (seq_len, d_k): q at positions 0 … seq_len−1
    keys = rope(k.expand(seq_len, d_k))  # (seq_len, d_k)
    return queries @ keys.T  # (seq_len, seq_len)


def max_diagonal_spread(scores: torch.Tensor) -> float:
    """Largest max − min along any diagonal m − n = const: zero iff scores depend on m − n only."""
    n = scores.shape[0]
    return max(float(d.max() - d.min()) for d in (scores.diagonal(offset) for offset in range(-n + 1, n)))


def draw_relative_heatmap(scores: torch.Tensor):
    """Heatmap of q·k over query position m and key position n."""
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    image = ax.imshow(scores.numpy(), cmap="RdBu_r", vmin=-scores.abs().max(), vmax=scores.abs().max())
    fig.colorbar(image, ax=ax, label="q·k")
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
    ax.set_title("Same q and k at every (m, n)", **TITLE)
    ax.grid(False)
    return fig


def memory_bytes(d_k: int, seq_len: int, bytes_per_value: int = 4) -> dict[str, int]:
    """Size of each implementation's cache: cos + sin (seq_len·d_k values) vs seq_len d_k×d_k matrices."""
    return {"cos/sin cache": 2 * seq_len * (d_k // 2) * bytes_per_value,
            "rotation matrices": seq_len * d_k * d_k * bytes_per_value}


def flops_per_vector(d_k: int) -> dict[str, int]:
    """Multiplies and adds to rotate one (d_k,) vector: 6 per pair elementwise, 2·d_k² for R·x."""
    return {"cos/sin cache": 3 * d_k, "rotation matrices": 2 * d_k * d_k}


def draw_cost_ratios(d_ks, time_ratios, memory_ratios):
    """Matrix ÷ elementwise, for time (measured) and memory (computed), against d_k."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.plot(d_ks, memory_ratios, "o-", label="memory (computed)", color=COLORS["post"])
    ax.plot(d_ks, time_ratios, "s-", label="time (measured)", color=COLORS["pre"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d_k")
    ax.set_ylabel("matrix ÷ cos/sin")
    ax.set_title("Cost of the explicit d_k×d_k matrices", **TITLE)
    ax.legend()
    return fig


def long_term_decay(d: int = 128, max_distance: int = 256, base: float = 10000.0, first_index: int = 0,
                    terms_in_s_j: str = "j") -> torch.Tensor:
    """RoFormer's bound (1/(d/2))·Σ_j |S_j| for distances 0 … max_distance, float64.

    S_j = Σ_{i<j} e^{i(m−n)θ_i} with θ_i = base^(−2i/d). ``first_index`` is where i starts
    (0 or 1), and ``terms_in_s_j`` whether S_j sums the first ``"j"`` or ``"j-1"`` angles:
    the paper's formula can be read either way, and the readings give different curves.
    """
    if terms_in_s_j not in ("j", "j-1"):
        raise ValueError(f"terms_in_s_j must be 'j' or 'j-1', got {terms_in_s_j!r}")
    i = torch.arange(first_index, first_index + d // 2, dtype=torch.float64)  # (d/2,)
    theta = base ** (-2.0 * i / d)
    distance = torch.arange(max_distance + 1, dtype=torch.float64)  # (D,)
    terms = torch.polar(torch.ones(len(distance), len(i), dtype=torch.float64), torch.outer(distance, theta))
    partial = terms.cumsum(dim=1)  # (D, d/2): column j−1 holds the sum of the first j terms
    if terms_in_s_j == "j-1":
        partial = torch.cat((torch.zeros_like(partial[:, :1]), partial[:, :-1]), dim=1)
    return partial.abs().mean(dim=1)  # (D,)


def draw_long_term_decay(d: int = 128, max_distance: int = 256):
    """RoFormer's Figure 2, recomputed: the relative upper bound against relative distance."""
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    distance = np.arange(max_distance + 1)
    ax.plot(distance, long_term_decay(d, max_distance).numpy(), color=COLORS["pre"],
            label="θ_i = 10000^(−2i/d), i = 0 … d/2−1")
    ax.plot(distance, long_term_decay(d, max_distance, first_index=1).numpy(), color=COLORS["post"],
            linewidth=1.0, linestyle="--", label="same with i = 1 … d/2")
    ax.set_xlabel("relative distance m − n")
    ax.set_ylabel("relative upper bound")
    ax.set_title(f"RoPE's long-term decay (d = {d})", **TITLE)
    ax.legend()
    return fig


FIGURES = {"rope_clock_hands": lambda: draw_clock_hands(position=20), "rope_long_term_decay": draw_long_term_decay}
