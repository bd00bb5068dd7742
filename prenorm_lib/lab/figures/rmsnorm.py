"""Figures and small experiments of notebook 01 (RMSNorm).

The notebook explains; the code it runs more than once (plots, the depth experiment, the
shift slider, the deliberately broken kernel of the fp16 demo) lives here so the README's
figure and the notebook's picture are drawn by the same function. The timing itself is
:mod:`prenorm_lib.lab.timing`; its stored run is the experiment ``rmsnorm_speed``.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import FixedLocator, MaxNLocator, NullFormatter, NullLocator

from prenorm_lib import functional, validation
from prenorm_lib.lab import timing
from prenorm_lib.lab.plotting import COLORS
from prenorm_lib.lab.sliders import LiveFigure
from prenorm_lib.norm import RMSNorm

__all__ = [
    "EXAMPLES",
    "FIGURES",
    "activation_rms_by_depth",
    "draw_gain_fit",
    "draw_rms_by_depth",
    "draw_timing_ratios",
    "fit_gain",
    "fp16_overflow_demo",
    "operation_counts",
    "rmsnorm_scale_and_overflow",
    "shift_slider",
    "zero_mean_vector",
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
    "plain, weights ×0.7": (0.7, False, "none", COLORS["silu"], "-."),
    "residual x + Wx": (1.0, True, "none", COLORS["swiglu"], (0, (8, 3))),
    "pre-norm residual x + W·RMSNorm(x)": (1.0, True, "branch", COLORS["pre"], "--"),
    "plain, weights ×1.3, RMSNorm after each layer": (1.3, False, "after", COLORS["reference"], ":"),
}


def draw_rms_by_depth(depth: int = 32) -> plt.Figure:
    """Activation RMS against depth for the stacks of ``DEPTH_SETUPS`` (log scale)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    for label, (scale, residual, norm, color, style) in DEPTH_SETUPS.items():
        rms = activation_rms_by_depth(depth, weight_scale=scale, residual=residual, norm=norm)
        ax.plot(range(depth + 1), rms, linestyle=style, color=color, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("RMS of the activations")
    ax.set_title("Without a volume control the scale drifts with depth")
    fig.legend(loc="outside lower center", ncol=2)  # below the axes: inside, it would cover the curves
    return fig


# --- scale invariance ----------------------------------------------------------------

def _scale_sample(d_model: int = 512, seed: int = 0) -> torch.Tensor:
    """A fixed vector with unit-ish RMS and a slight skew: the input of the scale-invariance panel."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(d_model, generator=gen) + 0.3 * torch.randn(d_model, generator=gen).abs()


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


def zero_mean_vector(d_model: int = 16, seed: int = 0) -> torch.Tensor:
    """A fixed vector with mean exactly 0 (up to rounding) and RMS 1: the shift slider's input."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(d_model, generator=gen, dtype=torch.float64)
    a = a - a.mean()
    return (a / a.pow(2).mean().sqrt()).float()


SHIFT_LIMIT = 3.0


def shift_slider(d_model: int = 16, shift: float = 1.5) -> LiveFigure:
    """LayerNorm and RMSNorm of the same vector a + s, with the shift s on a slider (starting at ``shift``).

    At s = 0 the vector has mean 0 and the two coincide (LayerNorm without bias *is*
    RMSNorm of the centred vector). Moving s, LayerNorm's bars stay where they are (it
    subtracts the mean first) while RMSNorm's drift towards a constant ±1 pattern: the
    common offset takes over the RMS budget and the differences between channels shrink.
    It starts shifted, so that the still picture (a page without a kernel) shows the gap.
    One axes with few ticks: tick labels are most of what a frame costs to draw.
    """
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not abs(shift) <= SHIFT_LIMIT:
        raise ValueError(f"shift must be a number in [-{SHIFT_LIMIT:g}, {SHIFT_LIMIT:g}], got {shift!r}")
    a = zero_mean_vector(d_model)
    ones = torch.ones(d_model)
    channels = np.arange(d_model)
    layer = functional.layer_norm(a, ones).numpy()  # the same for every shift: drawn once

    fig, ax = plt.subplots(figsize=(8.4, 3.6))
    input_bars = ax.bar(channels, a.numpy(), width=0.86, color=COLORS["input"], alpha=0.45, label="input a + s")
    (mean_line,) = ax.plot([-1, d_model], [0, 0], "--", color=COLORS["reference"], linewidth=1.2,
                           label="mean of a + s")
    layer_bars = ax.bar(channels - 0.19, layer, width=0.36, color=COLORS["layernorm"], hatch="//",
                        label="LayerNorm (no bias)")
    rms_bars = ax.bar(channels + 0.19, layer, width=0.36, color=COLORS["rmsnorm"], hatch="..",
                      label="RMSNorm")
    ax.axhline(0.0, color=COLORS["reference"], linewidth=0.6)
    ax.set_xlim(-0.7, d_model - 0.3)
    ax.set_ylim(-SHIFT_LIMIT - 2.7, SHIFT_LIMIT + 2.7)
    ax.set_xticks(range(0, d_model, 5))
    ax.set_yticks([-4, -2, 0, 2, 4])
    ax.grid(axis="x", visible=False)
    ax.set_axisbelow(True)  # grid under the bars: a move then redraws bars, not tick labels
    ax.set_xlabel("channel")
    ax.set_ylabel("value")
    ax.legend(handles=[input_bars, mean_line, layer_bars, rms_bars], loc="center left", bbox_to_anchor=(1.01, 0.5),
              labelspacing=1.0)
    title = ax.set_title(" ")

    def update(shift: float) -> None:
        x = a + shift
        rms = functional.rms_norm(x, ones)
        for bar, value in zip(input_bars, x.tolist(), strict=True):
            bar.set_height(value)
        for bar, value in zip(rms_bars, rms.tolist(), strict=True):
            bar.set_height(value)
        mean_line.set_ydata([shift, shift])
        gap = np.abs(rms.numpy() - layer).max()
        title.set_text(f"shift s = {shift:+.1f}:  max |RMSNorm − LayerNorm| = {gap:.2f}")

    slider = widgets.FloatSlider(value=shift, min=-SHIFT_LIMIT, max=SHIFT_LIMIT, step=0.1, description="shift s",
                                 readout_format="+.1f", continuous_update=True)
    return LiveFigure(fig, update, {"shift": slider},
                      "LayerNorm and RMSNorm of the same vector shifted by s (slider: shift s)")


# --- timing: ratios with their spread --------------------------------------------------

def draw_timing_ratios(samples: dict[str, list[float]], title: str) -> plt.Figure:
    """Every ratio of ``timing.NORM_RATIOS``: each paired repeat as a dot, the median and quartiles as a bar.

    The x axis is logarithmic (a ratio of 2 is as far from 1 as a ratio of 0.5); the band
    is Zhang & Sennrich's 7 %–64 % less time of whole models, as a time ratio: context for a
    single-op check, not a target it reproduces.
    """
    labels = list(timing.NORM_RATIOS)
    ratios = [timing.paired_ratios(samples, *timing.NORM_RATIOS[label]) for label in labels]
    low, high = 1 - timing.PAPER_TIME_SAVED[1], 1 - timing.PAPER_TIME_SAVED[0]
    fig, ax = plt.subplots(figsize=(8.8, 3.8))
    ax.axvspan(low, high, color=COLORS["rmsnorm"], alpha=0.12, linewidth=0,
               label="paper, whole models: {:.0%}–{:.0%} less time".format(*timing.PAPER_TIME_SAVED))
    ax.axvline(1.0, color=COLORS["reference"], linewidth=0.8)
    colors = [COLORS["rmsnorm"], COLORS["silu"], COLORS["gelu"], COLORS["layernorm"]]
    for row, (values, color) in enumerate(zip(ratios, colors, strict=True)):
        y = len(labels) - 1 - row
        jitter = np.linspace(-0.18, 0.18, len(values))
        ax.plot(values, y + jitter, "o", color=color, alpha=0.35, markersize=3.5, markeredgewidth=0)
        q1, median, q3 = timing.quartiles(values)
        ax.plot([q1, q3], [y, y], color=color, linewidth=5, solid_capstyle="butt")
        ax.plot([median], [y], "|", color="black", markersize=22, markeredgewidth=2.5)
        ax.text(median, y + 0.27, f"{median:.2f}× [{q1:.2f}–{q3:.2f}]", ha="center", va="bottom", fontsize=10)
    ax.set_yticks(range(len(labels)), [label.replace(", ", "\n") for label in reversed(labels)])
    ax.set_ylim(-0.6, len(labels) - 0.1)
    everything = [v for values in ratios for v in values]
    ax.set_xscale("log")
    ax.set_xlim(min(0.05, min(everything) / 1.5), max(20.0, max(everything) * 1.5))
    ticks = [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("time ratio, per paired repeat (lower: the first is faster)")
    ax.set_title(title)
    ax.grid(axis="y", visible=False)
    ax.legend(loc="lower right")
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
    ax_loss.set_title("Fitting the gain", fontsize=11)
    channels = np.arange(target.shape[-1])
    ax_gain.bar(channels - 0.2, target.numpy(), width=0.4, color=COLORS["input"], label="target")
    ax_gain.bar(channels + 0.2, learned.numpy(), width=0.4, color=COLORS["rmsnorm"], label="learned")
    ax_gain.axhline(1.0, color=COLORS["reference"], linewidth=0.8, linestyle=":")
    ax_gain.set_xlabel("channel")
    ax_gain.set_ylabel("gain g")
    ax_gain.set_title("Gain after training (dotted: start)", fontsize=11)
    ax_gain.legend()
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

    fig, (ax_s, ax_o) = plt.subplots(1, 2, figsize=(10.4, 3.6), width_ratios=(1, 1.15))
    ax_s.loglog(SCALES, in_rms, "o-", color=COLORS["input"], label="input c·x")
    ax_s.loglog(SCALES, out_rms, "s--", color=COLORS["rmsnorm"], label="RMSNorm(c·x)")
    ax_s.set_xlabel("scale c")
    ax_s.set_ylabel("RMS")
    ax_s.set_title("Scale invariance (ε bites at tiny c)", fontsize=11)
    ax_s.legend(loc="upper left")

    channels = np.arange(16)
    ax_o.plot(channels, demo["reference"][:16].numpy(), "o", color=COLORS["reference"], markersize=9,
              fillstyle="none", label="float64\nreference")
    ax_o.plot(channels, demo["upcast"][:16].float().numpy(), "x", color=COLORS["rmsnorm"], markersize=7,
              label="fp16 with\nupcast")
    ax_o.plot(channels, demo["no upcast"][:16].float().numpy(), "s", color=COLORS["post"], markersize=5,
              label="fp16 without\nupcast")
    ax_o.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_o.set_xlim(-0.8, 15.8)
    ax_o.set_ylim(-1.5, 1.5)
    ax_o.set_xlabel("channel")
    ax_o.set_ylabel("output")
    ax_o.set_title("fp16 input with |x| ≈ 300: x² overflows", fontsize=11)
    ax_o.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), labelspacing=1.0)
    return fig


FIGURES = {"rmsnorm_scale_and_overflow": rmsnorm_scale_and_overflow}


def _timing_example() -> plt.Figure:
    """The timing chart of the stored run at the notebook's width (a real, fixed example)."""
    from prenorm_lib.lab import experiments
    from prenorm_lib.lab.experiments import rmsnorm_speed

    record = experiments.load("rmsnorm_speed")
    samples = rmsnorm_speed.pooled_samples([run for _, run in record.by_seed()], rmsnorm_speed.HEADLINE_WIDTH)
    return draw_timing_ratios(samples, "Forward + backward, 1024 × 1024 fp32, one thread")


def _gain_fit_example() -> plt.Figure:
    target = torch.linspace(0.5, 2.0, 8)
    return draw_gain_fit(*fit_gain(target), target)


EXAMPLES = {
    "rms_by_depth": draw_rms_by_depth,
    "shift_slider": shift_slider,
    "timing_ratios": _timing_example,
    "gain_fit": _gain_fit_example,
}

SLIDERS = {"rmsnorm_shift": shift_slider}
