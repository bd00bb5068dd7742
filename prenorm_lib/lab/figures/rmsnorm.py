"""Figures and small experiments of notebook 01 (RMSNorm).

The notebook explains; the code it runs more than once (plots, the depth experiment, the
shift slider, the deliberately broken kernel of the fp16 demo) lives here so the README's
figure and the notebook's picture are drawn by the same function. The timing itself is
:mod:`prenorm_lib.lab.timing`; its stored run is the experiment ``rmsnorm_speed``. The
optional deep dive (DyT and Derf in the norm's place) plots the records ``dyt_data_size``
and ``dyt_tuning``.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import FixedLocator, MaxNLocator, NullFormatter, NullLocator
from scipy.optimize import curve_fit

from prenorm_lib import functional, validation
from prenorm_lib.lab import timing
from prenorm_lib.lab.plotting import COLORS, LINESTYLES
from prenorm_lib.lab.sliders import LiveFigure
from prenorm_lib.lab.stats import PairedComparison
from prenorm_lib.norm import RMSNorm

__all__ = [
    "EXAMPLES",
    "FIGURES",
    "activation_rms_by_depth",
    "draw_gain_fit",
    "draw_normaliser_comparison",
    "draw_rms_by_depth",
    "draw_s_curves",
    "draw_timing_ratios",
    "fit_gain",
    "fp16_overflow_demo",
    "operation_counts",
    "rmsnorm_scale_and_overflow",
    "shift_slider",
    "tanh_fit",
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


# --- do we still need the norm? DyT and Derf (the optional deep dive) ---------------------

def tanh_fit(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Least squares of y ≈ a·tanh(b·x) and of the straight line y ≈ c·x: their parameters and R².

    How much of a norm's input–output cloud a scaled tanh explains beyond a line through the
    origin: DyT's premise, measured on the course's own model.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    slope = float(x @ y / (x @ x))
    total = float(((y - y.mean()) ** 2).sum())
    scale0 = float(np.abs(y).max())
    (a, b), _ = curve_fit(lambda v, a, b: a * np.tanh(b * v), x, y, p0=(scale0, slope / scale0), maxfev=20_000)
    r2 = lambda residual: 1 - float((residual**2).sum()) / total
    return {"a": float(a), "b": float(b), "r2_tanh": r2(y - a * np.tanh(b * x)), "r2_line": r2(y - slope * x),
            "slope": slope}


def draw_s_curves(curves: dict[str, dict[str, list[float]]], title: str) -> plt.Figure:
    """Each RMSNorm's input against its output before the gain, with the best a·tanh(b·x) (dashed).

    DyT's Fig. 2 draws the same cloud for ViT, wav2vec 2.0 and DiT; here it is the course's
    own two-block LM. Each token is a line through 0 with slope 1/RMS(token); together the
    tokens draw whatever shape the norm has.
    """
    fig, axes = plt.subplots(1, len(curves), figsize=(2.3 * len(curves) + 0.6, 3.3), sharey=True)
    for ax, (name, points) in zip(np.atleast_1d(axes), curves.items(), strict=True):
        x, y = np.asarray(points["x"]), np.asarray(points["y"])
        ax.plot(x, y, ".", color=COLORS["rmsnorm"], alpha=0.35, markersize=3, markeredgewidth=0,
                label="elements (input, output)")
        fit = tanh_fit(x, y)
        grid = np.linspace(x.min(), x.max(), 200)
        ax.plot(grid, fit["a"] * np.tanh(fit["b"] * grid), color=COLORS["dyt"], linestyle=LINESTYLES["dyt"],
                label="best a·tanh(b·x)")
        ax.set_title(name.replace("layers.", "block ").replace(".", " "), fontsize=11)
        ax.set_xlabel("input x")
        ax.text(0.04, 0.96, f"R² tanh {fit['r2_tanh']:.2f}\nR² line {fit['r2_line']:.2f}", transform=ax.transAxes,
                va="top", fontsize=10)
    np.atleast_1d(axes)[0].set_ylabel("x / RMS(x)")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, markerscale=3)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    return fig


def draw_normaliser_comparison(finals: dict[str, dict[str, list[float]]],
                               comparisons: dict[str, dict[str, PairedComparison]],
                               labels: dict[str, str], steps: int) -> plt.Figure:
    """Final held-out loss of each normaliser by training-set size (left) and its paired gap to RMSNorm (right).

    ``finals[size][normaliser]`` holds one loss per seed; ``comparisons[size][normaliser]`` the paired
    difference normaliser − RMSNorm with its 95 % interval; ``labels[size]`` the x-axis label.
    """
    sizes = list(finals)
    kinds = list(finals[sizes[0]])
    names = {"rmsnorm": "RMSNorm", "dyt": "DyT", "derf": "Derf"}
    markers = {"rmsnorm": "o", "dyt": "s", "derf": "^"}
    fig, (ax_loss, ax_gap) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    positions = np.arange(len(sizes))
    for k, kind in enumerate(kinds):
        offset = (k - (len(kinds) - 1) / 2) * 0.18
        means = [np.nanmean(finals[size][kind]) for size in sizes]
        for i, size in enumerate(sizes):
            values = finals[size][kind]
            ax_loss.plot(np.full(len(values), i + offset), values, markers[kind], color=COLORS[kind], alpha=0.35,
                         markersize=4, markeredgewidth=0)
        ax_loss.plot(positions + offset, means, marker=markers[kind], color=COLORS[kind],
                     linestyle=LINESTYLES[kind], label=f"{names[kind]} (mean, and each seed)")
    ax_loss.set_xticks(positions, [labels[size] for size in sizes])
    ax_loss.set_ylabel("final held-out loss (nats/byte)")
    ax_loss.set_xlabel("training text")
    ax_loss.set_title(f"Held-out loss after {steps} updates", fontsize=11)
    ax_loss.legend(fontsize=10)
    ax_gap.axhline(0.0, color=COLORS["reference"], linewidth=0.8, linestyle=LINESTYLES["reference"])
    for k, kind in enumerate(kind for kind in kinds if kind != "rmsnorm"):
        offset = (k - 0.5) * 0.2
        gaps = [comparisons[size][kind] for size in sizes]
        for i, c in enumerate(gaps):
            ax_gap.plot(np.full(c.n, i + offset), c.differences, markers[kind], color=COLORS[kind], alpha=0.35,
                        markersize=4, markeredgewidth=0)
            ax_gap.errorbar([i + offset], [c.mean], yerr=[[c.mean - c.low], [c.high - c.mean]], fmt="none",
                            ecolor=COLORS[kind], capsize=4)
        ax_gap.plot(positions + offset, [c.mean for c in gaps], marker=markers[kind], color=COLORS[kind],
                    linestyle=LINESTYLES[kind], label=f"{names[kind]} − RMSNorm (mean, 95 % CI)")
    ax_gap.set_xticks(positions, [labels[size] for size in sizes])
    ax_gap.set_ylabel("paired difference (nats/byte)")
    ax_gap.set_xlabel("training text")
    ax_gap.set_title("Minus RMSNorm, seed by seed (< 0: lower)", fontsize=11)
    ax_gap.legend(fontsize=10)
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


def _stored_dyt_record():
    from prenorm_lib.lab import experiments

    return experiments.load("dyt_data_size")


def _s_curve_example() -> plt.Figure:
    from prenorm_lib.lab.experiments import dyt_data_size

    return dyt_data_size.s_curve_figure(_stored_dyt_record())


def _normaliser_comparison_example() -> plt.Figure:
    from prenorm_lib.lab.experiments import dyt_data_size

    return dyt_data_size.comparison_figure(_stored_dyt_record())


EXAMPLES = {
    "rms_by_depth": draw_rms_by_depth,
    "shift_slider": shift_slider,
    "timing_ratios": _timing_example,
    "gain_fit": _gain_fit_example,
    "dyt_s_curves": _s_curve_example,
    "normaliser_comparison": _normaliser_comparison_example,
}

SLIDERS = {"rmsnorm_shift": shift_slider}
