"""Figures of notebook 04: the two block diagrams, Xiong et al.'s measurements, the grid.

The measurements the figures need live here too, so that the notebook and
``python -m prenorm_lib.figures`` draw from the same numbers:

- :func:`ffn_grad_norms_over_seeds` — Xiong et al. 2020, Fig. 3: the gradient norm of each
  block's feed-forward weights at initialisation, one row per seed;
- :func:`residual_norms_over_seeds` — their Lemma 2: the residual stream's squared norm by
  depth at initialisation;
- :func:`stability_grid` — short training runs over learning rate × warmup × placement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from prenorm_lib import probes
from prenorm_lib.data import Corpus, get_batch, make_corpus
from prenorm_lib.plotting import COLORS, mean_band
from prenorm_lib.train import History, TrainConfig, build_model, train

PLACEMENT_LABELS = {"pre": "pre-norm", "post": "post-norm", "none": "no norm"}

# ---------------------------------------------------------------------------------------
# Block diagrams
# ---------------------------------------------------------------------------------------

_STREAM_COLOR = "#222222"
_BOX_W, _BOX_H = 1.7, 0.46
_BRANCH_X = 2.15


def _box(ax, x: float, y: float, text: str, color: str, width: float = _BOX_W) -> None:
    ax.add_patch(FancyBboxPatch(
        (x - width / 2, y - _BOX_H / 2), width, _BOX_H, boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=color, edgecolor="#333333", linewidth=1.0, alpha=0.9, zorder=3,
    ))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5, zorder=4,
            color="white" if color in (COLORS["pre"], COLORS["post"]) else "#111111")


def _plus(ax, x: float, y: float) -> None:
    ax.add_patch(Circle((x, y), 0.17, facecolor="white", edgecolor=_STREAM_COLOR, linewidth=1.4, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=12, zorder=4)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], color: str = "#555555", lw: float = 1.2):
    ax.annotate("", xy=end, xytext=start, zorder=2,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=0, mutation_scale=10))


def _branch(ax, y_split: float, y_join: float, boxes: Sequence[tuple[str, str]]) -> None:
    """A side branch: leaves the stream at ``y_split``, runs up through ``boxes``, re-enters at a ⊕."""
    ax.plot([0, _BRANCH_X], [y_split, y_split], color="#555555", lw=1.2, zorder=1)
    ax.add_patch(Circle((0, y_split), 0.05, color=_STREAM_COLOR, zorder=3))
    step = (y_join - y_split) / (len(boxes) + 1)
    previous = y_split
    for i, (text, color) in enumerate(boxes, start=1):
        y = y_split + i * step
        _arrow(ax, (_BRANCH_X, previous), (_BRANCH_X, y - _BOX_H / 2))
        _box(ax, _BRANCH_X, y, text, color)
        previous = y + _BOX_H / 2
    ax.plot([_BRANCH_X, _BRANCH_X], [previous, y_join], color="#555555", lw=1.2, zorder=1)
    _arrow(ax, (_BRANCH_X, y_join), (0.17, y_join))
    _plus(ax, 0, y_join)


def _stream(ax, y_from: float, y_to: float) -> None:
    _arrow(ax, (0, y_from), (0, y_to), color=_STREAM_COLOR, lw=2.4)


def draw_block_diagram(ax, placement: str) -> None:
    """Draw one pre-norm or post-norm block inside the LM on ``ax`` (boxes and arrows).

    The residual stream is the thick vertical line on the left. In the pre-norm drawing
    it runs straight from the embeddings to the final norm — only ⊕ joins sit on it; in
    the post-norm drawing each ⊕ is followed by a norm *on* the stream.
    """
    if placement not in ("pre", "post"):
        raise ValueError(f"placement must be 'pre' or 'post', got {placement!r}")
    norm_color = COLORS[placement]
    attn_color, ffn_color = "#dfe7f2", "#e9dcf2"
    attention, feed_forward = "causal MHSA\n+ RoPE", "SwiGLU FFN"
    _box(ax, 0, 0, "token embeddings", "#eeeeee")
    ax.add_patch(Rectangle((-1.15, 0.55), 4.35, 5.55, fill=False, linestyle="--", edgecolor="#888888", lw=1.0))
    ax.text(3.12, 0.7, "× L blocks", ha="right", va="bottom", fontsize=8.5, color="#555555")
    if placement == "pre":
        _branch(ax, 0.95, 3.05, [("ln1: RMSNorm", norm_color), (attention, attn_color)])
        _branch(ax, 3.45, 5.75, [("ln2: RMSNorm", norm_color), (feed_forward, ffn_color)])
        _stream(ax, _BOX_H / 2, 3.05 - 0.17)
        _stream(ax, 3.05 + 0.17, 5.75 - 0.17)
        _stream(ax, 5.75 + 0.17, 6.55 - _BOX_H / 2)
        _box(ax, 0, 6.55, "ln_final: RMSNorm", norm_color)
        ax.text(-1.35, 3.2, "residual stream:\nx reaches the top\nuntouched", ha="right", va="center",
                fontsize=8, color="#333333")
        title = "pre-norm: x + Attn(Norm(x)), h + FFN(Norm(h))"
    else:
        _branch(ax, 0.95, 2.45, [(attention, attn_color)])
        _box(ax, 0, 3.05, "ln1: RMSNorm", norm_color)
        _branch(ax, 3.55, 5.05, [(feed_forward, ffn_color)])
        _box(ax, 0, 5.65, "ln2: RMSNorm", norm_color)
        _stream(ax, _BOX_H / 2, 2.45 - 0.17)
        _stream(ax, 2.45 + 0.17, 3.05 - _BOX_H / 2)
        _stream(ax, 3.05 + _BOX_H / 2, 5.05 - 0.17)
        _stream(ax, 5.05 + 0.17, 5.65 - _BOX_H / 2)
        ax.plot([0, 0], [5.65 + _BOX_H / 2, 6.55], color=_STREAM_COLOR, lw=2.4, zorder=1)
        ax.text(0.2, 6.55, "no final norm: the last\nblock already ends in one", ha="left", va="center",
                fontsize=8, color="#555555")
        ax.text(-1.35, 3.2, "residual stream:\nrenormalised after\nevery sum", ha="right", va="center",
                fontsize=8, color="#333333")
        title = "post-norm: Norm(x + Attn(x)), Norm(z + FFN(z))"
    _stream(ax, 6.55 + (_BOX_H / 2 if placement == "pre" else 0), 7.35 - _BOX_H / 2)
    _box(ax, 0, 7.35, "lm_head: Linear → logits", "#eeeeee")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-2.9, 3.3)
    ax.set_ylim(-0.4, 7.75)
    ax.set_aspect("equal")
    ax.axis("off")


def prenorm_vs_postnorm_diagram() -> plt.Figure:
    """The two blocks side by side, inside the language model."""
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 6.2))
    for ax, placement in zip(axes, ("pre", "post"), strict=True):
        draw_block_diagram(ax, placement)
    return fig


# ---------------------------------------------------------------------------------------
# Xiong et al. 2020 at initialisation: Fig. 3 and Lemma 2
# ---------------------------------------------------------------------------------------


def _init_batch(corpus: Corpus, seed: int, batch_size: int, context_length: int):
    generator = torch.Generator().manual_seed(10_000 + seed)
    return get_batch(corpus.train_ids, batch_size, context_length, generator)  # (B, T) each


def ffn_grad_norms_over_seeds(
    corpus: Corpus, placement: str, num_layers: int = 6, seeds: Iterable[int] = range(8),
    batch_size: int = 8, context_length: int = 32, weight: str = "all",
) -> np.ndarray:
    """(n_seeds, num_layers): per block, the gradient norm of its FFN weights at initialisation.

    Each seed builds a fresh model (:func:`prenorm_lib.train.build_model`) and draws its own
    training batch; :func:`prenorm_lib.probes.ffn_grad_norms_by_layer` takes one backward pass.
    """
    rows = []
    for seed in seeds:
        model = build_model(corpus, seed, norm=placement, num_layers=num_layers, context_length=context_length)
        x, y = _init_batch(corpus, seed, batch_size, context_length)
        rows.append(probes.ffn_grad_norms_by_layer(model, x, y, weight=weight))
    return np.array(rows)


def residual_norms_over_seeds(
    corpus: Corpus, placement: str, num_layers: int = 6, seeds: Iterable[int] = range(8),
    batch_size: int = 8, context_length: int = 32,
) -> np.ndarray:
    """(n_seeds, num_layers + 1): mean ‖x_l‖² of the residual stream at depth l = 0 … L, at init."""
    rows = []
    for seed in seeds:
        model = build_model(corpus, seed, norm=placement, num_layers=num_layers, context_length=context_length)
        x, _ = _init_batch(corpus, seed, batch_size, context_length)
        rows.append(probes.residual_norms(model, x))
    return np.array(rows)


def plot_grad_norms_by_layer(norms: Mapping[str, np.ndarray], title: str | None = None) -> plt.Figure:
    """Mean ± one standard deviation over seeds of each block's FFN gradient norm."""
    fig, ax = plt.subplots(figsize=(5.6, 3.5))
    for placement, runs in norms.items():
        layers = np.arange(1, runs.shape[1] + 1)
        mean_band(ax, layers, runs, PLACEMENT_LABELS[placement], color=COLORS[placement])
        ax.plot(layers, runs.mean(axis=0), "o", color=COLORS[placement], markersize=4)
    n_seeds = next(iter(norms.values())).shape[0]
    ax.set_xlabel("layer (block index, input side = 1)")
    ax.set_ylabel("‖∂loss/∂W_FFN‖ at init")
    ax.set_ylim(bottom=0)
    ax.set_title(title or f"FFN gradient norm by layer at initialisation ({n_seeds} seeds)")
    ax.legend()
    return fig


def xiong_fig3_grad_norms() -> plt.Figure:
    """Xiong et al. 2020, Fig. 3, at course scale: 6 layers, d_model 64, 8 seeds."""
    corpus = make_corpus()
    norms = {p: ffn_grad_norms_over_seeds(corpus, p) for p in ("pre", "post")}
    return plot_grad_norms_by_layer(norms)


def lemma2_bounds(depths: np.ndarray, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Xiong et al.'s Lemma 2 bounds on E‖x_l‖² for pre-norm: (1 + l/2)·d and (1 + 3l/2)·d."""
    depths = np.asarray(depths, dtype=float)
    return (1 + depths / 2) * d_model, (1 + 3 * depths / 2) * d_model


def plot_residual_norms(norms: Mapping[str, np.ndarray], d_model: int) -> plt.Figure:
    """‖x_l‖² by depth, mean and min–max over seeds.

    Left: pre- and post-norm on a linear scale with Lemma 2's band for pre-norm. Right:
    every placement on a log scale, for the unnormalised stream that leaves the chart
    (depths where a seed overflowed to inf are left out).
    """
    fig, (ax_lin, ax_log) = plt.subplots(1, 2, figsize=(9.6, 3.5))
    depths = np.arange(next(iter(norms.values())).shape[1])
    low, high = lemma2_bounds(depths, d_model)
    ax_lin.fill_between(depths, low, high, color=COLORS["pre"], alpha=0.12, linewidth=0,
                        label="Lemma 2 band (1 + l/2)d … (1 + 3l/2)d")
    for ax, placements in ((ax_lin, ("pre", "post")), (ax_log, tuple(norms))):
        for placement in placements:
            if placement not in norms:
                continue
            runs = norms[placement]
            finite = np.isfinite(runs).all(axis=0)  # depths where no seed overflowed
            shown = len(depths) if finite.all() else int(np.argmin(finite))
            label = PLACEMENT_LABELS[placement] + ("" if shown == len(depths) else f" (inf beyond depth {shown - 1})")
            mean_band(ax, depths[:shown], runs[:, :shown], label, color=COLORS[placement], spread="minmax")
            ax.plot(depths[:shown], runs[:, :shown].mean(axis=0), "o", color=COLORS[placement], markersize=4)
        ax.set_xlabel("depth l (0 = embeddings)")
        ax.set_ylabel("mean ‖x_l‖²")
        ax.legend(fontsize=8)
    ax_lin.set_ylim(bottom=0)
    ax_lin.set_title(f"Pre- vs post-norm (d = {d_model})")
    ax_log.set_yscale("log")
    ax_log.set_title("All three, log scale")
    return fig


def last_layer_grad_by_depth(
    corpus: Corpus, placement: str, depths: Sequence[int], seeds: Iterable[int] = range(4),
) -> np.ndarray:
    """(n_seeds, len(depths)): the last block's FFN gradient norm at init for stacks of each depth.

    Xiong et al.'s Theorem 1 says it does not depend on the depth L for post-norm and
    shrinks like 1/√L for pre-norm.
    """
    seeds = list(seeds)
    columns = [ffn_grad_norms_over_seeds(corpus, placement, num_layers=L, seeds=seeds)[:, -1] for L in depths]
    return np.stack(columns, axis=1)


def plot_last_layer_grad_by_depth(grads: Mapping[str, np.ndarray], depths: Sequence[int]) -> plt.Figure:
    """The last block's FFN gradient norm against depth L, with a 1/√L guide through pre-norm's first point."""
    fig, ax = plt.subplots(figsize=(5.6, 3.3))
    depths_arr = np.asarray(depths, dtype=float)
    for placement, runs in grads.items():
        mean_band(ax, depths_arr, runs, PLACEMENT_LABELS[placement], color=COLORS[placement])
        ax.plot(depths_arr, runs.mean(axis=0), "o", color=COLORS[placement], markersize=4)
    if "pre" in grads:
        start = grads["pre"].mean(axis=0)[0]
        ax.plot(depths_arr, start * np.sqrt(depths_arr[0] / depths_arr), ":", color=COLORS["reference"],
                label="∝ 1/√L")
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths_arr, [str(d) for d in depths])
    ax.set_xlabel("number of layers L")
    ax.set_ylabel("last block's ‖∂loss/∂W_FFN‖")
    ax.set_ylim(bottom=0)
    ax.set_title("Theorem 1: last-layer gradient vs depth")
    ax.legend()
    return fig


# ---------------------------------------------------------------------------------------
# Training stability: learning rate × warmup × placement
# ---------------------------------------------------------------------------------------


def stability_grid(
    corpus: Corpus, config: TrainConfig, placements: Sequence[str], lrs: Sequence[float],
    warmups: Sequence[int], seeds: Sequence[int] = (0,), num_layers: int = 6,
    done: Mapping[tuple[str, int, float, int], History] | None = None,
) -> dict[tuple[str, int, float, int], History]:
    """Train one small model per (placement, warmup, lr, seed); key → its History.

    ``done`` holds runs already made (same keys), which are reused instead of retrained.
    """
    results = dict(done or {})
    for placement in placements:
        for warmup in warmups:
            for lr in lrs:
                for seed in seeds:
                    key = (placement, warmup, lr, seed)
                    if key not in results:
                        run_config = replace(config, lr=lr, warmup_steps=warmup, seed=seed)
                        model = build_model(corpus, seed, norm=placement, num_layers=num_layers,
                                            context_length=config.context_length)
                        results[key] = train(model, corpus, run_config, progress=False)
    return results


def plot_stability_grid(
    losses: Mapping[tuple[str, int, float], float], labels: Mapping[tuple[str, int, float], str],
    placements: Sequence[str], warmups: Sequence[int], lrs: Sequence[float], reference: float | None = None,
) -> plt.Figure:
    """Heatmap: rows = placement × warmup, columns = learning rate; NaN cells (diverged) are hatched.

    ``losses`` gives the colour (final validation loss), ``labels`` the text in each cell.
    ``reference`` (e.g. the unigram loss) marks where the colour scale tops out.
    """
    rows = [(p, w) for p in placements for w in warmups]
    grid = np.array([[losses[(p, w, lr)] for lr in lrs] for p, w in rows], dtype=float)
    finite = grid[np.isfinite(grid)]
    vmax = reference if reference is not None else (finite.max() if finite.size else 1.0)
    vmin = finite.min() if finite.size else 0.0
    fig, ax = plt.subplots(figsize=(1.5 + 1.45 * len(lrs), 0.9 + 0.48 * len(rows)))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", vmin=vmin, vmax=vmax, aspect="auto")
    for i, (p, w) in enumerate(rows):
        for j, lr in enumerate(lrs):
            value = grid[i, j]
            if not math.isfinite(value):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd", hatch="///",
                                       edgecolor="#999999", linewidth=0))
            dark = math.isfinite(value) and (value - vmin) > 0.5 * (vmax - vmin)  # viridis_r: high = dark
            ax.text(j, i, labels[(p, w, lr)], ha="center", va="center", fontsize=8.5,
                    color="white" if dark else "#111111")
    ax.set_xticks(range(len(lrs)), [f"lr {lr:g}" for lr in lrs])
    ax.set_yticks(range(len(rows)), [f"{PLACEMENT_LABELS[p]}, warmup {w}" for p, w in rows])
    ax.grid(False)
    for i in range(len(warmups), len(rows), len(warmups)):
        ax.axhline(i - 0.5, color="white", lw=3)
    colorbar = fig.colorbar(image, ax=ax, shrink=0.85)
    colorbar.set_label("final validation loss")
    ax.set_title("Does it train? learning rate × warmup × norm placement")
    return fig


def plot_loss_curves(histories: Mapping[str, History], reference: float | None = None) -> plt.Figure:
    """Training loss per step (line) and validation loss where it was measured (markers)."""
    fig, ax = plt.subplots(figsize=(5.6, 3.3))
    for i, (name, history) in enumerate(histories.items()):
        color = f"C{i}"
        steps = np.arange(1, len(history.train_loss) + 1)
        ax.plot(steps, history.train_loss, color=color, lw=1.2, label=name)
        ax.plot(history.val_steps, history.val_loss, "o", color=color, markersize=5, markeredgecolor="white")
    if reference is not None:
        ax.axhline(reference, color=COLORS["reference"], ls=":", lw=1.2, label="unigram loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend(fontsize=8, title="line: training batch, dots: validation", title_fontsize=8)
    return fig


FIGURES = {
    "prenorm_vs_postnorm_diagram": prenorm_vs_postnorm_diagram,
    "xiong_fig3_grad_norms": xiong_fig3_grad_norms,
}
