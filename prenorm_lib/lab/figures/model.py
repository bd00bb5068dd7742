"""Plots of notebook 06 (your Transformer): where a forward pass spends its FLOPs.

The counts are the learner's own (exercise 6.8), or torch's ``FlopCounterMode`` through
:mod:`prenorm_lib.lab.accounting`; the figure only draws them. Every part keeps one colour, one
line style and one marker in both panels.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt

from prenorm_lib.lab.plotting import OKABE_ITO

# one colour, one dash and one marker per part of a forward pass (exercise 6.8's keys)
PART_STYLES = {
    "projections": (OKABE_ITO["blue"], "-", "o"),
    "attention": (OKABE_ITO["vermillion"], "--", "s"),
    "feed-forward": (OKABE_ITO["bluish_green"], "-.", "^"),
    "lm_head": (OKABE_ITO["black"], ":", "D"),
}


def _panel(ax, rows: Mapping[str, Mapping[str, float]], xlabel: str) -> None:
    names = list(rows)
    parts = list(next(iter(rows.values())))
    for part in parts:
        total = [sum(rows[name].values()) for name in names]
        share = [100 * rows[name][part] / t for name, t in zip(names, total, strict=True)]
        color, dash, marker = PART_STYLES.get(part, ("#444444", "-", "x"))
        ax.plot(range(len(names)), share, color=color, linestyle=dash, marker=marker, label=part)
    ax.set_xticks(range(len(names)), names)
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 100)


def plot_flop_shares(by_size: Mapping[str, Mapping[str, float]],
                     by_context: Mapping[str, Mapping[str, float]]) -> plt.Figure:
    """Each part's share of a forward pass's FLOPs as the model grows (left) and as the context grows (right).

    GPT-2 small to XL is deeper as well as wider (12 to 48 layers, width 768 to 1,600).

    ``by_size`` maps a model's name (GPT-2 small … XL) and ``by_context`` a context length to the
    FLOPs of each part, as exercise 6.8's ``forward_flops`` returns them.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.8), sharey=True)
    _panel(left, {name.removeprefix("GPT-2 "): flops for name, flops in by_size.items()}, "GPT-2 size (context 1,024)")
    _panel(right, by_context, "context length (GPT-2 XL)")
    left.set_ylabel("share of the forward FLOPs (%)")
    left.set_title("larger models")
    right.set_title("longer contexts")
    right.legend(loc="upper left", fontsize=9)
    fig.suptitle("Where one forward pass spends its FLOPs")
    return fig
