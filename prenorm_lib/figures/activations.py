"""Figures and the small experiment of notebook 02 (SwiGLU vs SiLU vs ReLU).

The notebook explains; what it draws more than once (the activation plot, the β-slider
picture, the gate surface) and the FFN ablation that its loss-curve figure needs live
here, so the README's figures and the notebook's pictures come from the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from prenorm_lib import data, functional, train, validation
from prenorm_lib.plotting import COLORS, mean_band

__all__ = [
    "ABLATION_KINDS",
    "ACTIVATION_FUNCTIONS",
    "FIGURES",
    "AblationResult",
    "activation_and_derivative",
    "draw_activations",
    "draw_ffn_ablation_loss",
    "draw_gate_surface",
    "draw_swish_beta",
    "ffn_ablation",
    "negative_preactivation_fraction",
    "plot_ffn_ablation",
    "show_swish_beta",
    "swish",
]

ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": functional.relu,
    "silu": functional.silu,
    "gelu": F.gelu,  # torch's exact (erf) GELU, for context only
}

ABLATION_KINDS = ("relu", "silu", "swiglu")


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


def draw_activations(x_min: float = -4.0, x_max: float = 4.0) -> plt.Figure:
    """ReLU, SiLU and GELU (solid) with their derivatives (dashed), on one axis."""
    x = torch.linspace(x_min, x_max, 401, dtype=torch.float64)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for name, fn in ACTIVATION_FUNCTIONS.items():
        y, dy = activation_and_derivative(fn, x)
        label = {"relu": "ReLU", "silu": "SiLU = x·σ(x)", "gelu": "GELU (torch)"}[name]
        ax.plot(x, y, color=COLORS[name], label=label)
        ax.plot(x, dy, color=COLORS[name], linestyle="--", linewidth=1.3, label=f"{label.split()[0]}′ (autograd)")
    x_min_silu = -1.2785  # SiLU's minimum, where silu'(x) = 0
    ax.plot([x_min_silu], [float(functional.silu(torch.tensor(x_min_silu)))], "o", color=COLORS["silu"], markersize=4)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set(xlabel="x", ylabel="f(x)  and  f′(x)", ylim=(-0.6, 2.2),
           title="Activations (solid) and their derivatives (dashed)")
    ax.legend(ncol=2, fontsize=8.5, loc="upper left")
    return fig


def draw_swish_beta(beta: float = 1.0) -> plt.Figure:
    """x · σ(βx) for one β, between its two limits x/2 (β → 0) and ReLU (β → ∞)."""
    x = torch.linspace(-4.0, 4.0, 161)
    fig, ax = plt.subplots(figsize=(5.6, 3.3))
    ax.plot(x, x / 2, color=COLORS["reference"], linestyle=":", linewidth=1.2, label="x/2  (β → 0)")
    ax.plot(x, functional.relu(x), color=COLORS["relu"], linestyle="--", linewidth=1.2, label="ReLU  (β → ∞)")
    ax.plot(x, swish(x, beta), color=COLORS["silu"], linewidth=2.2, label=f"x·σ({beta:.2g}·x)")
    ax.set(xlabel="x", ylabel="swish(x)", ylim=(-2.1, 4.1), title=f"Swish with β = {beta:.2g}  (β = 1 is SiLU)")
    ax.legend(loc="upper left", fontsize=9)
    return fig


def show_swish_beta(beta: float = 1.0) -> None:
    """Draw :func:`draw_swish_beta` and show it (the callback of the notebook's β slider)."""
    draw_swish_beta(beta)
    plt.show()


def draw_gate_surface(limit: float = 4.0) -> plt.Figure:
    """The SwiGLU gate silu(a)·b over the plane of gate input a and value b."""
    a = torch.linspace(-limit, limit, 161)
    b = torch.linspace(-limit, limit, 161)
    aa, bb = torch.meshgrid(a, b, indexing="xy")  # (161, 161): aa varies along columns
    z = functional.silu(aa) * bb
    fig, ax = plt.subplots(figsize=(5.4, 4.2))
    step = 2.0
    bound = step * np.ceil(float(z.abs().max()) / step)
    levels = np.arange(-bound, bound + step / 2, step)  # symmetric, so 0 is white
    filled = ax.contourf(aa, bb, z, levels=levels, cmap="RdBu_r")
    ax.contour(aa, bb, z, levels=levels, colors="black", linewidths=0.4, alpha=0.5)
    fig.colorbar(filled, ax=ax, label="silu(a) · b")
    ax.text(-limit * 0.5, limit * 0.8, "gate closed:\noutput ≈ 0", ha="center", fontsize=9)
    ax.text(limit * 0.45, -limit * 0.15, "gate open:\noutput ≈ a·b", ha="center", va="top", fontsize=9)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set(xlabel="a = (W1 x)ᵢ   (gate input)", ylabel="b = (W3 x)ᵢ   (value)",
           title="The SwiGLU gate: silu(a) · b")
    ax.grid(False)
    return fig


# --- the ablation: ReLU vs SiLU vs SwiGLU in the course's tiny LM ----------------------


@dataclass
class AblationResult:
    """Histories and trained models of the ablation, by FFN kind (one entry per seed)."""

    histories: dict[str, list[train.History]]
    models: dict[str, list[torch.nn.Module]]
    config: train.TrainConfig

    def summaries(self) -> dict[str, dict]:
        """``train.summarize`` of each kind: mean and std of the final validation loss."""
        return {kind: train.summarize(runs) for kind, runs in self.histories.items()}


def ffn_ablation(corpus: data.Corpus, steps: int = 100, seeds: tuple[int, ...] = (0, 1, 2)) -> AblationResult:
    """Train the course's tiny LM with each FFN kind on the same data, steps, lr and seeds.

    Each kind gets its default hidden size (``train.model_config``: 4·d_model for ReLU and
    SiLU, 8/3·d_model rounded to 64 for SwiGLU), the CS336 ablation recipe.
    """
    config = train.TrainConfig(steps=steps, eval_every=20)
    histories, models = {}, {}
    for kind in ABLATION_KINDS:
        built = []

        def make_model(seed, kind=kind, built=built):
            model = train.build_model(corpus, seed, ffn=kind)
            built.append(model)
            return model

        histories[kind] = train.run_seeds(make_model, corpus, config, seeds, progress=False)
        models[kind] = built
    return AblationResult(histories=histories, models=models, config=config)


def plot_ffn_ablation(result: AblationResult, zoom_from_step: int | None = None) -> plt.Figure:
    """Validation loss of each FFN kind: mean over seeds with a ±1 std band, full and zoomed.

    The right panel starts at ``zoom_from_step`` (default: the last evaluation at or before
    half-way through the run).
    """
    if zoom_from_step is None:
        evaluated = next(iter(result.histories.values()))[0].val_steps
        zoom_from_step = max(s for s in evaluated if s <= result.config.steps // 2)
    labels = {"relu": "ReLU, d_ff = 256", "silu": "SiLU, d_ff = 256", "swiglu": "SwiGLU, d_ff = 192"}
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.4))
    for kind, runs in result.histories.items():
        steps = runs[0].val_steps
        losses = [h.val_loss for h in runs]
        for ax in axes:
            mean_band(ax, steps, losses, label=labels[kind], color=COLORS[kind])
    axes[0].set(xlabel="update", ylabel="validation loss (nats/token)", title="Whole run")
    later = [v for runs in result.histories.values() for h in runs
             for s, v in zip(h.val_steps, h.val_loss, strict=True) if s >= zoom_from_step]
    axes[1].set(xlabel="update", xlim=(zoom_from_step, None), ylim=(min(later) - 0.02, max(later) + 0.02),
                title=f"From update {zoom_from_step} (band: ±1 std over seeds)")
    axes[0].legend()
    return fig


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


def draw_ffn_ablation_loss() -> plt.Figure:
    """The loss-curve figure of the ablation: trains the nine runs notebook 02 shows (≈15 s)."""
    return plot_ffn_ablation(ffn_ablation(data.make_corpus()))


FIGURES = {
    "activations": draw_activations,
    "ffn_ablation_loss": draw_ffn_ablation_loss,
}
