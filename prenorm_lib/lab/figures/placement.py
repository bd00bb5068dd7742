"""Plots of notebook 05 (pre-norm vs post-norm): gradients, the stream, the grid, the frontier sweep.

The numbers come from :mod:`prenorm_lib.lab.placement_measurements`; the diagrams from
:mod:`prenorm_lib.lab.figures.placement_diagrams`. Every block variant has one colour *and*
one line style or marker, the same in every figure, so no two lines are told apart by colour
alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from prenorm_lib.lab.data import Corpus, make_corpus
from prenorm_lib.lab.experiments import warmup_grid
from prenorm_lib.lab.figures.placement_diagrams import prenorm_vs_postnorm_diagram
from prenorm_lib.lab.placement_measurements import (
    _over_finite,
    branch_gains_over_seeds,
    depth_profiles,
    depth_transfer_losses,
    fig3_grad_norms,
    first_update_by_depth,
    gradient_by_layer_arrays,
    grid_summary,
    hidden_variance_summary,
    lemma2_bounds,
    lr_sweep_summary,
    residual_norms_over_seeds,
    theorem1_arrays,
)
from prenorm_lib.lab.plotting import COLORS, DASHES, OKABE_ITO, mean_band
from prenorm_lib.lab.sliders import LiveFigure
from prenorm_lib.lab.train import History

PLACEMENT_LABELS = {
    "pre": "pre-norm",
    "post": "post-norm",
    "none": "no norm",
    "post, scaled init": "post-norm, scaled init",
    "none, scaled init": "no norm, scaled init",
    "deepnorm": "DeepNorm",
    "post, 4 blocks": "post-norm, 4 blocks",
    "post, 5 blocks": "post-norm, 5 blocks",
    "pre, 4 blocks": "pre-norm, 4 blocks",
}
# colour and line style of every block variant the notebook compares
VARIANT_STYLES = {
    "pre": (COLORS["pre"], "-"),
    "post": (COLORS["post"], "--"),
    "none": (COLORS["none"], ":"),
    "post, scaled init": (COLORS["post"], "-."),
    "none, scaled init": (COLORS["none"], (0, (3, 1, 1, 1))),
    "deepnorm": (COLORS["gelu"], (0, (8, 2))),
    "pre-norm": (COLORS["pre"], "-"),
    "pre-norm + per-head QK-norm (Qwen3)": (COLORS["pre"], "--"),
    "sandwich": (COLORS["silu"], "-."),
    "Peri-LN (sandwich)": (COLORS["silu"], "-."),
    "OLMo 2 (reordered + flat QK-norm)": (COLORS["swiglu"], (0, (5, 1, 1, 1, 1, 1))),
    "DeepNorm": (COLORS["gelu"], (0, (8, 2))),
    "ReZero": ("#8c564b", (0, (1, 2))),
    "post-norm": (COLORS["post"], "-"),
    "Mix-LN": (COLORS["swiglu"], "-."),
    "LayerNorm Scaling": (COLORS["gelu"], (0, (5, 1, 1, 1, 1, 1))),
    "pre-norm + QK-clip (Kimi K2, τ = 100)": (OKABE_ITO["sky_blue"], "--"),
    "pre-norm + soft-capping (Gemma 2, 50 / 30)": (OKABE_ITO["reddish_purple"], (0, (3, 1, 1, 1))),
    "pre-norm + z-loss (PaLM, 1e-4)": (OKABE_ITO["grey"], (0, (1, 1))),
    "DyT in place of RMSNorm (Zhu et al. 2025)": (OKABE_ITO["black"], (0, (6, 2, 1, 2))),
}
# the second cue of the frontier sweep: one marker per block type, so that lines of similar
# colour (DeepNorm and post-norm, pre-norm and OLMo 2 under deuteranopia) stay apart
VARIANT_MARKERS = {
    "pre-norm": "o",
    "pre-norm + per-head QK-norm (Qwen3)": "s",
    "sandwich": "^",
    "Peri-LN (sandwich)": "^",
    "Mix-LN": "D",
    "LayerNorm Scaling": "P",
    "OLMo 2 (reordered + flat QK-norm)": "v",
    "DeepNorm": "X",
    "ReZero": "P",
    "post-norm": "*",
    "pre-norm + QK-clip (Kimi K2, τ = 100)": "h",
    "pre-norm + soft-capping (Gemma 2, 50 / 30)": "d",
    "pre-norm + z-loss (PaLM, 1e-4)": "p",
    "DyT in place of RMSNorm (Zhu et al. 2025)": "<",
}


def variant_style(variant: str) -> tuple[str, str]:
    """(colour, line style) of a block variant, the same in every figure of the course."""
    return VARIANT_STYLES.get(variant, (COLORS["reference"], ":"))


def _label(variant: str) -> str:
    return PLACEMENT_LABELS.get(variant, variant)


def _draw_grad_norms(ax, norms: Mapping[str, np.ndarray]) -> None:
    for placement, runs in norms.items():
        layers = np.arange(1, runs.shape[1] + 1)
        color, _ = variant_style(placement)
        mean_band(ax, layers, runs, _label(placement), color=color)
        ax.plot(layers, runs.mean(axis=0), "o", color=color, markersize=4)
    ax.set_xlabel("layer (input side = 1)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(np.arange(1, next(iter(norms.values())).shape[1] + 1))


FFN_TITLES = {"relu": "ReLU FFN (as in the paper)", "silu": "SiLU FFN", "swiglu": "SwiGLU FFN (the modern block)"}


def plot_fig3_by_ffn(grads: Mapping[str, Mapping[str, np.ndarray]]) -> plt.Figure:
    """Xiong et al.'s Fig. 3 once per feed-forward network: ``grads[ffn][placement]`` is (n_seeds, L)."""
    fig, axes = plt.subplots(1, len(grads), figsize=(4.9 * len(grads), 3.9), squeeze=False)
    for ax, (ffn, norms) in zip(axes[0], grads.items(), strict=True):
        _draw_grad_norms(ax, norms)
        n_seeds = next(iter(norms.values())).shape[0]
        ax.set_title(f"{FFN_TITLES.get(ffn, ffn)}, {n_seeds} seeds")
    axes[0, 0].set_ylabel(r"$\|\partial\,\mathrm{loss}/\partial W_{\mathrm{FFN}}\|$ at init")
    axes[0, 0].legend(loc="lower left")
    return fig


def xiong_fig3_grad_norms() -> plt.Figure:
    """Xiong et al. 2020, Fig. 3, at course scale: 6 layers, d_model 64, 8 seeds, ReLU and SwiGLU."""
    return plot_fig3_by_ffn(fig3_grad_norms(make_corpus()))




def plot_branch_gains(gains: Mapping[str, Mapping[str, np.ndarray]]) -> plt.Figure:
    """Left: forward and backward gain of the FFN branch per FFN kind (mean over blocks and seeds).
    Right: the share of the stream common to all positions, by depth.

    A ReLU branch has equal bars; SwiGLU, a product of two linear maps, passes back about
    twice what it adds. A ReLU's outputs are never negative, so they share a mean that the
    post-norm stream accumulates; attention, an average over positions, then adds more.
    """
    fig, (ax, ax_shared) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    kinds = list(gains)
    x = np.arange(len(kinds))
    forward = [gains[k]["ffn_forward"].mean() for k in kinds]
    backward = [gains[k]["ffn_backward"].mean() for k in kinds]
    ax.bar(x - 0.19, forward, width=0.36, color=COLORS["input"], label=r"forward $\|F(u)\|^2/\|u\|^2$")
    ax.bar(x + 0.19, backward, width=0.36, color=COLORS["output"], label=r"backward $\|J_F^\top g\|^2/\|g\|^2$")
    for i, (f, b) in enumerate(zip(forward, backward, strict=True)):
        ax.text(i, max(f, b) + 0.012, f"ratio {b / f:.1f}", ha="center", va="bottom")
    ax.set_xticks(x, [FFN_TITLES.get(k, k).split(" (")[0] for k in kinds])
    ax.set_ylim(0, 1.5 * max(max(forward), max(backward)))
    ax.set_ylabel("gain of the FFN branch")
    ax.set_title("What each FFN adds vs passes back")
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right")
    for kind in kinds:
        shared = gains[kind]["shared"]
        color = COLORS.get(kind, COLORS["reference"])
        depths = np.arange(shared.shape[1])
        ax_shared.plot(depths, shared.mean(axis=0), "o-", color=color, markersize=4,
                       label=FFN_TITLES.get(kind, kind).split(" (")[0])
    ax_shared.set(xlabel=r"depth $l$ (0 = embeddings)", ylabel="share common to all positions", ylim=(0, 1),
                  title="The post-norm stream at init")
    ax_shared.legend(loc="upper left")
    return fig




def depth_slider(profiles: Mapping, initial: int | None = None) -> LiveFigure:
    """Slider over the depth L: the stream's ‖x_l‖²/d (with Lemma 2's band) and the FFN gradient by layer.

    Everything is precomputed (:func:`depth_profiles`); a move only swaps the lines' data.
    ``initial`` is the depth drawn first (the middle one by default): a notebook that moves
    the slider while it runs should leave it there, so the stored picture and the stored
    slider value agree.
    """
    depths, d_model = list(profiles["depths"]), profiles["d_model"]
    placements = list(profiles["stream"])
    max_depth = max(depths)
    fig, (ax_stream, ax_grad) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    band = np.arange(max_depth + 1)
    low, high = lemma2_bounds(band, d_model)
    ax_stream.fill_between(band, low / d_model, high / d_model, color=COLORS["pre"], alpha=0.12, linewidth=0,
                           label="Lemma 2 band")
    stream_lines, grad_lines = {}, {}
    for placement in placements:
        color, style = variant_style(placement)
        (stream_lines[placement],) = ax_stream.plot([], [], marker="o", linestyle=style, color=color, markersize=4,
                                                    label=_label(placement))
        (grad_lines[placement],) = ax_grad.plot([], [], marker="o", linestyle=style, color=color, markersize=4)
    top_stream = max(float(s[-1]) for runs in profiles["stream"].values() for s in runs) / d_model
    top_grad = max(float(g.max()) for runs in profiles["grads"].values() for g in runs)
    ax_stream.set(xlim=(-0.3, max_depth + 0.3), ylim=(0, 1.08 * max(top_stream, high[-1] / d_model)),
                  xlabel=r"depth $l$ (0 = embeddings)", ylabel=r"mean $\|x_l\|^2/d$")
    ax_grad.set(xlim=(0.7, max_depth + 0.3), ylim=(0, 1.12 * top_grad), xlabel="layer (input side = 1)",
                ylabel=r"$\|\partial\,\mathrm{loss}/\partial W_{\mathrm{FFN}}\|$")
    for ax in (ax_stream, ax_grad):  # few ticks: tick labels are most of what a frame costs to draw
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    ax_stream.legend(loc="upper left")
    stream_title = ax_stream.set_title(" ")
    grad_title = ax_grad.set_title(" ")

    def update(L: int) -> None:
        i = depths.index(L)
        for placement in placements:
            stream = profiles["stream"][placement][i] / d_model
            grads = profiles["grads"][placement][i]
            stream_lines[placement].set_data(np.arange(len(stream)), stream)
            grad_lines[placement].set_data(np.arange(1, len(grads) + 1), grads)
        stream_title.set_text(f"Residual stream, L = {L}")
        ratios = ", ".join(f"{_label(p)} {profiles['grads'][p][i][-1] / profiles['grads'][p][i][0]:.2f}"
                           for p in placements)
        grad_title.set_text(f"last/first: {ratios}" if L > 1 else "FFN gradient, L = 1")

    slider = widgets.SelectionSlider(options=depths, value=depths[len(depths) // 2] if initial is None else initial,
                                     description="depth L",
                                     continuous_update=True)
    return LiveFigure(fig, update, {"L": slider},
                      "Residual stream and FFN gradient by layer at initialisation (slider: depth L)")


def plot_residual_norms(norms: Mapping[str, np.ndarray], d_model: int) -> plt.Figure:
    """‖x_l‖² by depth, mean and min–max over seeds.

    Left: pre- and post-norm on a linear scale with Lemma 2's band for pre-norm. Right:
    every variant on a log scale, for the unnormalised stream that leaves the chart
    (depths where a seed overflowed to inf are left out).
    """
    fig, (ax_lin, ax_log) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    depths = np.arange(next(iter(norms.values())).shape[1])
    low, high = lemma2_bounds(depths, d_model)
    ax_lin.fill_between(depths, low, high, color=COLORS["pre"], alpha=0.12, linewidth=0,
                        label="Lemma 2 band")
    for ax, placements in ((ax_lin, ("pre", "post")), (ax_log, tuple(norms))):
        for placement in placements:
            if placement not in norms:
                continue
            runs = norms[placement]
            finite = np.isfinite(runs).all(axis=0)  # depths where no seed overflowed
            shown = len(depths) if finite.all() else int(np.argmin(finite))
            label = _label(placement) + ("" if shown == len(depths) else f" (inf beyond {shown - 1})")
            color, style = variant_style(placement)
            line = mean_band(ax, depths[:shown], runs[:, :shown], label, color=color, spread="minmax")
            line.set_linestyle(style)
            ax.plot(depths[:shown], runs[:, :shown].mean(axis=0), "o", color=color, markersize=4)
        ax.set_xlabel(r"depth $l$ (0 = embeddings)")
        ax.set_ylabel(r"mean $\|x_l\|^2$")
    ax_lin.legend(loc="upper left")
    ax_log.legend(loc="upper left", fontsize=10)
    ax_lin.set_ylim(bottom=0)
    ax_lin.set_title(f"Pre- vs post-norm (d = {d_model})")
    ax_log.set_yscale("log")
    ax_log.set_title("Every variant, log scale")
    return fig


def plot_last_layer_grad_by_depth(grads: Mapping[str, np.ndarray], depths: Sequence[int]) -> plt.Figure:
    """The last block's FFN gradient norm against depth L, with a 1/√L guide through pre-norm's first point."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    depths_arr = np.asarray(depths, dtype=float)
    for placement, runs in grads.items():
        color, _ = variant_style(placement)
        mean_band(ax, depths_arr, runs, _label(placement), color=color)
        ax.plot(depths_arr, runs.mean(axis=0), "o", color=color, markersize=4)
    if "pre" in grads:
        start = grads["pre"].mean(axis=0)[0]
        ax.plot(depths_arr, start * np.sqrt(depths_arr[0] / depths_arr), ":", color=COLORS["reference"],
                label=r"$\propto 1/\sqrt{L}$")
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths_arr, [str(d) for d in depths])
    ax.minorticks_off()
    ax.set_xlabel("number of layers L")
    ax.set_ylabel(r"last block's $\|\partial\,\mathrm{loss}/\partial W_{\mathrm{FFN}}\|$")
    ax.set_ylim(bottom=0)
    ax.set_title("Theorem 1: last-layer gradient vs depth")
    ax.legend(loc="lower left")
    return fig




def plot_theorem1(arrays: Mapping[int, Mapping[str, np.ndarray]], depths: Sequence[int],
                  span: tuple[int, int] | None = None) -> plt.Figure:
    """Theorem 1 in its own quantity: the last block's ‖∂loss/∂W2‖ against L, one panel per d_model.

    ``arrays[d_model][placement]`` is (n_seeds, len(depths)); mean ± one standard deviation
    over the seeds, a 1/√L guide through pre-norm's first point, and ``span`` (first, last
    depth) shaded: the depths the paper measured.
    """
    fig, axes = plt.subplots(1, len(arrays), figsize=(5.2 * len(arrays), 3.9), squeeze=False)
    depths_arr = np.asarray(depths, dtype=float)
    for ax, (width, runs_by_placement) in zip(axes[0], arrays.items(), strict=True):
        if span is not None:
            ax.axvspan(*span, color=COLORS["input"], alpha=0.18, linewidth=0, label="depths in the paper")
        for placement, runs in runs_by_placement.items():
            color, style = variant_style(placement)
            line = mean_band(ax, depths_arr, runs, f"{_label(placement)} ({runs.shape[0]} seeds)", color=color)
            line.set_linestyle(style)
            ax.plot(depths_arr, runs.mean(axis=0), "o" if placement == "pre" else "s", color=color, markersize=4)
        if "pre" in runs_by_placement:
            start = runs_by_placement["pre"].mean(axis=0)[0]
            ax.plot(depths_arr, start * np.sqrt(depths_arr[0] / depths_arr), ":", color=COLORS["reference"],
                    label=r"$\propto 1/\sqrt{L}$")
        ax.set_xticks(depths_arr, [str(d) for d in depths])
        ax.set(xlabel="number of blocks L", ylim=(0, None), title=f"d_model {width}")
    axes[0, 0].set_ylabel(r"last block's $\|\partial\,\mathrm{loss}/\partial W_2\|_F$ at init")
    axes[0, 0].legend(loc="lower left", fontsize=9)
    return fig


def plot_hidden_variance(summary: Mapping[str, Mapping[str, np.ndarray]], lrs: Sequence[float],
                         lr: float) -> plt.Figure:
    """Peri-LN's quantity. Left: the hidden state's variance by depth at the end of training at ``lr``
    (geometric mean and the seeds' range, log scale); right: the last block's variance against the
    learning rate (median and range over the seeds that finished)."""
    fig, (ax_depth, ax_lr) = plt.subplots(1, 2, figsize=(11, 4.2))
    column = list(lrs).index(lr)
    lrs_arr = np.asarray(lrs, dtype=float)
    for placement, arrays in summary.items():
        color, style = variant_style(placement)
        marker = VARIANT_MARKERS.get(placement, "o")
        runs = arrays["variance"][:, column, :]  # (seeds, L + 1)
        depths = np.arange(runs.shape[1])
        finite = runs[np.isfinite(runs).all(axis=1)]
        if len(finite):
            ax_depth.plot(depths, np.exp(np.log(finite).mean(axis=0)), linestyle=style, marker=marker, color=color,
                          markersize=5, label=placement)
            ax_depth.fill_between(depths, finite.min(axis=0), finite.max(axis=0), color=color, alpha=0.15,
                                  linewidth=0)
        last = arrays["variance"][:, :, -1]  # (seeds, lrs)
        center = _over_finite(last, np.median)
        shown = np.isfinite(center)
        ax_lr.plot(lrs_arr[shown], center[shown], linestyle=style, marker=marker, color=color, markersize=5,
                   label=placement)
        ax_lr.fill_between(lrs_arr[shown], _over_finite(last, np.min)[shown], _over_finite(last, np.max)[shown],
                           color=color, alpha=0.15, linewidth=0)
    ax_depth.set(yscale="log", xlabel="depth l (0 = embeddings, then after each block)",
                 ylabel="variance of the hidden state", title=f"By depth, end of training, lr {lr:g}")
    ax_depth.set_xticks(depths)
    ax_lr.set(xscale="log", yscale="log", xlabel="peak learning rate", ylabel="variance after the last block",
              title="The last block, against the learning rate")
    ax_lr.set_xticks(lrs_arr, [f"{v:g}" for v in lrs])
    ax_lr.minorticks_off()
    ax_depth.legend(loc="upper left", fontsize=9)
    return fig


def plot_gradient_by_layer(at_init: Mapping[str, np.ndarray], trained: Mapping[str, np.ndarray],
                           trained_title: str) -> plt.Figure:
    """Each block's gradient norm per placement, at initialisation (left) and during training (right).

    ``at_init[placement]`` and ``trained[placement]`` are (n_seeds, L); log scale, so a profile
    that falls or rises by a constant factor per block is a straight line.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = ((axes[0], at_init, "At initialisation (8-batch mean)"), (axes[1], trained, trained_title))
    for ax, arrays, title in panels:
        for placement, runs in arrays.items():
            color, style = variant_style(placement)
            finite = runs[np.isfinite(runs).all(axis=1)]
            if not len(finite):
                continue
            blocks = np.arange(1, finite.shape[1] + 1)
            with np.errstate(divide="ignore"):  # a gradient stored as 0 has no logarithm
                center = np.exp(np.log(finite).mean(axis=0))
            shown = center > 0  # a block whose gradient rounds to 0 in a seed has no point on a log scale
            ax.plot(blocks[shown], center[shown], linestyle=style, color=color,
                    marker=VARIANT_MARKERS.get(placement, "o"), markersize=5, label=placement)
            ax.fill_between(blocks[shown], finite.min(axis=0)[shown], finite.max(axis=0)[shown], color=color,
                            alpha=0.15, linewidth=0)
        ax.set(yscale="log", xlabel="block (input side = 1)", title=title)
        ax.set_xticks(np.arange(1, next(iter(arrays.values())).shape[1] + 1))
    axes[0].set_ylabel("gradient norm of the block's parameters")
    axes[0].legend(loc="lower left", fontsize=9)
    return fig


def plot_depth_transfer(losses: Mapping[str, np.ndarray], depths: Sequence[int], lrs: Sequence[float]
                        ) -> plt.Figure:
    """Final loss against the learning rate, one panel per parametrisation, one line per depth.

    ``losses[name]`` is (n_seeds, n_depths, n_lrs); the line is the mean over the seeds that
    finished, the band their range; the marker on each line is its lowest point.
    """
    fig, axes = plt.subplots(1, len(losses), figsize=(min(11.0, 4.4 * len(losses)), 4.0), sharey=True,
                             squeeze=False)  # no wider than the notebook's column, where text keeps its size
    lrs_arr = np.asarray(lrs, dtype=float)
    shades = [COLORS["input"], COLORS["pre"], COLORS["reference"], COLORS["post"]]
    for ax, (name, runs) in zip(axes[0], losses.items(), strict=True):
        for k, depth in enumerate(depths):
            center = _over_finite(runs[:, k, :], np.mean)
            shown = np.isfinite(center)
            color = shades[k % len(shades)]
            ax.plot(lrs_arr[shown], center[shown], linestyle=DASHES[k % len(DASHES)], color=color, marker="o",
                    markersize=4, label=f"L = {depth}")
            ax.fill_between(lrs_arr[shown], _over_finite(runs[:, k, :], np.min)[shown],
                            _over_finite(runs[:, k, :], np.max)[shown], color=color, alpha=0.12, linewidth=0)
            best = int(np.nanargmin(np.where(shown, center, np.nan)))
            ax.plot(lrs_arr[best], center[best], marker="*", markersize=14, color=color, linestyle="none")
        ax.set(xscale="log", xlabel="peak learning rate", title=name)
        ax.set_xticks(lrs_arr, [f"{v:g}" for v in lrs])
        ax.minorticks_off()
    axes[0, 0].set_ylabel("final validation loss")
    axes[0, 0].legend(loc="upper center", fontsize=9)
    return fig


def plot_stability_grid(
    losses: Mapping[tuple[str, int, float], float], labels: Mapping[tuple[str, int, float], str],
    placements: Sequence[str], warmups: Sequence[int], lrs: Sequence[float], reference: float | None = None,
    title: str = "Does it train? learning rate × warmup × norm placement",
) -> plt.Figure:
    """Heatmap: rows = placements, columns = warmup × learning rate; NaN cells (diverged) are hatched.

    ``losses`` gives the colour (final validation loss), ``labels`` the text in each cell,
    both keyed ``(placement, warmup, lr)``. ``reference`` (e.g. the unigram loss) marks
    where the colour scale tops out.
    """
    columns = [(w, lr) for w in warmups for lr in lrs]
    grid = np.array([[losses[(p, w, lr)] for w, lr in columns] for p in placements], dtype=float)
    finite = grid[np.isfinite(grid)]
    vmax = reference if reference is not None else (finite.max() if finite.size else 1.0)
    vmin = finite.min() if finite.size else 0.0
    lines = max(label.count("\n") + 1 for label in labels.values())
    fig, ax = plt.subplots(figsize=(3.6 + 1.25 * len(columns), 1.5 + (0.3 + 0.2 * lines) * len(placements)))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", vmin=vmin, vmax=vmax, aspect="auto")
    for i, p in enumerate(placements):
        for j, (w, lr) in enumerate(columns):
            value = grid[i, j]
            if not math.isfinite(value):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd", hatch="///",
                                       edgecolor="#999999", linewidth=0))
            dark = math.isfinite(value) and (value - vmin) > 0.5 * (vmax - vmin)  # viridis_r: high = dark
            ax.text(j, i, labels[(p, w, lr)], ha="center", va="center", fontsize=10, linespacing=1.0,
                    color="white" if dark else "#111111")
    ax.set_xticks(range(len(columns)), [f"lr {lr:g}\nwarmup {w}" for w, lr in columns])
    ax.set_yticks(range(len(placements)), [_label(p) for p in placements])
    ax.grid(False)
    for j in range(len(lrs), len(columns), len(lrs)):
        ax.axvline(j - 0.5, color="white", lw=4)
    colorbar = fig.colorbar(image, ax=ax, shrink=0.85)
    colorbar.set_label("final validation loss")
    ax.set_title(title)
    return fig


def plot_loss_curves(histories: Mapping[str, History], reference: float | None = None,
                     title: str | None = None,
                     styles: Mapping[str, tuple[str, str]] | None = None) -> plt.Figure:
    """Training loss per step (line, where recorded) and validation loss where it was measured (markers).

    A "history" is anything with ``val_steps`` and ``val_loss`` (and optionally
    ``train_loss``): a :class:`~prenorm_lib.lab.train.History`, or a run of an experiment record.
    ``styles`` maps a name to its (colour, line style) — e.g. from :func:`variant_style`, so a
    block variant keeps its colour; other names take the next colour of the cycle.
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for i, (name, history) in enumerate(histories.items()):
        color, style = (styles or {}).get(name, (f"C{i}", "-"))
        train_loss = getattr(history, "train_loss", None)
        if train_loss:
            ax.plot(np.arange(1, len(train_loss) + 1), train_loss, linestyle=style, color=color, lw=1.2, label=name)
            ax.plot(history.val_steps, history.val_loss, "o", color=color, markersize=5, markeredgecolor="white")
        else:
            ax.plot(history.val_steps, history.val_loss, marker="o", linestyle=style, color=color, markersize=5,
                    label=name)
    if reference is not None:
        ax.axhline(reference, color=COLORS["reference"], ls=":", lw=1.2, label="unigram loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right")
    return fig




def plot_first_update(results: Mapping[str, dict], depths: Sequence[int], at_depth: int,
                      by_layer: Sequence[str] = ("pre", "post")) -> plt.Figure:
    """Left: per block at depth ``at_depth``, the gradient and Adam's update relative to block 1
    (for the variants in ``by_layer``). Right: how much one such update moves the final
    representation, against the depth L (every variant).
    """
    fig, (ax_layers, ax_depth) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    j = list(depths).index(at_depth)
    blocks = np.arange(1, at_depth + 1)
    for name, result in results.items():
        color, style = variant_style(name)
        if name in by_layer:
            gradient = np.mean([runs[j] / runs[j][0] for runs in result["gradient"]], axis=0)
            update = np.mean([runs[j] / runs[j][0] for runs in result["update_ratio"]], axis=0)
            ax_layers.plot(blocks, gradient, "o:", color=color, markersize=4, label=f"{_label(name)}: gradient")
            ax_layers.plot(blocks, update, "s-", color=color, markersize=4, label=f"{_label(name)}: Adam update")
        mean_band(ax_depth, np.asarray(depths, dtype=float), result["output_change"], _label(name), color=color,
                  spread="minmax").set_linestyle(style)
        ax_depth.plot(depths, result["output_change"].mean(axis=0), "o", color=color, markersize=4)
    ax_layers.axhline(1.0, color=COLORS["reference"], lw=0.8)
    ax_layers.set(xlabel="block (input side = 1)", ylabel="relative to block 1", xticks=blocks,
                  title=f"One Adam step, L = {at_depth}")
    ax_layers.legend(loc="lower left")
    ax_layers.set_ylim(0, 1.3)
    ax_depth.set_xscale("log", base=2)
    ax_depth.set_xticks(depths, [str(d) for d in depths])
    ax_depth.minorticks_off()
    ax_depth.set(xlabel="number of layers L", ylabel="‖Δh‖ / ‖h‖ of the final state",
                 title="How far one update moves the output")
    ax_depth.set_ylim(bottom=0)
    ax_depth.legend(loc="upper left")
    return fig




def plot_training_with_agreement(history: History, reference: float | None = None) -> plt.Figure:
    """Left: training and validation loss. Right: agreement accuracy (``history.metrics``) at each evaluation."""
    fig, (ax_loss, ax_agree) = plt.subplots(1, 2, figsize=(10.5, 3.8))
    steps = np.arange(1, len(history.train_loss) + 1)
    ax_loss.plot(steps, history.train_loss, color=COLORS["pre"], lw=1.0, alpha=0.6, label="training batch")
    ax_loss.plot(history.val_steps, history.val_loss, "o-", color=COLORS["pre"], markersize=4, label="validation")
    if reference is not None:
        ax_loss.axhline(reference, color=COLORS["reference"], ls=":", lw=1.2, label="unigram loss")
    ax_loss.set(xlabel="update", ylabel="cross-entropy (nats)", title="Loss")
    ax_loss.legend(loc="upper right")
    names = {"agreement": ("all sentences", "-"), "agreement_attractor": ("attractor in between", "--")}
    for key, (label, style) in names.items():
        if key in history.metrics:
            ax_agree.plot(history.val_steps, history.metrics[key], "o" + style, color=COLORS["swiglu"],
                          markersize=4, label=label)
    ax_agree.axhline(0.5, color=COLORS["reference"], ls=":", lw=1.2, label="chance")
    ax_agree.set(xlabel="update", ylabel="right verb form", ylim=(0, 1.05), title="Subject-verb agreement")
    ax_agree.legend(loc="lower right")
    return fig




def plot_lr_sweep(summary: Mapping[str, Mapping[str, np.ndarray]], lrs: Sequence[float]) -> plt.Figure:
    """Left: final validation loss against learning rate per block type (mean and min–max over the seeds
    that finished); right: the largest attention logit at the end of training (median and min–max,
    log scale). A learning rate at which every seed diverged is left out of the line."""
    fig, (ax_loss, ax_logit) = plt.subplots(1, 2, figsize=(11, 4.6))
    lrs_arr = np.asarray(lrs, dtype=float)
    for block, arrays in summary.items():
        color, style = variant_style(block)
        for ax, runs, center in ((ax_loss, arrays["loss"], arrays["loss_mean"]),
                                 (ax_logit, arrays["logit"], arrays["logit_median"])):
            shown = np.isfinite(center)
            low = _over_finite(runs, np.min)[shown]
            high = _over_finite(runs, np.max)[shown]
            ax.plot(lrs_arr[shown], center[shown], linestyle=style, marker=VARIANT_MARKERS.get(block, "o"),
                    color=color, markersize=6, label=block)
            ax.fill_between(lrs_arr[shown], low, high, color=color, alpha=0.15, linewidth=0)
    for ax in (ax_loss, ax_logit):
        ax.set_xscale("log")
        ax.set_xticks(lrs_arr, [f"{lr:g}" for lr in lrs])
        ax.minorticks_off()
        ax.set_xlabel("peak learning rate")
    ax_loss.set(ylabel="final validation loss", title="LR sensitivity: loss")
    ax_logit.set(ylabel=r"largest $|q\cdot k|/\sqrt{d_k}$", yscale="log", title="Attention-logit growth")
    fig.legend(*ax_loss.get_legend_handles_labels(), loc="outside right center", fontsize=10)
    return fig




FIGURES = {
    "prenorm_vs_postnorm_diagram": prenorm_vs_postnorm_diagram,
    "xiong_fig3_grad_norms": xiong_fig3_grad_norms,
}


def _small_corpus() -> Corpus:
    return make_corpus(n_train_sentences=2_000, n_val_sentences=200)


def _residual_norms_example() -> plt.Figure:
    corpus = _small_corpus()
    norms = {"pre": residual_norms_over_seeds(corpus, "pre", seeds=range(2)),
             "post": residual_norms_over_seeds(corpus, "post", seeds=range(2)),
             "none": residual_norms_over_seeds(corpus, "none", num_layers=6, seeds=range(2)),
             "none, scaled init": residual_norms_over_seeds(corpus, "none", seeds=range(2), scaled_init=True)}
    return plot_residual_norms(norms, 64)


def _depth_example() -> LiveFigure:
    return depth_slider(depth_profiles(_small_corpus(), (1, 2, 4, 8), seeds=range(2)))


def _last_layer_example() -> plt.Figure:
    profiles = depth_profiles(_small_corpus(), (1, 2, 4, 8), seeds=range(2))
    return plot_last_layer_grad_by_depth(profiles["last"], profiles["depths"])


def _theorem1_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("theorem1_depth")
    return plot_theorem1(theorem1_arrays(record), record.config["depths"], span=(6, 14))


def _hidden_variance_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("periln_variance")
    return plot_hidden_variance(hidden_variance_summary(record), record.config["lrs"], 1e-2)


def _gradient_by_layer_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("gradient_by_layer")
    return plot_gradient_by_layer(gradient_by_layer_arrays(record), gradient_by_layer_arrays(record, lr=1e-2),
                                  "After 200 updates at lr 0.01")


def _depth_transfer_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("depth_lr_transfer")
    return plot_depth_transfer(depth_transfer_losses(record), record.config["depths"], record.config["lrs"])


def _branch_gains_example() -> plt.Figure:
    corpus = _small_corpus()
    return plot_branch_gains({ffn: branch_gains_over_seeds(corpus, ffn, seeds=range(2)) for ffn in ("relu", "swiglu")})


def _grid_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("warmup_grid")
    summary = grid_summary(record)
    config = record.config
    losses = {key: cell["loss_mean"] for key, cell in summary.items()}
    labels = {key: cell["label"] for key, cell in summary.items()}
    return plot_stability_grid(losses, labels, list(config["blocks"]), config["warmups"], config["lrs"],
                               reference=record.runs["0"]["unigram_loss"])


def _loss_curves_example() -> plt.Figure:
    from types import SimpleNamespace

    from prenorm_lib.lab import experiments

    cells = experiments.load("warmup_grid").runs["0"]["cells"]
    curves = {_label(block): SimpleNamespace(**cells[warmup_grid.cell_key(block, 0.01, 0)])
              for block in ("pre", "post")}
    return plot_loss_curves(curves, reference=3.8, styles={_label(b): variant_style(b) for b in ("pre", "post")})


def _first_update_example() -> plt.Figure:
    variants = {"pre": {"norm": "pre"}, "post": {"norm": "post"}, "post, scaled init": {"norm": "post",
                                                                                         "scaled_init": True}}
    return plot_first_update(first_update_by_depth(_small_corpus(), variants, (2, 4), seeds=range(2)), (2, 4), 4)


def _training_example() -> plt.Figure:
    history = History(train_loss=[4.0, 3.0, 2.5, 2.4], val_steps=[0, 2, 4], val_loss=[4.2, 2.9, 2.4],
                      metrics={"agreement": [0.5, 0.7, 0.95], "agreement_attractor": [0.4, 0.3, 0.9]})
    return plot_training_with_agreement(history, reference=3.8)


def _lr_sweep_example() -> plt.Figure:
    from prenorm_lib.lab import experiments

    record = experiments.load("frontier_lr_sweep")
    return plot_lr_sweep(lr_sweep_summary(record), record.config["lrs"])


EXAMPLES = {
    "residual_norms": _residual_norms_example,
    "depth_slider": _depth_example,
    "last_layer_grad_by_depth": _last_layer_example,
    "theorem1": _theorem1_example,
    "hidden_variance": _hidden_variance_example,
    "gradient_by_layer": _gradient_by_layer_example,
    "depth_transfer": _depth_transfer_example,
    "branch_gains": _branch_gains_example,
    "stability_grid": _grid_example,
    "loss_curves": _loss_curves_example,
    "first_update": _first_update_example,
    "training_with_agreement": _training_example,
    "lr_sweep": _lr_sweep_example,
}

SLIDERS = {"placement_depth": _depth_example}
