"""Figures of notebook 03 (RoPE): clocks that turn with position, RoFormer's decay, RoPE in a model.

The computations the pictures show (wavelengths, the relative-position score table, the
long-term decay bound, the memory of the two implementations) live here as plain
functions, so the notebook prints the very numbers the pictures are drawn from. The
three sliders (position, shift, Θ) are :class:`~prenorm_lib.lab.sliders.LiveFigure` objects:
each builds its figure once and a move only sets data and text, with everything that
does not depend on the slider computed in advance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from ipywidgets import IntSlider, Layout, SelectionSlider
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, MaxNLocator, NullLocator
from matplotlib.transforms import offset_copy

from prenorm_lib import functional
from prenorm_lib.lab.plotting import COLORS, CYCLE_COLORS, OKABE_ITO, mean_band
from prenorm_lib.lab.sliders import LiveFigure
from prenorm_lib.rope import RotaryPositionalEmbedding

ROPE_COLORS = {"query": COLORS["pre"], "key": COLORS["post"], "trail": COLORS["input"]}
# One colour per way of giving positions, kept from figure to figure.
POSITION_COLORS = {
    "rope": COLORS["pre"],
    "sinusoidal": COLORS["gelu"],
    "none": COLORS["none"],
    "interpolation": COLORS["silu"],
    "ntk": COLORS["swiglu"],
    "yarn": OKABE_ITO["orange"],
}
POSITION_LABELS = {"rope": "RoPE", "sinusoidal": "absolute sinusoidal", "none": "no positions"}
# Θ values for the slider: from far too small to Llama 3's 500 000.
THETA_CHOICES = (100.0, 1_000.0, 10_000.0, 100_000.0, 500_000.0, 1_000_000.0)
# Fractions of pairs partial RoPE rotates: none (NoPE), Gemma 4's global layers' 0.25, half, Barbero et al.'s
# 0.75, all (RoPE).
FRACTION_CHOICES = (0.0, 0.25, 0.5, 0.75, 1.0)
_CIRCLE = np.exp(1j * np.linspace(0.0, 2.0 * np.pi, 97))  # unit circle, drawn once per clock
_SLIDER_LAYOUT = Layout(width="420px")
_SLIDER_STYLE = {"description_width": "120px"}


def spaced(number: float) -> str:
    """A count of positions for a label: 6.28, 62.8, 628, 19 869 (thin-space thousands)."""
    if number < 100:
        return f"{number:.3g}"
    return f"{round(number):,}".replace(",", "\u2009")


def wavelengths(theta: float, d_k: int) -> torch.Tensor:
    """Positions needed for pair k to turn once: 2π / θ_k, shape (d_k/2,), float64.

    θ_k is the angle pair k turns per position (``functional.rope_angles`` at position 1).
    """
    per_position = functional.rope_angles(theta, d_k, 2)[1]  # (d_k/2,) radians per position
    return 2.0 * math.pi / per_position


def _wavelength_axes(ax, context: int | None) -> None:
    """Log scale with a fixed tick every two decades and no minor ticks: legible, and cheap to redraw."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([10.0**e for e in range(0, 9, 2)]))
    ax.yaxis.set_major_formatter(FixedFormatter(["1", "100", "10⁴", "10⁶", "10⁸"]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(r"pair index $k\,/\,(d_k/2)$")
    ax.set_ylabel(r"wavelength $2\pi/\theta_k$ (positions)")
    if context is not None:
        ax.axhline(context, color=COLORS["reference"], linestyle=":", linewidth=1.2)
        ax.text(0.98, context * 0.62, f"context {context}", ha="right", va="top",
                transform=ax.get_yaxis_transform())


def draw_wavelengths(theta: float = 10000.0, d_ks: tuple[int, ...] = (16, 128), context: int | None = 32):
    """Wavelength of every pair on a log scale: the first pairs are fast clocks, the last slow."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for d_k, marker in zip(d_ks, ("o", "."), strict=False):
        k = np.arange(d_k // 2)
        ax.plot(k / (d_k // 2), wavelengths(theta, d_k).numpy(), marker=marker, label=f"$d_k$ = {d_k}")
    _wavelength_axes(ax, context)
    ax.set_title(f"Fast clocks and slow clocks (Θ = {spaced(theta)})")
    ax.legend(loc="upper left")
    return fig


# --- clocks --------------------------------------------------------------------------------

def _bare(ax) -> None:
    """Equal aspect, no axes; no ticks at all, which also keeps a slider redraw fast."""
    ax.set_aspect("equal")
    ax.axis("off")


def _dials(ax, centers: Sequence[complex]) -> None:
    """Unit circles around ``centers``, as one line (one artist to draw, however many clocks)."""
    rings = np.concatenate([np.append(center + _CIRCLE, np.nan) for center in centers])
    ax.plot(rings.real, rings.imag, color=COLORS["input"], linewidth=1.0)


def _hands(ax, centers: Sequence[complex], color: str, label: str | None = None, width: float = 3.0):
    """One hand per clock, as one line; :func:`_point` sets where they point."""
    (line,) = ax.plot([], [], color=color, linewidth=width, solid_capstyle="round", label=label)
    line.centers = np.asarray(centers)
    return line


def _point(line, tips) -> None:
    """Point the hands of ``line`` at ``tips`` (complex, one per clock, relative to its centre)."""
    start, end = line.centers, line.centers + np.asarray(tips)
    segments = np.stack((start, end, np.full_like(start, np.nan)), axis=1).ravel()  # a, b, gap, a, b, gap, …
    line.set_data(segments.real, segments.imag)


def clock_hands(d_k: int = 16, theta: float = 10000.0, max_position: int = 200, columns: int = 4,
                trail: int = 32):
    """The figure of :func:`clock_hands_slider` and its ``update(position)``, for any position ≤ ``max_position``.

    Every pair of one vector is a clock; the vector starts as (1, 0) in every pair, so the
    hand's angle *is* the rotation m·θ_k. Grey dots mark the hand's last ``trail``
    positions: dense on the slow clocks, scattered around the dial on the fast ones.
    """
    n_pairs = d_k // 2
    hands = np.exp(1j * functional.rope_angles(theta, d_k, max_position + 1).numpy())  # (positions, pairs)
    period = wavelengths(theta, d_k).numpy()  # (pairs,)
    rows = math.ceil(n_pairs / columns)
    fig, ax = plt.subplots(figsize=(2.4 * columns, 2.5 * rows + 0.5))
    centers = np.array([complex(3.0 * (k % columns), -3.3 * (k // columns)) for k in range(n_pairs)])
    _dials(ax, centers)
    (trails,) = ax.plot([], [], ".", color=ROPE_COLORS["trail"], markersize=5)
    hands_line = _hands(ax, centers, ROPE_COLORS["query"])
    # Under each clock its wavelength, drawn once (beneath the moving hands, so a move need not
    # redraw it), and a line below it with the turns, rewritten at each move: every text costs
    # about a millisecond to draw, so a move redraws only what it changes.
    next_line = offset_copy(ax.transData, fig=fig, y=-1.4 * plt.rcParams["font.size"], units="points")
    for k, center in enumerate(centers):
        ax.text(center.real, center.imag - 1.15, f"pair {k}: λ = {spaced(period[k])}", ha="center", va="top",
                zorder=1.9)
    turns = [ax.text(center.real, center.imag - 1.15, "", ha="center", va="top", transform=next_line)
             for center in centers]
    _bare(ax)
    ax.set_xlim(-1.5, 3.0 * (columns - 1) + 1.5)
    ax.set_ylim(-3.3 * (rows - 1) - 2.15, 1.15)
    ax.set_title("Pair $k$ has turned by $m\\,\\theta_k$")  # drawn once: mathtext costs three plain texts
    position_title = ax.set_title("", loc="left")

    def update(position: int) -> None:
        past = centers + hands[max(0, position - trail):position]  # (≤ trail, pairs): earlier tips
        trails.set_data(past.real.ravel(), past.imag.ravel())
        _point(hands_line, hands[position])
        for k, text in enumerate(turns):
            text.set_text(f"{position / period[k]:.2f} turns")
        position_title.set_text(f"position m = {position}")

    return fig, update


def draw_clock_hands(position: int = 20, d_k: int = 16, theta: float = 10000.0):
    """The clocks at one position (a still of the slider)."""
    fig, update = clock_hands(d_k, theta, max_position=position)
    update(position)
    return fig


def clock_hands_slider(position: int = 20, max_position: int = 200, d_k: int = 16, theta: float = 10000.0):
    """A position slider over :func:`clock_hands`."""
    fig, update = clock_hands(d_k, theta, max_position)
    slider = IntSlider(value=position, min=0, max=max_position, description="position m",
                       continuous_update=True, layout=_SLIDER_LAYOUT, style=_SLIDER_STYLE)
    return LiveFigure(fig, update, {"position": slider},
                      f"The {d_k // 2} clocks of a {d_k}-dimensional vector (slider: position m)")


# --- relative position ------------------------------------------------------------------------

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


def _as_pairs(x: torch.Tensor) -> np.ndarray:
    """(d_k,) → (d_k/2,) complex: pair k as the 2-D arrow x_2k + i·x_2k+1."""
    return (x[0::2] + 1j * x[1::2]).numpy()


def draw_pair_rotation(m: int = 3, n: int = 1):
    """One pair (d_k = 2): the query hand at position m, the key hand at n, and their score."""
    q, k = shift_example(d_k=2)
    q_pair, k_pair = _as_pairs(q)[0], _as_pairs(k)[0]
    scale = max(abs(q_pair), abs(k_pair))
    fig, ax = plt.subplots(figsize=(4.2, 3.8))
    _dials(ax, [0j])
    _point(_hands(ax, [0j], ROPE_COLORS["query"], f"query at $m$ = {m}"), [q_pair * np.exp(1j * m) / scale])
    _point(_hands(ax, [0j], ROPE_COLORS["key"], f"key at $n$ = {n}"), [k_pair * np.exp(1j * n) / scale])
    _bare(ax)
    ax.set_xlim(-1.15, 1.15)
    ax.set_ylim(-1.15, 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(0.98, 1.0))
    ax.set_title(f"$q \\cdot k$ = {shifted_score(0, m, n, d_k=2):.4f}")
    return fig


def shift_and_gap(d_k: int = 16, pairs: int = 4, max_start: int = 400, max_gap: int = 32):
    """The figure of :func:`shift_slider` and its ``update(start, gap)``.

    Left: the first ``pairs`` clocks of a fixed query at m = start + gap and key at
    n = start. Right: the score q·k against the gap m − n (computed once, at n = 0), and
    a dot at the score of the current positions, computed afresh at every move. Moving
    the start turns both hands together and leaves the dot where it is; moving the gap
    slides the dot along the curve.
    """
    q, k = shift_example(d_k)
    rope = RotaryPositionalEmbedding(10000.0, d_k, max_start + max_gap + 1)
    q_pairs, k_pairs = _as_pairs(q)[:pairs], _as_pairs(k)[:pairs]
    scale = max(np.abs(q_pairs).max(), np.abs(k_pairs).max())
    turns = np.exp(1j * functional.rope_angles(10000.0, d_k, max_start + max_gap + 1).numpy()[:, :pairs])
    gaps = np.arange(-max_gap, max_gap + 1)
    curve = [float(rope(q[None], torch.tensor([g]))[0] @ rope(k[None], torch.tensor([0]))[0]) if g >= 0 else
             float(rope(q[None], torch.tensor([0]))[0] @ rope(k[None], torch.tensor([-g]))[0]) for g in gaps]
    fig, (clocks, scores) = plt.subplots(1, 2, figsize=(11.0, 3.6), width_ratios=(1.55, 1.0))
    centers = np.array([complex(2.7 * j, 0.0) for j in range(pairs)])
    _dials(clocks, centers)
    q_hands = _hands(clocks, centers, ROPE_COLORS["query"], "query")
    k_hands = _hands(clocks, centers, ROPE_COLORS["key"], "key")
    for j, center in enumerate(centers):
        clocks.text(center.real, -1.2, f"pair {j}", ha="center", va="top")
    _bare(clocks)
    clocks.set_xlim(-1.3, 2.7 * (pairs - 1) + 1.3)
    clocks.set_ylim(-1.75, 1.3)
    clocks.legend(loc="lower center", bbox_to_anchor=(0.5, 0.98), ncols=2)
    scores.plot(gaps, curve, color=COLORS["reference"], linewidth=1.4)
    (dot,) = scores.plot([0], [curve[max_gap]], "o", color=ROPE_COLORS["query"], markersize=9)
    spread = max(curve) - min(curve)
    scores.set_ylim(min(curve) - 0.12 * spread, max(curve) + 0.12 * spread)
    scores.set_xlim(-max_gap - 1, max_gap + 1)
    scores.set_xticks(np.linspace(-max_gap, max_gap, 5))
    scores.yaxis.set_major_locator(MaxNLocator(4))
    scores.set_xlabel("gap $m - n$")
    scores.set_ylabel(r"$q \cdot k$")
    title = scores.set_title("")

    def update(start: int, gap: int) -> None:
        m, n = start + max(gap, 0), start + max(-gap, 0)
        _point(q_hands, q_pairs * turns[m] / scale)
        _point(k_hands, k_pairs * turns[n] / scale)
        score = float(rope(q[None], torch.tensor([m]))[0] @ rope(k[None], torch.tensor([n]))[0])
        dot.set_data([gap], [score])
        title.set_text(f"$m$ = {m}, $n$ = {n}:  $q \\cdot k$ = {score:.4f}")

    return fig, update


def draw_shift(start: int = 0, gap: int = 4):
    """A still of :func:`shift_slider`."""
    fig, update = shift_and_gap(max_start=start)
    update(start, gap)
    return fig


def shift_slider(start: int = 0, gap: int = 4, max_start: int = 400, max_gap: int = 32):
    """Two sliders over :func:`shift_and_gap`: a shared shift of both positions, and their gap."""
    fig, update = shift_and_gap(max_start=max_start, max_gap=max_gap)
    controls = {
        "start": IntSlider(value=start, min=0, max=max_start, description="shift both", layout=_SLIDER_LAYOUT,
                           style=_SLIDER_STYLE),
        "gap": IntSlider(value=gap, min=-max_gap, max=max_gap, description="gap m − n", layout=_SLIDER_LAYOUT,
                         style=_SLIDER_STYLE),
    }
    return LiveFigure(fig, update, controls, "Query and key clocks, and q·k against the gap (sliders: shift, gap)")


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
    fig, ax = plt.subplots(figsize=(5.4, 4.4))
    image = ax.imshow(scores.numpy(), cmap="RdBu_r", vmin=-scores.abs().max(), vmax=scores.abs().max())
    fig.colorbar(image, ax=ax, label=r"$q \cdot k$")
    ax.set_xlabel("key position $n$")
    ax.set_ylabel("query position $m$")
    ax.set_title("Same $q$ and $k$ at every $(m, n)$")
    ax.grid(False)
    return fig


# --- cost of the two implementations ------------------------------------------------------

def memory_bytes(d_k: int, seq_len: int, bytes_per_value: int = 4) -> dict[str, int]:
    """Size of each implementation's cache: cos + sin (seq_len·d_k values) vs seq_len d_k×d_k matrices."""
    return {"cos/sin cache": 2 * seq_len * (d_k // 2) * bytes_per_value,
            "rotation matrices": seq_len * d_k * d_k * bytes_per_value}


def flops_per_vector(d_k: int) -> dict[str, int]:
    """Multiplies and adds to rotate one (d_k,) vector: 6 per pair elementwise, 2·d_k² for R·x."""
    return {"cos/sin cache": 3 * d_k, "rotation matrices": 2 * d_k * d_k}


def draw_cost_ratios(d_ks, time_ratios, memory_ratios):
    """Matrix ÷ elementwise, for time (measured) and memory (computed), against d_k."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(d_ks, memory_ratios, "o-", label="memory (computed)", color=COLORS["post"])
    ax.plot(d_ks, time_ratios, "s-", label="time (measured)", color=COLORS["pre"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("$d_k$")
    ax.set_ylabel("matrices ÷ elementwise (cached cos/sin)")
    ax.set_title(r"Cost of the explicit $d_k \times d_k$ matrices")
    ax.legend(loc="upper left")
    return fig


# --- long-term decay and the choice of Θ ------------------------------------------------------

def long_term_decay(d: int = 128, max_distance: int = 256, base: float = 10000.0,
                    rotated_fraction: float = 1.0) -> torch.Tensor:
    """RoFormer's bound (1/(d/2))·Σ_{j=1}^{d/2} |S_j| for distances 0 … max_distance, float64.

    RoFormer §3.4.3 states S_j = Σ_{i=0}^{j−1} e^{i(m−n)θ_i} "by setting θ_i = 10000^{−2i/d}":
    i from 0, j terms. The paper gives no d and no value of the curve, so what this computes
    at a given d is the course's own arithmetic from that formula, not numbers of the paper.
    With ``rotated_fraction`` p < 1 (partial RoPE) the slow θ_i beyond the first ⌊p·d/2⌋ are 0:
    their terms are 1 at every distance, a part of the score that position does not touch.
    """
    i = torch.arange(d // 2, dtype=torch.float64)  # (d/2,)
    theta = base ** (-2.0 * i / d)
    theta[functional.rotated_pairs(d, rotated_fraction):] = 0.0  # partial RoPE: unrotated pairs
    distance = torch.arange(max_distance + 1, dtype=torch.float64)  # (D,)
    terms = torch.polar(torch.ones(len(distance), len(i), dtype=torch.float64), torch.outer(distance, theta))
    partial = terms.cumsum(dim=1)  # (D, d/2): column j−1 holds S_j, the sum of the first j terms
    return partial.abs().mean(dim=1)  # (D,)


def draw_long_term_decay(d: int = 128, max_distance: int = 256):
    """RoFormer's Figure 2 recomputed from the formula of §3.4.3, at a d of the course's choosing."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    distance = np.arange(max_distance + 1)
    ax.plot(distance, long_term_decay(d, max_distance).numpy(), color=COLORS["pre"],
            label=r"$S_j = \sum_{i=0}^{j-1} e^{\mathrm{i}(m-n)\theta_i}$, $\theta_i = 10000^{-2i/d}$")
    ax.set_xlabel("relative distance $m - n$")
    ax.set_ylabel("relative upper bound")
    ax.set_title(f"RoPE's long-term decay, computed here ($d$ = {d})")
    ax.legend(loc="upper right")
    return fig


def theta_effects(thetas: Sequence[float] = THETA_CHOICES, fractions: Sequence[float] = FRACTION_CHOICES,
                  d_k: int = 16, context: int = 32, d: int = 128, max_distance: int = 512,
                  reference: float = 10000.0):
    """The figure of :func:`theta_slider` and its ``update(theta, rotated_fraction)``: wavelengths and decay.

    Left, the wavelength of each of the d_k/2 pairs (the course model's heads have
    d_k = 16); a pair that partial RoPE leaves unrotated has no wavelength and is drawn as a
    cross on the "not rotated" line at the top. Right, RoFormer's decay bound for d = 128,
    with the same fraction of its pairs rotated. Grey dashes keep Θ = ``reference``, every
    pair rotated, in view. Every curve for every Θ and fraction is computed here, once; a
    move only swaps data and titles.
    """
    waves = {theta: wavelengths(theta, d_k).numpy() for theta in (*thetas, reference)}
    decays = {(theta, p): long_term_decay(d, max_distance, base=theta, rotated_fraction=p).numpy()
              for theta in (*thetas, reference) for p in (*fractions, 1.0)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.0))
    pairs = np.arange(d_k // 2)
    left.plot(pairs, waves[reference], color=COLORS["input"], linewidth=1.2, linestyle="--")
    (wave,) = left.plot(pairs, waves[reference], "o-", color=COLORS["pre"])
    _wavelength_axes(left, context)
    left.set_xlabel(f"pair $k$ ($d_k$ = {d_k})")
    left.set_xticks(pairs[:: max(1, len(pairs) // 8)])
    bottom, top = min(w.min() for w in waves.values()) / 2, max(w.max() for w in waves.values()) * 40
    left.set_ylim(bottom, top)
    still = top / 4  # where an unrotated pair is drawn: above every wavelength, on its own line
    left.axhline(still, color=COLORS["reference"], linewidth=0.8, linestyle="-.")
    left.text(0.02, still * 1.5, "not rotated (kept for meaning)", transform=left.get_yaxis_transform(),
              va="bottom", color=COLORS["reference"])
    (unrotated,) = left.plot([], [], "X", markersize=9, color=COLORS["post"], linestyle="none")
    left_title = left.set_title("")
    distance = np.arange(max_distance + 1)
    right.plot(distance, decays[reference, 1.0], color=COLORS["input"], linewidth=1.2, linestyle="--")
    (decay,) = right.plot(distance, decays[reference, 1.0], color=COLORS["pre"])
    # One line of text instead of a legend: a legend costs a redraw several times as much.
    right.text(0.98, 0.95, f"both panels, grey dashes: Θ = {spaced(reference)}, all pairs rotated",
               transform=right.transAxes, ha="right", va="top", color=COLORS["reference"])
    right.set_ylim(0, d / 4 * 1.08)
    right.set_xlim(0, max_distance)
    right.set_xticks(np.linspace(0, max_distance, 3))
    right.set_yticks(np.arange(0, d / 4 + 1, 10))
    right.set_xlabel("relative distance $m - n$")
    right.set_ylabel(f"relative upper bound ($d$ = {d})")
    right_title = right.set_title("")

    def update(theta: float, rotated_fraction: float) -> None:
        turning = functional.rotated_pairs(d_k, rotated_fraction)
        wave.set_data(pairs[:turning], waves[theta][:turning])
        unrotated.set_data(pairs[turning:], np.full(d_k // 2 - turning, still))
        wrapping = int((waves[theta][:turning] < context).sum())
        left_title.set_text(f"Θ = {spaced(theta)}, {turning} of {d_k // 2} pairs rotated: "
                            f"{wrapping} wrap within {context}")
        decay.set_ydata(decays[theta, rotated_fraction])
        right_title.set_text(f"bound at distance {max_distance}: {decays[theta, rotated_fraction][-1]:.1f}")

    return fig, update


def theta_slider(theta: float = 10000.0, rotated_fraction: float = 1.0, thetas: Sequence[float] = THETA_CHOICES,
                 fractions: Sequence[float] = FRACTION_CHOICES):
    """A Θ slider and, beside it, a "fraction rotated" slider (partial RoPE) over :func:`theta_effects`."""
    fig, update = theta_effects(thetas, fractions)
    theta_control = SelectionSlider(options=[(spaced(t), t) for t in thetas], value=theta, description="Θ",
                                    continuous_update=True, layout=_SLIDER_LAYOUT, style=_SLIDER_STYLE)
    fraction_control = SelectionSlider(options=[(f"{p:g}", p) for p in fractions], value=rotated_fraction,
                                       description="fraction rotated", continuous_update=True,
                                       layout=_SLIDER_LAYOUT, style=_SLIDER_STYLE)
    return LiveFigure(fig, update, {"theta": theta_control, "rotated_fraction": fraction_control},
                      "Wavelengths and long-term decay against Θ and the fraction of pairs rotated "
                      "(sliders: Θ, fraction rotated)")


# --- RoPE in a model (the experiment record rope_positions) ---------------------------------

def draw_training_curves(steps: Sequence[int], runs: Mapping[str, Mapping[str, np.ndarray]],
                         title: str = "Same seeds, same batches, three ways to give positions"):
    """Validation loss and agreement across an attractor over training, mean ± one std over seeds.

    ``runs[positions]`` holds ``"val_loss"`` and ``"attractor"``, each (n_seeds, len(steps)).
    """
    fig, (loss_ax, probe_ax) = plt.subplots(1, 2, figsize=(11.0, 4.0))
    for positions, curves in runs.items():
        color, label = POSITION_COLORS[positions], POSITION_LABELS[positions]
        mean_band(loss_ax, steps, curves["val_loss"], label, color)
        mean_band(probe_ax, steps, curves["attractor"], label, color)
    loss_ax.set_ylim(2.1, 3.2)
    loss_ax.set_xlabel("update")
    loss_ax.set_ylabel("validation loss")
    loss_ax.legend(loc="upper right")
    probe_ax.axhline(0.5, color=COLORS["reference"], linewidth=1.0, linestyle=":")
    probe_ax.text(steps[-1], 0.47, "chance", ha="right", va="top")
    probe_ax.set_ylim(0.0, 1.05)
    probe_ax.set_xlabel("update")
    probe_ax.set_ylabel("agreement across an attractor")
    fig.suptitle(title, fontweight="bold")
    return fig


BEYOND_LABELS = {
    "rope/none": "RoPE, as trained",
    "rope/interpolation": "RoPE, position interpolation",
    "rope/ntk": "RoPE, NTK-aware Θ",
    "sinusoidal/none": "absolute sinusoidal",
    "none/none": "no positions",
}
BEYOND_MARKERS = {  # with the dash (rescaled or not), a second cue for each line in greyscale
    "rope/none": "o", "rope/interpolation": "s", "rope/ntk": "^", "sinusoidal/none": "D", "none/none": "v",
}


def _beyond_color(name: str) -> str:
    positions, scaling = name.split("/")
    return POSITION_COLORS[scaling if scaling != "none" else positions]


def draw_loss_by_position(panels: Mapping[str, Mapping[str, np.ndarray]], trained_length: int = 32,
                          bin_width: int = 4):
    """Loss along a longer window, one panel per stage, mean over seeds and over bins of positions.

    ``panels[stage][name]`` is (n_seeds, length); names are those of ``BEYOND_LABELS``.
    Every model reads the same windows, so the seeds do not average out the text's own
    ups and downs from one position to the next; bins of ``bin_width`` positions do.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(11.0, 4.6), sharey=True, squeeze=False)
    for i, (ax, (stage, curves)) in enumerate(zip(axes[0], panels.items(), strict=True)):
        for name, runs in curves.items():
            runs = np.asarray(runs)  # (n_seeds, length)
            length = runs.shape[1]
            binned = runs.mean(axis=0).reshape(-1, bin_width).mean(axis=1)  # (length / bin_width,)
            centres = np.arange(len(binned)) * bin_width + (bin_width - 1) / 2
            rescaled = name in ("rope/interpolation", "rope/ntk")
            ax.plot(centres, binned, marker=BEYOND_MARKERS[name], markersize=4, color=_beyond_color(name),
                    linestyle="--" if rescaled else "-", label=BEYOND_LABELS[name])
        ax.axvspan(trained_length - 0.5, length - 0.5, color=COLORS["input"], alpha=0.15, linewidth=0)
        if i == 0:
            ax.text(trained_length + 1, 3.75, "positions never trained", va="top")
        ax.set_xlim(-0.5, length - 0.5)
        ax.set_ylim(1.9, 3.8)
        ax.set_yticks([2.0, 2.5, 3.0, 3.5])
        ax.set_xlabel(f"position in the window (mean of {bin_width})")
        ax.set_title(stage)
    axes[0, 0].set_ylabel("next-token loss")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


# --- the stated reason, tested (the experiment record rope_extension) ------------------------

EXTENSION_LABELS = {"interpolation": "position interpolation", "ntk": "NTK-aware Θ", "yarn": "YaRN"}
EXTENSION_STYLES = {"interpolation": ("s", "--"), "ntk": ("^", ":"), "yarn": ("P", "-.")}  # marker, dash


def draw_extension_differences(panels: Mapping[str, Mapping[int, Mapping[str, object]]],
                               title: str = "After 50 updates at 32·s: each method minus plain RoPE"):
    """One panel per text: for each method, its paired difference from plain RoPE against the factor s.

    ``panels[text][factor][method]`` is a :class:`~prenorm_lib.lab.stats.PairedComparison`
    (method − plain, mean loss over the positions never trained); each point is the mean
    difference, its bar the 95 % interval. Below the zero line the method beats plain RoPE.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(11.0, 4.2), squeeze=False)
    for ax, (text, by_factor) in zip(axes[0], panels.items(), strict=True):
        factors = sorted(by_factor)
        ax.axhline(0.0, color=COLORS["reference"], linewidth=1.0)
        for shift, method in zip((-0.06, 0.0, 0.06), EXTENSION_LABELS, strict=True):
            comparisons = [by_factor[f][method] for f in factors]
            means = np.array([c.mean for c in comparisons])
            bars = np.array([[c.mean - c.low for c in comparisons], [c.high - c.mean for c in comparisons]])
            marker, dash = EXTENSION_STYLES[method]
            ax.errorbar(np.log2(factors) + shift, means, yerr=bars, marker=marker, linestyle=dash, capsize=3,
                        color=POSITION_COLORS[method])
        ax.set_xticks(np.log2(factors), [f"{f}" for f in factors])
        ax.set_xlabel("extension factor $s$")
        ax.set_title(text)
        ax.text(0.02, 0.02, "below 0: beats plain RoPE", transform=ax.transAxes, va="bottom")
    axes[0, 0].set_ylabel("loss difference beyond 32")
    handles = [Line2D([], [], marker=EXTENSION_STYLES[m][0], linestyle=EXTENSION_STYLES[m][1],
                      color=POSITION_COLORS[m], label=label) for m, label in EXTENSION_LABELS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle(title, fontweight="bold")
    return fig


def record_extension_differences(record, stage: str = "after") -> dict[str, dict[int, dict[str, object]]]:
    """``{text: {factor: {method: method − plain}}}`` from a record of ``rope_extension``, paired over seeds."""
    from prenorm_lib.lab.experiments.rope_extension import mean_loss
    from prenorm_lib.lab.stats import paired

    config = record.config
    return {text: {factor: {method: paired(mean_loss(record, text, factor, method, stage),
                                           mean_loss(record, text, factor, "plain", stage),
                                           a_name=EXTENSION_LABELS[method], b_name="plain RoPE",
                                           what=f"{text}, s = {factor}")
                            for method in EXTENSION_LABELS}
                   for factor in config["factors"]}
            for text in config["texts"]}


def _example_extension_differences():
    from prenorm_lib.lab import experiments

    return draw_extension_differences(record_extension_differences(experiments.read("rope_extension")))


# --- positions after 2024 (the experiment record rope_frontier) --------------------------------

FRONTIER_ROWS = {  # (variant, reading) → the label of its row, top to bottom
    ("rope", "interpolation"): "RoPE, position interpolation",
    ("rope", "ntk"): "RoPE, NTK-aware Θ",
    ("rope", "yarn"): "RoPE, YaRN",
    ("p-rope 0.75", "as trained"): "partial RoPE, 3/4 rotated",
    ("p-rope 0.5", "as trained"): "partial RoPE, 1/2 rotated",
    ("p-rope 0.25", "as trained"): "partial RoPE, 1/4 rotated",
    ("nope every 4th", "as trained"): "NoPE every 4th layer",
    ("nope every 4th", "temperature"): "NoPE every 4th + Llama 4's temperature",
}
_FOREST_MARKERS = ("s", "^", "P", "o", "D", "v", "X", "*")


def draw_frontier(panels: Mapping[str, Mapping[str, object]],
                  title: str = "Paired over seeds: each variant minus RoPE (4 blocks, trained at 32)"):
    """A forest plot per panel: each row's paired difference from RoPE, the mean and its 95 % interval.

    ``panels[title][row_label]`` is a :class:`~prenorm_lib.lab.stats.PairedComparison` (variant −
    RoPE); a row missing from a panel is left empty there. Rows keep one marker across panels, and
    their labels stand on the left, so the figure reads without colour.
    """
    present = {label for rows in panels.values() for label in rows}
    labels = [label for label in FRONTIER_ROWS.values() if label in present]
    labels += sorted(present - set(labels))  # rows of no known variant, after those
    fig, axes = plt.subplots(1, len(panels), figsize=(11.0, 0.42 * len(labels) + 1.8), sharey=True, squeeze=False)
    y = np.arange(len(labels))[::-1]
    for i, (ax, (panel, rows)) in enumerate(zip(axes[0], panels.items(), strict=True)):
        ax.axvline(0.0, color=COLORS["reference"], linewidth=1.0)
        for row, label in enumerate(labels):
            if label not in rows:
                continue
            c = rows[label]
            ax.errorbar([c.mean], [y[row]], xerr=[[c.mean - c.low], [c.high - c.mean]], capsize=3,
                        marker=_FOREST_MARKERS[row % len(_FOREST_MARKERS)], color=CYCLE_COLORS[row % len(CYCLE_COLORS)],
                        linestyle="none")
        ax.set_title(panel)
        ax.set_xlabel("loss difference from RoPE")
        ax.xaxis.set_major_locator(MaxNLocator(4))
        if i == 0:
            ax.set_yticks(y, labels)
    fig.suptitle(title, fontweight="bold")
    return fig


def record_frontier(record, factor: int = 2) -> dict[str, dict[str, object]]:
    """The three panels of :func:`draw_frontier` from a record of ``rope_frontier``, paired over seeds."""
    from prenorm_lib.lab.experiments.rope_frontier import finals, mean_loss
    from prenorm_lib.lab.stats import paired

    final = finals(record)
    inside = {FRONTIER_ROWS[variant, "as trained"]: paired(final[variant], final["rope"], a_name=variant,
                                                            b_name="rope", what="validation loss at 32")
              for variant in record.config["variants"] if (variant, "as trained") in FRONTIER_ROWS}
    base = {stage: mean_loss(record, "rope", "as trained", factor, stage) for stage in ("before", "after")}
    beyond = {stage: {label: paired(mean_loss(record, variant, reading, factor, stage), base[stage],
                                    a_name=label, b_name="RoPE as trained", what=f"beyond 32, {stage}")
                      for (variant, reading), label in FRONTIER_ROWS.items()
                      if reading in record.config["readings"].get(variant, ())}
              for stage in ("before", "after")}
    length = record.config["trained_length"] * factor
    return {"validation loss at 32": inside,
            f"read at {length} (32 … {length - 1})": beyond["before"],
            f"after {record.config['finetune_steps']} updates at {length}": beyond["after"]}


def _example_frontier():
    from prenorm_lib.lab import experiments

    return draw_frontier(record_frontier(experiments.read("rope_frontier")))


def _record_example():
    """The stored record of notebook 03's experiment, as the notebook draws it."""
    from prenorm_lib.lab import experiments

    return experiments.read("rope_positions")


def record_training_curves(record) -> tuple[list, dict]:
    """(steps, runs) for :func:`draw_training_curves` from a record of ``rope_positions``."""
    seeds = record.by_seed()
    runs = {positions: {name: np.array([result["main"][positions][name] for _, result in seeds])
                        for name in ("val_loss", "attractor", "agreement")}
            for positions in record.config["positions"]}
    return seeds[0][1]["val_steps"], runs


def record_loss_by_position(record, stage: str) -> dict[str, np.ndarray]:
    """``{name: (n_seeds, length)}`` for :func:`draw_loss_by_position`, ``stage`` "before" or "after"."""
    seeds = record.by_seed()
    return {name: np.array([result["beyond"][name][stage] for _, result in seeds]) for name in seeds[0][1]["beyond"]}


def _example_training_curves():
    return draw_training_curves(*record_training_curves(_record_example()))


def _example_loss_by_position():
    record = _record_example()
    return draw_loss_by_position({"read as trained": record_loss_by_position(record, "before"),
                                  "after 50 updates at 64": record_loss_by_position(record, "after")})


FIGURES = {
    "rope_clock_hands": draw_clock_hands,
    "rope_long_term_decay": draw_long_term_decay,
    "rope_beyond_training_length": _example_loss_by_position,
}

EXAMPLES = {
    "wavelengths": draw_wavelengths,
    "clock_hands_slider": clock_hands_slider,
    "pair_rotation": draw_pair_rotation,
    "shift": draw_shift,
    "shift_slider": shift_slider,
    "relative_heatmap": lambda: draw_relative_heatmap(relative_scores(*shift_example(16), seq_len=32)),
    "cost_ratios": lambda: draw_cost_ratios([16, 32, 64, 128, 256], [0.7, 1.2, 2.6, 6.5, 11.7],
                                            [16, 32, 64, 128, 256]),
    "theta_slider": theta_slider,
    "training_curves": _example_training_curves,
    "loss_by_position": _example_loss_by_position,
}

SLIDERS = {"rope_clocks": clock_hands_slider, "rope_shift_and_gap": shift_slider, "rope_theta": theta_slider}
