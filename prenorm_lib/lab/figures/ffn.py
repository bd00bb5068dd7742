"""Figures of notebook 02 (SwiGLU vs SiLU vs ReLU): activations, Swish's β, the gate, the ablation.

The notebook explains; what it draws lives here, so the README's figures and the
notebook's pictures come from the same code. The ablation figure plots an experiment
record (:mod:`prenorm_lib.lab.experiments.ffn_ablation`) or a live run of the same code; it
never trains anything itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from prenorm_lib import functional, validation
from prenorm_lib.lab import stats
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.plotting import COLORS, OKABE_ITO, mean_band
from prenorm_lib.lab.sliders import LiveFigure

__all__ = [
    "ACTIVATION_FUNCTIONS",
    "EXAMPLES",
    "FIGURES",
    "activation_and_derivative",
    "draw_activations",
    "draw_ffn_ablation_loss",
    "draw_gate_surface",
    "negative_preactivation_fraction",
    "plot_ffn_ablation",
    "plot_relu2_sweep",
    "silu_minimum",
    "swish",
    "swish_beta_figure",
]

ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": functional.relu,
    "silu": functional.silu,
    "gelu": functional.gelu,
}
LABELS = {"relu": "ReLU", "silu": "SiLU", "gelu": "GELU", "swiglu": "SwiGLU", "geglu": "GEGLU",
          "reglu": "ReGLU", "bilinear": "Bilinear", "relu2": "ReLU²"}
# A second cue besides colour (greyscale, colour-vision deficiency): one marker per function.
MARKERS = {"relu": "s", "silu": "o", "gelu": "^", "swiglu": "D", "geglu": "v", "reglu": "P", "bilinear": "X",
           "relu2": "*"}
RELU2_COLOR = OKABE_ITO["vermillion"]  # no other FFN of the notebook uses it


def swish(x: torch.Tensor, beta: float) -> torch.Tensor:
    """Swish with slope ``beta``: ``x · σ(βx)``. β = 1 is SiLU; β → 0 gives x/2, β → ∞ ReLU."""
    validation.tensor("x", x)
    if not beta >= 0:
        raise ValueError(f"beta must be a number >= 0, got {beta}")
    return x * torch.sigmoid(beta * x)


def activation_and_derivative(
    fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn(x)`` and its elementwise derivative ``fn'(x)``, the latter from autograd.

    Summing the outputs before ``backward`` gives each input the derivative of its own
    output, because an elementwise function's outputs do not mix inputs.
    """
    x = x.detach().clone().requires_grad_(True)
    y = fn(x)
    (dy_dx,) = torch.autograd.grad(y.sum(), x)
    return y.detach(), dy_dx


def silu_minimum(tolerance: float = 1e-12) -> float:
    """Where SiLU has its minimum, i.e. where SiLU′(x) = σ(x)(1 + x(1 − σ(x))) is zero: x ≈ −1.2785.

    σ(x) > 0, so SiLU′ vanishes where 1 + x(1 − σ(x)) = 0. That factor is +1 at x = 0 and
    tends to −∞ as x → −∞; bisection on [−3, 0] finds its one root. SiLU′ is negative to
    the left of it (SiLU falls there) and positive to the right.
    """
    low, high = -3.0, 0.0
    factor = lambda x: 1 + x * (1 - 1 / (1 + math.exp(-x)))
    while high - low > tolerance:
        middle = (low + high) / 2
        low, high = (middle, high) if factor(middle) < 0 else (low, middle)
    return (low + high) / 2


VIEW = (-0.6, 2.6)  # the y range draw_activations shows


def draw_activations(x_min: float = -4.0, x_max: float = 4.0) -> plt.Figure:
    """ReLU, SiLU and GELU (solid) with their derivatives (dashed), on one axis."""
    x = torch.linspace(x_min, x_max, 401, dtype=torch.float64)
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for name, fn in ACTIVATION_FUNCTIONS.items():
        y, dy = activation_and_derivative(fn, x)
        # Only what the axes show carries markers: points above or below the view become gaps.
        y, dy = (torch.where((v >= VIEW[0]) & (v <= VIEW[1]), v, torch.nan) for v in (y, dy))
        every = (len(x) // 8, len(x) // 8)
        ax.plot(x, y, color=COLORS[name], linestyle="-", marker=MARKERS[name], markevery=every, markersize=6,
                label=LABELS[name] + (" = x·σ(x)" if name == "silu" else ""))
        ax.plot(x, dy, color=COLORS[name], linestyle="--", linewidth=1.3, marker=MARKERS[name],
                markevery=every, markersize=4, markerfacecolor="white", label=f"{LABELS[name]}′")
    x_star = silu_minimum()
    ax.plot([x_star], [float(functional.silu(torch.tensor(x_star)))], "o", color=COLORS["silu"], markersize=6)
    ax.plot([x_star], [0.0], "o", color=COLORS["silu"], markersize=6, markerfacecolor="white")
    ax.annotate(f"SiLU′ = 0 at x = {x_star:.3f}\n(SiLU's minimum)", xy=(x_star, 0.0), xytext=(-3.9, 0.75),
                arrowprops={"arrowstyle": "->", "color": COLORS["silu"]})
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set(xlabel="x", ylabel="f(x)  and  f′(x)", ylim=VIEW, xlim=(x_min, x_max),
           title="Activations (solid) and their derivatives (dashed)")
    ax.legend(ncol=2, loc="upper left")
    return fig


def swish_beta_figure(beta: float = 1.0) -> LiveFigure:
    """Swish x·σ(βx) and its slope for β on a log slider (0.1 … 10), between x/2 and ReLU.

    Built once: the two limits, x/2 (β → 0) and ReLU (β → ∞), are drawn at construction,
    and the curve and its slope are computed for every position of the slider; a move
    only hands two precomputed arrays to the lines and sets the title.
    """
    x = torch.linspace(-4.0, 4.0, 161, dtype=torch.float64)
    xs = x.numpy()
    slider = widgets.FloatLogSlider(value=beta, base=10, min=-1, max=1, step=0.05, description="β",
                                    continuous_update=True, readout_format=".2f")
    exponents = np.round(np.arange(slider.min, slider.max + slider.step / 2, slider.step), 10)
    curves = {}
    for exponent in exponents:
        value, derivative = activation_and_derivative(lambda t, b=10.0**exponent: swish(t, b), x)
        curves[float(exponent)] = (value.numpy(), derivative.numpy())

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.plot(xs, xs / 2, color=COLORS["reference"], linestyle=":", linewidth=1.4, label="x/2  (β → 0)")
    ax.plot(xs, np.maximum(xs, 0), color=COLORS["relu"], linestyle="--", linewidth=1.4, label="ReLU  (β → ∞)")
    (curve,) = ax.plot(xs, xs, color=COLORS["silu"], linewidth=2.4, label="x·σ(βx)")
    (slope,) = ax.plot(xs, xs, color=COLORS["silu"], linewidth=1.2, linestyle="-.", label="its slope")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set(xlabel="x", ylabel="swish(x)  and  slope", ylim=(-1.2, 4.2), xlim=(-4, 4),
           xticks=range(-4, 5, 2), yticks=range(-1, 5))  # few tick labels: each costs a text layout per frame
    ax.legend(loc="upper left")
    title = ax.set_title(" ")

    def update(beta: float) -> None:
        exponent = round(float(np.log10(beta)), 10)
        if exponent not in curves:  # a value set by hand between the slider's steps
            value, derivative = activation_and_derivative(lambda t: swish(t, beta), x)
            curves[exponent] = (value.numpy(), derivative.numpy())
        value, derivative = curves[exponent]
        curve.set_ydata(value)
        slope.set_ydata(derivative)
        title.set_text(f"Swish with β = {beta:.2f}" + ("  (SiLU)" if abs(beta - 1) < 1e-9 else ""))

    return LiveFigure(fig, update, {"beta": slider},
                      "Swish x·σ(βx) and its slope, from x/2 (β → 0) to ReLU (β → ∞) (slider: β)")


def draw_gate_surface(limit: float = 4.0) -> plt.Figure:
    """The SwiGLU gate silu(a)·b over the plane of gate input a and value b."""
    a = torch.linspace(-limit, limit, 161)
    b = torch.linspace(-limit, limit, 161)
    aa, bb = torch.meshgrid(a, b, indexing="xy")  # (161, 161): aa varies along columns
    z = functional.silu(aa) * bb
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    step = 2.0
    bound = step * np.ceil(float(z.abs().max()) / step)
    levels = np.arange(-bound, bound + step / 2, step)  # symmetric, so 0 is white
    filled = ax.contourf(aa, bb, z, levels=levels, cmap="RdBu_r")
    ax.contour(aa, bb, z, levels=levels, colors="black", linewidths=0.4, alpha=0.5)
    fig.colorbar(filled, ax=ax, label=r"$\mathrm{silu}(a)\cdot b$")
    box = {"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "linewidth": 0}
    ax.text(-limit * 0.5, limit * 0.72, "gate closed:\noutput ≈ 0", ha="center", bbox=box)
    ax.text(limit * 0.5, -limit * 0.12, "gate open:\noutput ≈ a·b", ha="center", va="top", bbox=box)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set(xlabel=r"$a = (W_1 x)_i$   (gate input)", ylabel=r"$b = (W_3 x)_i$   (value)",
           title=r"The SwiGLU gate: $\mathrm{silu}(a)\cdot b$")
    ax.grid(False)
    return fig


# --- the ablation: six FFNs in the course's tiny LM on real text -------------------------


def plot_ffn_ablation(record: Record, baseline: str = "swiglu") -> plt.Figure:
    """Left: held-out loss of each FFN over training (mean over seeds, ±1 std band), second half.
    Right: each FFN's final loss minus the baseline's for the same seed (one dot per seed),
    with the mean paired difference and its 95 % confidence interval (:func:`stats.paired`).

    The right panel is the paired view: seed-to-seed noise that moves every FFN alike
    (the initialisation seed, the batch order) cancels in the differences.
    """
    from prenorm_lib.lab.experiments.ffn_ablation import curves, paired_gaps

    steps, losses = curves(record)
    gaps = paired_gaps(record, baseline)
    kinds = list(losses)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.4), width_ratios=(1.25, 1))
    start = int(np.searchsorted(steps, steps[-1] // 2))
    for kind in kinds:
        style = "--" if kind in ("relu", "silu") else "-"
        line = mean_band(left, steps[start:], losses[kind][:, start:], label=LABELS[kind], color=COLORS[kind])
        line.set(linestyle=style, marker=MARKERS[kind], markersize=5)
        if kind == baseline:  # on top, so that a variant level with it does not hide it
            line.set(linewidth=2.6, zorder=3)
    left.set(xlabel="update", ylabel="held-out loss (nats/byte)", title="Second half of training")
    left.legend(ncol=2, loc="upper right")
    others = [kind for kind in kinds if kind != baseline]
    rng = np.random.default_rng(0)  # a fixed horizontal jitter, so dots of equal value stay apart
    for row, kind in enumerate(others):
        values = np.asarray(gaps[kind])
        jitter = rng.uniform(-0.12, 0.12, size=values.size)
        right.plot(values, row + jitter, MARKERS[kind], color=COLORS[kind], alpha=0.75, markersize=6)
        if values.size > 1:
            interval = stats.paired(values, np.zeros_like(values))
            half = [[interval.mean - interval.low], [interval.high - interval.mean]]
            right.errorbar([interval.mean], [row], xerr=half, fmt="|", color="black", markersize=18, capsize=4)
    right.axvline(0, color=COLORS[baseline], linewidth=1.5)
    right.set_yticks(range(len(others)), [LABELS[kind] for kind in others])
    right.set_ylim(len(others) - 0.5, -0.5)
    low = min(0.0, min(min(gaps[kind]) for kind in others))
    high = max(0.0, max(max(gaps[kind]) for kind in others))
    pad = 0.1 * (high - low) or 0.01
    right.set_xlim(low - pad, high + pad)
    right.set(xlabel=f"loss − {LABELS[baseline]}'s, same seed (nats/byte)\nbar: mean and 95 % CI",
              title=f"Paired: right of the line, {LABELS[baseline]} wins")
    right.grid(axis="y", visible=False)
    return fig


def plot_relu2_sweep(swiglu: dict[float, list[float]], relu2: dict[float, list[float]]) -> plt.Figure:
    """Left: final held-out loss against the learning rate, SwiGLU and ReLU² (mean over seeds, ±1 std band).
    Right: SwiGLU's final loss minus ReLU²'s for the same seed at each rate (one dot per seed),
    with the mean paired difference and its 95 % confidence interval.
    """
    if sorted(swiglu) != sorted(relu2):
        raise ValueError(f"swiglu and relu2 must hold the same learning rates, "
                         f"got {sorted(swiglu)} and {sorted(relu2)}")
    rates = sorted(swiglu)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.2), width_ratios=(1, 1))
    for kind, runs, color, style in (("swiglu", swiglu, COLORS["swiglu"], "-"), ("relu2", relu2, RELU2_COLOR, "--")):
        line = mean_band(left, rates, np.array([runs[lr] for lr in rates]).T, label=LABELS[kind], color=color)
        line.set(linestyle=style, marker=MARKERS[kind], markersize=9 if kind == "relu2" else 6)
    left.set_xscale("log")
    left.set_xticks(rates, [f"{lr:g}" for lr in rates])
    left.minorticks_off()
    left.set(xlabel="peak learning rate", ylabel="final held-out loss (nats/byte)",
             title="Equal weights and matmul FLOPs")
    left.legend(loc="upper right")
    rng = np.random.default_rng(0)  # a fixed horizontal jitter, so dots of equal value stay apart
    for column, lr in enumerate(rates):
        gaps = np.asarray(swiglu[lr]) - np.asarray(relu2[lr])
        right.plot(column + rng.uniform(-0.1, 0.1, gaps.size), gaps, MARKERS["swiglu"], color=COLORS["swiglu"],
                   alpha=0.75, markersize=6)
        interval = stats.paired(swiglu[lr], relu2[lr])
        half = [[interval.mean - interval.low], [interval.high - interval.mean]]
        right.errorbar([column], [interval.mean], yerr=half, fmt="_", color="black", markersize=18, capsize=4)
    right.axhline(0, color=RELU2_COLOR, linewidth=1.5, linestyle="--")
    right.set_xticks(range(len(rates)), [f"lr {lr:g}" for lr in rates])
    right.set_xlim(-0.5, len(rates) - 0.5)
    right.set(ylabel="SwiGLU − ReLU², same seed (nats/byte)",
              title="Paired: below the line, SwiGLU wins")
    right.text(0.02, 0.02, "bar: mean and 95 % CI", transform=right.transAxes, fontsize=10)
    right.grid(axis="x", visible=False)
    return fig


def draw_ffn_ablation_loss() -> plt.Figure:
    """The ablation figure of the README, from the stored record (no training)."""
    from prenorm_lib.lab import experiments

    return plot_ffn_ablation(experiments.load("ffn_ablation"))


def negative_preactivation_fraction(model: torch.nn.Module, token_ids: torch.Tensor) -> float:
    """Share of FFN pre-activations ``(W1 x)ᵢ`` below zero, over every position, unit and block.

    For a ReLU unit these are the (position, unit) pairs that output 0 and pass no gradient
    back; a SiLU unit passes silu′ there, small but not zero. Read with forward hooks on
    each block's ``ffn.w1``; the model is left unchanged.
    """
    validation.tensor("token_ids", token_ids)
    counts = []

    def count(module, inputs, output):
        counts.append((int((output < 0).sum()), output.numel()))

    handles = [layer.ffn.w1.register_forward_hook(count) for layer in model.layers]
    try:
        with torch.no_grad():
            model(token_ids)
    finally:
        for handle in handles:
            handle.remove()
    return sum(n for n, _ in counts) / sum(total for _, total in counts)


FIGURES = {
    "activations": draw_activations,
    "ffn_ablation_loss": draw_ffn_ablation_loss,
}

EXAMPLES = {
    "swish_beta": swish_beta_figure,
    "gate_surface": draw_gate_surface,
    "relu2_sweep": lambda: plot_relu2_sweep(  # made-up numbers: the notebook plots the record
        {3e-3: [1.50, 1.52, 1.49], 1e-2: [1.48, 1.50, 1.47], 3e-2: [1.49, 1.52, 1.50]},
        {3e-3: [1.51, 1.52, 1.50], 1e-2: [1.49, 1.51, 1.49], 3e-2: [1.48, 1.50, 1.49]}),
}

SLIDERS = {"swish_beta": swish_beta_figure}
