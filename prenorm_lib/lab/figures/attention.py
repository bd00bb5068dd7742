"""Figures of notebook 04 (causal attention): saturation without 1/√d_k, the mask, trained heads, sinks.

The measurements the pictures show (:func:`saturation`: the spread of q·k, the attention
entropy and the softmax's gradient against d_k) are plain functions here, so the notebook
prints the very numbers the pictures are drawn from. The two sliders are
:class:`~prenorm_lib.lab.sliders.LiveFigure` objects: every frame they can show is computed
when they are built, and a move only sets bar heights, image data and text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from ipywidgets import IntSlider, Layout, SelectionSlider
from matplotlib.patches import Rectangle

from prenorm_lib import functional
from prenorm_lib.lab.plotting import COLORS, OKABE_ITO, mean_band
from prenorm_lib.lab.sliders import LiveFigure

SCALE_STYLES = {  # colour and a second cue (line style, marker) for greyscale readers
    "scaled": {"color": COLORS["pre"], "linestyle": "-", "marker": "o", "label": "softmax(q·k / √d_k)"},
    "unscaled": {"color": COLORS["post"], "linestyle": "--", "marker": "s", "label": "softmax(q·k), no scale"},
}
SINK_STYLES = {  # notebook 04 §8: the plain model and its two options, colour plus line style and marker
    "plain": {"color": COLORS["pre"], "linestyle": "-", "marker": "o", "label": "plain"},
    "gate": {"color": OKABE_ITO["bluish_green"], "linestyle": "--", "marker": "s", "label": "headwise gate"},
    "sink": {"color": OKABE_ITO["vermillion"], "linestyle": ":", "marker": "^", "label": "sink logit"},
}
D_KS = (1, 4, 16, 64, 256, 1024)
_SLIDER_LAYOUT = Layout(width="420px")
_SLIDER_STYLE = {"description_width": "110px"}


def _scores(d_k: int, n_rows: int, n_keys: int, seed: int) -> torch.Tensor:
    """q·k for ``n_rows`` queries against ``n_keys`` keys each, unit-variance components: (n_rows, n_keys)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_rows, 1, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_rows, n_keys, d_k, generator=gen, dtype=torch.float64)
    return (q * k).sum(-1)


def softmax_jacobian_norm(p: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of ∂softmax/∂scores = diag(p) − p pᵀ, for each row of ``p`` (..., n)."""
    jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return jacobian.flatten(-2).norm(dim=-1)


def entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of ``p`` (..., n); log(n) for a uniform row, 0 for a one-hot one."""
    return torch.special.entr(p).sum(-1)  # −p·log p, with 0·log 0 = 0


def saturation(d_ks: Sequence[int] = D_KS, n_keys: int = 16, n_rows: int = 2000, seed: int = 0) -> dict:
    """Spread of q·k, attention entropy and softmax gradient norm against d_k, with and without the scale.

    Queries and keys have independent N(0, 1) components, as in Vaswani et al.'s footnote.
    Returns lists aligned with ``d_ks``: ``"score_std"`` (the measured standard deviation of
    q·k) and, for ``"scaled"`` and ``"unscaled"``, the mean ``"entropy"`` and the mean
    ``"gradient"`` (Frobenius norm of the softmax's Jacobian) over the rows.
    """
    out: dict = {"d_k": list(d_ks), "n_keys": n_keys, "score_std": [],
                 "scaled": {"entropy": [], "gradient": []}, "unscaled": {"entropy": [], "gradient": []}}
    for d_k in d_ks:
        scores = _scores(d_k, n_rows, n_keys, seed)
        out["score_std"].append(float(scores.std()))
        for variant, divisor in (("scaled", math.sqrt(d_k)), ("unscaled", 1.0)):
            p = torch.softmax(scores / divisor, dim=-1)
            out[variant]["entropy"].append(float(entropy(p).mean()))
            out[variant]["gradient"].append(float(softmax_jacobian_norm(p).mean()))
    return out


def draw_saturation(result: Mapping):
    """Entropy and gradient norm of the softmax against d_k, with and without 1/√d_k."""
    fig, (ent_ax, grad_ax) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    d_ks = result["d_k"]
    for variant, style in SCALE_STYLES.items():
        ent_ax.plot(d_ks, result[variant]["entropy"], **style)
        grad_ax.plot(d_ks, result[variant]["gradient"], **style)
    ent_ax.axhline(math.log(result["n_keys"]), color=COLORS["reference"], linestyle=":", linewidth=1.0)
    ent_ax.text(d_ks[0], math.log(result["n_keys"]) - 0.08, f"uniform over {result['n_keys']} keys", va="top")
    for ax in (ent_ax, grad_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k (components of q and k)")
    ent_ax.set_ylabel("attention entropy (nats)")
    ent_ax.set_ylim(0, math.log(result["n_keys"]) * 1.1)
    grad_ax.set_ylabel("‖∂softmax / ∂scores‖ (mean)")
    grad_ax.set_ylim(0, None)
    grad_ax.legend(loc="lower left")
    ent_ax.set_title("Without the scale the softmax sharpens…")
    grad_ax.set_title("…and its gradient vanishes")
    return fig


def sharpness_slider(d_k: int = 64, d_ks: Sequence[int] = D_KS, n_keys: int = 12, seed: int = 1) -> LiveFigure:
    """One query's attention over ``n_keys`` keys, with and without 1/√d_k, for d_k from a slider.

    Every frame is computed in advance: a move sets 2 × ``n_keys`` bar heights and a title.
    """
    rows = {}
    for size in d_ks:
        scores = _scores(size, 1, n_keys, seed + size)[0]  # (n_keys,)
        rows[size] = {variant: torch.softmax(scores / divisor, dim=-1).numpy()
                      for variant, divisor in (("scaled", math.sqrt(size)), ("unscaled", 1.0))}
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    keys = np.arange(n_keys)
    width = 0.4
    bars = {}
    for offset, (variant, style) in zip((-width / 2, width / 2), SCALE_STYLES.items(), strict=True):
        bars[variant] = ax.bar(keys + offset, np.zeros(n_keys), width, color=style["color"], label=style["label"],
                               edgecolor=COLORS["reference"] if variant == "unscaled" else "none", linewidth=0.8,
                               hatch="//" if variant == "unscaled" else None)
    ax.set_ylim(0, 1.05)
    ax.set_axisbelow(True)  # grid under the bars: a move then redraws bars, not tick labels
    ax.set_xticks(keys)
    ax.set_xlabel("key")
    ax.set_ylabel("attention weight")
    ax.legend(loc="upper right")
    title = ax.set_title(" ")

    def update(d_k: int) -> None:
        for variant, group in bars.items():
            for bar, height in zip(group, rows[d_k][variant], strict=True):
                bar.set_height(float(height))
        h = {v: float(entropy(torch.from_numpy(rows[d_k][v]))) for v in rows[d_k]}
        title.set_text(f"d_k = {d_k}: entropy {h['scaled']:.2f} with the scale, {h['unscaled']:.2f} without")

    slider = SelectionSlider(options=list(d_ks), value=d_k, description="d_k", continuous_update=True,
                             layout=_SLIDER_LAYOUT, style=_SLIDER_STYLE)
    return LiveFigure(fig, update, {"d_k": slider},
                      f"One query's attention over {n_keys} keys, with and without 1/√d_k (slider: d_k)")


def draw_mask(seq_len: int = 6):
    """The causal mask as a boolean matrix: True (may attend) on and below the diagonal."""
    mask = functional.causal_mask(seq_len).numpy()
    fig, ax = plt.subplots(figsize=(4.2, 3.9))
    ax.imshow(mask, cmap="Greys", vmin=-0.3, vmax=1.3)
    for i in range(seq_len):
        for j in range(seq_len):
            ax.text(j, i, "True" if mask[i, j] else "False", ha="center", va="center", fontsize=9,
                    color="white" if mask[i, j] else COLORS["reference"])
    ax.set_xticks(range(seq_len))
    ax.set_yticks(range(seq_len))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.grid(False)
    ax.set_title("causal_mask(6): i may attend to j ≤ i")
    return fig


def attention_map_slider(maps: np.ndarray, tokens: Sequence[str], query: int, key: int,
                         layer: int = 0, head: int = 0) -> LiveFigure:
    """Attention weights (num_layers, num_heads, T, T) of one sentence, a layer and a head from sliders.

    The dashed box marks the weight of ``query`` (a row) on ``key`` (a column): for the
    notebook, the word before the main verb looking at the subject noun.
    """
    maps = np.asarray(maps, dtype=float)
    n_layers, n_heads, T, _ = maps.shape
    fig, ax = plt.subplots(figsize=(6.0, 5.2))
    image = ax.imshow(maps[layer, head], cmap="viridis", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    ax.set_xticks(range(T), tokens, rotation=90)
    ax.set_yticks(range(T), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.grid(False)
    ax.add_patch(Rectangle((key - 0.5, query - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=2.0,
                           linestyle="--"))
    title = ax.set_title(" ")

    def update(layer: int, head: int) -> None:
        image.set_data(maps[layer, head])
        title.set_text(f"layer {layer}, head {head}: '{tokens[query]}' → '{tokens[key]}' "
                       f"weight {maps[layer, head, query, key]:.2f}")

    controls = {
        "layer": IntSlider(value=layer, min=0, max=n_layers - 1, description="layer", layout=_SLIDER_LAYOUT,
                           style=_SLIDER_STYLE),
        "head": IntSlider(value=head, min=0, max=n_heads - 1, description="head", layout=_SLIDER_LAYOUT,
                          style=_SLIDER_STYLE),
    }
    return LiveFigure(fig, update, controls,
                      f"Attention weights of a trained model on one sentence of {T} tokens (sliders: layer, head)")


def draw_paired(values: Mapping[str, Sequence[float]], ylabel: str, ax=None, title: str | None = None):
    """One line per seed from the scaled to the unscaled model: the paired comparison, seed by seed."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 3.8))
    a, b = np.asarray(values["scaled"]), np.asarray(values["unscaled"])
    for left, right in zip(a, b, strict=True):
        ax.plot([0, 1], [left, right], color=COLORS["input"], linewidth=1.0, zorder=1)
    for x, variant, data in ((0, "scaled", a), (1, "unscaled", b)):
        style = SCALE_STYLES[variant]
        ax.scatter(np.full(len(data), x), data, color=style["color"], marker=style["marker"], zorder=2, s=30)
    ax.set_xticks([0, 1], ["with 1/√d_k", "without"])
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def draw_reproduction(losses: Mapping[str, Sequence[float]], attractor: Mapping[str, Sequence[float]],
                      steps: int):
    """Final validation loss and agreement across an attractor, each seed a line between the two variants."""
    fig, (loss_ax, probe_ax) = plt.subplots(1, 2, figsize=(9.6, 4.0))
    draw_paired(losses, "validation loss", loss_ax, "Loss after training")
    draw_paired(attractor, "agreement across an attractor", probe_ax, "Subject–verb agreement")
    probe_ax.axhline(0.5, color=COLORS["reference"], linestyle=":", linewidth=1.0)
    probe_ax.text(1.35, 0.5, "chance", ha="right", va="bottom")
    fig.suptitle(f"Same seeds, same batches, {steps} updates: one line per seed", fontweight="bold")
    return fig


def draw_sink_runs(steps: Sequence[int], curves: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
                   uniform: float, epsilon: float):
    """Over training, for each variant (mean over seeds, ±1 std band): the first token's importance
    against the even share and Gu et al.'s threshold (left), and the residual stream's largest
    value over its median (right).

    ``curves[quantity][variant]`` is (n_seeds, len(steps)), for quantity "first_importance" and
    "activation_ratio".
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.4, 4.0))
    for ax, quantity in ((left, "first_importance"), (right, "activation_ratio")):
        for variant, runs in curves[quantity].items():
            style = SINK_STYLES[variant]
            line = mean_band(ax, steps, runs, label=style["label"], color=style["color"])
            line.set(linestyle=style["linestyle"], marker=style["marker"], markersize=5)
    left.axhline(uniform, color=COLORS["reference"], linestyle=":", linewidth=1.0)
    left.text(steps[-1], uniform, "even share ", ha="right", va="bottom")
    left.axhline(epsilon, color=COLORS["reference"], linestyle="--", linewidth=1.0)
    left.text(steps[-1], epsilon, "sink: ε = 0.3 ", ha="right", va="bottom")
    left.set_ylim(0, max(epsilon * 1.15, left.get_ylim()[1]))
    left.set(xlabel="update", ylabel="first token's importance α₁", title="Attention on the first token")
    right.set(xlabel="update", ylabel="largest |value| ÷ median", title="Residual stream: largest value")
    left.legend(loc="upper left", bbox_to_anchor=(0.0, 0.9))
    return fig


def plot_attention_sinks(record) -> plt.Figure:
    """The ``attention_sinks`` record's longer runs: :func:`draw_sink_runs` over its seeds."""
    from prenorm_lib.lab.experiments import attention_sinks

    runs = [result for _, result in record.by_seed()]
    variants = record.config["variants"]
    curves = {quantity: {v: np.array([run[f"{v}_long"][quantity] for run in runs]) for v in variants}
              for quantity in ("first_importance", "activation_ratio")}
    return draw_sink_runs(runs[0][f"{variants[0]}_long"]["val_steps"], curves,
                          attention_sinks.uniform_importance(32), record.config["epsilon"])


FIGURES = {"attention_saturation": lambda: draw_saturation(saturation())}


def _example_maps() -> LiveFigure:
    """The map slider on made-up weights (the notebook's come from a trained model)."""
    gen = torch.Generator().manual_seed(0)
    tokens = ["<eos>", "the", "wolves", "near", "a", "tiny", "child", "are", "happy"]
    T = len(tokens)
    logits = torch.randn(2, 2, T, T, generator=gen).masked_fill(~functional.causal_mask(T), float("-inf"))
    return attention_map_slider(torch.softmax(logits, -1).numpy(), tokens, query=T - 3, key=2)


EXAMPLES = {
    "sharpness_slider": sharpness_slider,
    "mask": draw_mask,
    "attention_maps": _example_maps,
    "sink_runs": lambda: draw_sink_runs(  # made-up numbers: the notebook plots the record
        [0, 500, 1000, 1500],
        {"first_importance": {"plain": [[0.13, 0.09, 0.09, 0.08], [0.13, 0.1, 0.09, 0.09]],
                              "gate": [[0.13, 0.1, 0.1, 0.1], [0.13, 0.1, 0.09, 0.1]],
                              "sink": [[0.1, 0.07, 0.07, 0.07], [0.1, 0.08, 0.07, 0.06]]},
         "activation_ratio": {"plain": [[6, 30, 40, 45], [6, 28, 38, 50]], "gate": [[5, 20, 25, 30], [5, 22, 27, 29]],
                              "sink": [[6, 25, 35, 41], [6, 27, 30, 44]]}},
        uniform=0.127, epsilon=0.3),
    "reproduction": lambda: draw_reproduction({"scaled": [2.24, 2.25, 2.23], "unscaled": [2.29, 2.27, 2.3]},
                                              {"scaled": [0.88, 0.8, 0.9], "unscaled": [0.33, 0.5, 0.41]}, 300),
}

SLIDERS = {"attention_sharpness": sharpness_slider, "attention_maps": _example_maps}
