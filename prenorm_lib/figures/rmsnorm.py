"""Figures and small experiments of notebook 01 (RMSNorm).

The notebook explains; the code it runs more than once (plots, the timing harness, the
depth experiment, the deliberately broken kernel of the fp16 demo) lives here so the
README's figure and the notebook's picture are drawn by the same function.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.ticker import MaxNLocator

from prenorm_lib import functional, validation
from prenorm_lib.norm import RMSNorm
from prenorm_lib.plotting import COLORS

__all__ = [
    "FIGURES",
    "activation_rms_by_depth",
    "draw_gain_fit",
    "draw_rms_by_depth",
    "draw_scale_histograms",
    "draw_timing_ratios",
    "fit_gain",
    "fp16_overflow_demo",
    "operation_counts",
    "rmsnorm_scale_and_overflow",
    "time_norms",
]



# --- why rescale: activation scale through a stack of random layers -------------------

def activation_rms_by_depth(
    depth: int = 32,
    d_model: int = 128,
    n_tokens: int = 64,
    weight_scale: float = 1.0,
    residual: bool = False,
    norm: str = "none",
    seed: int = 0,
) -> list[float]:
    """RMS of the activations after each of ``depth`` random linear layers (index 0 = input).

    Weights are N(0, weight_scale² / d_model), so ``weight_scale = 1`` keeps the RMS of a
    plain stack roughly constant and anything else drifts geometrically. ``norm`` places an
    RMSNorm (gain ones): "none"; "after" each layer's output (the stream is renormalised);
    "branch" on the input of each residual branch, x + W·RMSNorm(x) (pre-norm).
    """
    validation.choice("norm", norm, ("none", "after", "branch"))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, d_model, generator=gen)  # (N, d)
    ones = torch.ones(d_model)
    rms = [x.pow(2).mean().sqrt().item()]
    for _ in range(depth):
        W = torch.randn(d_model, d_model, generator=gen) * (weight_scale / d_model**0.5)
        branch_in = functional.rms_norm(x, ones) if norm == "branch" else x
        out = branch_in @ W.T  # (N, d)
        x = x + out if residual else out
        if norm == "after":
            x = functional.rms_norm(x, ones)
        rms.append(x.pow(2).mean().sqrt().item())
    return rms


DEPTH_SETUPS = {
    # label: (weight_scale, residual, norm, colour, line style)
    "plain, weights ×1.3": (1.3, False, "none", COLORS["post"], "-"),
    "plain, weights ×0.7": (0.7, False, "none", COLORS["silu"], "-"),
    "residual x + Wx": (1.0, True, "none", COLORS["swiglu"], "-"),
    "pre-norm residual x + W·RMSNorm(x)": (1.0, True, "branch", COLORS["pre"], "--"),
    "plain, weights ×1.3, RMSNorm after each layer": (1.3, False, "after", COLORS["reference"], ":"),
}


def draw_rms_by_depth(depth: int = 32) -> plt.Figure:
    """Activation RMS against depth for the stacks of ``DEPTH_SETUPS`` (log scale)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, (scale, residual, norm, color, style) in DEPTH_SETUPS.items():
        rms = activation_rms_by_depth(depth, weight_scale=scale, residual=residual, norm=norm)
        ax.plot(range(depth + 1), rms, style, color=color, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("RMS of the activations")
    ax.set_title("Without a volume control the scale drifts with depth")
    ax.legend(fontsize=8, loc="upper left")
    return fig


# --- scale invariance ----------------------------------------------------------------

def _scale_sample(d_model: int = 512, seed: int = 0) -> torch.Tensor:
    """A fixed vector with unit-ish RMS and a slight skew, so its histogram has a shape."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(d_model, generator=gen) + 0.3 * torch.randn(d_model, generator=gen).abs()


def draw_scale_histograms(c: float = 1.0, d_model: int = 512) -> plt.Figure:
    """Histograms of c·x (left, its own axis) and RMSNorm(c·x) (right, fixed axis)."""
    c = validation.positive_float("c", c)
    x = c * _scale_sample(d_model)
    y = functional.rms_norm(x, torch.ones(d_model))
    x_rms = x.pow(2).mean().sqrt().item()
    fig, (ax_in, ax_out) = plt.subplots(1, 2, figsize=(7.2, 2.8), layout="constrained")
    # np.histogram + stairs draws one path per panel instead of 40 bar patches: the slider
    # redraws this figure on every move, so it must stay quick.
    ax_in.stairs(*np.histogram(x.numpy(), bins=40), fill=True, color=COLORS["input"])
    ax_in.set_title(f"input c·x, c = {c:.3g} (RMS {x_rms:.3g})", fontsize=10)
    ax_in.set_xlabel("value")
    ax_out.stairs(*np.histogram(y.numpy(), bins=np.linspace(-4, 4, 41)), fill=True, color=COLORS["rmsnorm"])
    ax_out.set_xlim(-4, 4)
    ax_out.set_ylim(0, 60)
    ax_out.set_title(f"RMSNorm(c·x)  (RMS {y.pow(2).mean().sqrt().item():.3g})", fontsize=10)
    ax_out.set_xlabel("value")
    return fig


# --- RMSNorm vs LayerNorm ------------------------------------------------------------

def operation_counts(d_model: int, p: float = functional.PRMS_FRACTION) -> dict[str, dict[str, int]]:
    """Work per vector of ``d_model`` numbers, counted from the definitions.

    Reductions are passes that sum over the vector; "elements reduced" is how many numbers
    those passes read. LayerNorm: mean, then variance of x − mean; its output is
    (x − mean)/σ·g + b. RMSNorm: one mean of squares, no subtraction, no bias.
    """
    k = max(1, int(np.ceil(p * d_model)))
    return {
        "LayerNorm": {"reductions": 2, "elements reduced": 2 * d_model, "subtractions": d_model,
                      "parameters": 2 * d_model},
        "RMSNorm": {"reductions": 1, "elements reduced": d_model, "subtractions": 0, "parameters": d_model},
        "pRMSNorm": {"reductions": 1, "elements reduced": k, "subtractions": 0, "parameters": d_model},
    }


def _norm_variants(d_model: int) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    weight, bias = torch.ones(d_model), torch.zeros(d_model)
    return {
        "LayerNorm (torch F.layer_norm)": lambda x: F.layer_norm(x, (d_model,), weight, bias, 1e-5),
        "RMSNorm (torch F.rms_norm)": lambda x: F.rms_norm(x, (d_model,), weight, 1e-5),
        "RMSNorm (ours)": lambda x: functional.rms_norm(x, weight),
        "pRMSNorm (ours, p = 6.25 %)": lambda x: functional.prms_norm(x, weight),
    }


def time_norms(n_tokens: int = 1024, d_model: int = 1024, repeats: int = 15, inner: int = 5) -> dict[str, float]:
    """Seconds per call of each normalisation on a (n_tokens, d_model) float32 CPU tensor.

    The variants are interleaved and each keeps its best repeat (the least disturbed by
    whatever else the machine is doing). One operation, one thread: not a model.
    """
    x = torch.randn(n_tokens, d_model, generator=torch.Generator().manual_seed(0))
    variants = _norm_variants(d_model)
    best = dict.fromkeys(variants, float("inf"))
    for fn in variants.values():  # warm-up: first calls allocate
        fn(x)
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn(x)
            best[name] = min(best[name], (time.perf_counter() - start) / inner)
    return best


def draw_timing_ratios(timings: dict[str, float]) -> plt.Figure:
    """Bar chart of each variant's time relative to the first entry (LayerNorm = 1)."""
    names = list(timings)
    base = timings[names[0]]
    ratios = [timings[n] / base for n in names]
    colors = [COLORS["layernorm"], COLORS["reference"], COLORS["rmsnorm"], COLORS["silu"]][: len(names)]
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    bars = ax.barh(names[::-1], ratios[::-1], color=colors[::-1])
    for bar, ratio in zip(bars, ratios[::-1], strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {ratio:.2f}×", va="center", fontsize=9)
    ax.axvline(1.0, color=COLORS["reference"], linewidth=0.8)
    ax.set_xlabel("time relative to LayerNorm (lower is faster)")
    ax.set_title("One normalisation call on the CPU, one thread")
    ax.set_xlim(0, max(ratios) * 1.2)
    return fig


# --- why upcast ----------------------------------------------------------------------

def fp16_overflow_demo(d_model: int = 64, magnitude: float = 300.0, seed: int = 0) -> dict[str, torch.Tensor]:
    """An fp16 vector with |x| ≈ ``magnitude`` normalised three ways.

    Returns the input, the float64 reference, the library's kernel (upcast to float32) and
    ``functional.rms_norm(..., upcast=False)`` (arithmetic in fp16).
    """
    gen = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d_model,), generator=gen) * 2 - 1
    x = (magnitude * signs * (1 + 0.1 * torch.rand(d_model, generator=gen))).to(torch.float16)
    weight = torch.ones(d_model, dtype=torch.float16)
    x64 = x.to(torch.float64)
    return {
        "x": x,
        "reference": x64 / x64.pow(2).mean(dim=-1, keepdim=True).add(1e-5).sqrt(),
        "upcast": functional.rms_norm(x, weight),
        "no upcast": functional.rms_norm(x, weight, upcast=False),
    }


# --- the learnable gain --------------------------------------------------------------

def fit_gain(target_gain: torch.Tensor, steps: int = 100, lr: float = 0.05, n_tokens: int = 256,
             seed: int = 0) -> tuple[list[float], torch.Tensor]:
    """Fit a fresh RMSNorm's gain (ones) to ``target_gain`` with Adam on a mean squared error.

    The data are random vectors and their normalisation with the target gain; only the
    gain is learnable, so the loss can reach ~0. Returns the loss per step and the gain.
    """
    d_model = target_gain.shape[-1]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, d_model, generator=gen)  # (N, d)
    y = functional.rms_norm(x, target_gain)  # (N, d)
    norm = RMSNorm(d_model)
    optimizer = torch.optim.Adam(norm.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = (norm(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, norm.weight.detach().clone()


def draw_gain_fit(losses: list[float], learned: torch.Tensor, target: torch.Tensor) -> plt.Figure:
    """The loss curve of :func:`fit_gain` and the learned gain beside the target."""
    fig, (ax_loss, ax_gain) = plt.subplots(1, 2, figsize=(7.2, 2.8))
    ax_loss.plot(range(1, len(losses) + 1), losses, color=COLORS["rmsnorm"])
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("Adam step")
    ax_loss.set_ylabel("mean squared error")
    ax_loss.set_title("Fitting the gain", fontsize=10)
    channels = np.arange(target.shape[-1])
    ax_gain.bar(channels - 0.2, target.numpy(), width=0.4, color=COLORS["input"], label="target")
    ax_gain.bar(channels + 0.2, learned.numpy(), width=0.4, color=COLORS["rmsnorm"], label="learned")
    ax_gain.axhline(1.0, color=COLORS["reference"], linewidth=0.8, linestyle=":")
    ax_gain.set_xlabel("channel")
    ax_gain.set_ylabel("gain g")
    ax_gain.set_title("Gain after training (dotted: start)", fontsize=10)
    ax_gain.legend(fontsize=8)
    return fig


# --- the course figure ---------------------------------------------------------------

SCALES = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)


def rmsnorm_scale_and_overflow() -> plt.Figure:
    """Left: output RMS of RMSNorm(c·x) against c. Right: the fp16 overflow, with and without upcast."""
    x = _scale_sample(512)
    ones = torch.ones(512)
    out_rms = [functional.rms_norm(c * x, ones).pow(2).mean().sqrt().item() for c in SCALES]
    in_rms = [(c * x).pow(2).mean().sqrt().item() for c in SCALES]
    demo = fp16_overflow_demo()

    fig, (ax_s, ax_o) = plt.subplots(1, 2, figsize=(8.4, 3.2))
    ax_s.loglog(SCALES, in_rms, "o-", color=COLORS["input"], label="input c·x")
    ax_s.loglog(SCALES, out_rms, "o-", color=COLORS["rmsnorm"], label="RMSNorm(c·x)")
    ax_s.set_xlabel("scale c")
    ax_s.set_ylabel("RMS")
    ax_s.set_title("Scale invariance (eps bites at tiny c)", fontsize=10)
    ax_s.legend(fontsize=8)

    channels = np.arange(16)
    ref = demo["reference"][:16].numpy()
    ax_o.plot(channels, ref, "o", color=COLORS["reference"], markersize=8, fillstyle="none", label="float64 reference")
    ax_o.plot(channels, demo["upcast"][:16].float().numpy(), "x", color=COLORS["rmsnorm"], label="fp16 with upcast")
    ax_o.plot(channels, demo["no upcast"][:16].float().numpy(), "s", color=COLORS["post"], markersize=4,
              label="fp16 without upcast")
    ax_o.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_o.set_ylim(-1.6, 1.9)
    ax_o.set_xlabel("channel")
    ax_o.set_ylabel("output")
    ax_o.set_title("fp16 input with |x| ≈ 300: x² overflows", fontsize=10)
    ax_o.legend(fontsize=8, loc="upper right", ncol=3, columnspacing=0.8, handletextpad=0.3)
    return fig


FIGURES = {"rmsnorm_scale_and_overflow": rmsnorm_scale_and_overflow}
