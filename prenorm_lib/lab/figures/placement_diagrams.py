"""The two block diagrams of notebook 05: pre-norm's residual stream beside post-norm's."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from prenorm_lib.lab.plotting import COLORS

_STREAM_COLOR = "#222222"
_BOX_W, _BOX_H = 2.3, 0.5
_BRANCH_X = 2.75
_GAP = 0.06  # arrows stop this short of the box they point at, so no head touches a label
_TEXT_PT = 10.5


def _box(ax, x: float, y: float, text: str, color: str, width: float = _BOX_W) -> None:
    ax.add_patch(FancyBboxPatch(
        (x - width / 2, y - _BOX_H / 2), width, _BOX_H, boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=color, edgecolor="#333333", linewidth=1.0, zorder=3,
    ))
    ax.text(x, y, text, ha="center", va="center", fontsize=_TEXT_PT, zorder=4,
            color="white" if color in (COLORS["pre"], COLORS["post"]) else "#111111")


def _plus(ax, x: float, y: float) -> None:
    ax.add_patch(Circle((x, y), 0.19, facecolor="white", edgecolor=_STREAM_COLOR, linewidth=1.4, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=13, zorder=4)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], color: str = "#555555", lw: float = 1.2):
    ax.annotate("", xy=end, xytext=start, zorder=2,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=0, mutation_scale=12))


def _branch(ax, y_split: float, y_join: float, boxes: Sequence[tuple[str, str]]) -> None:
    """A side branch: leaves the stream at ``y_split``, runs up through ``boxes``, re-enters at a ⊕."""
    ax.plot([0, _BRANCH_X], [y_split, y_split], color="#555555", lw=1.2, zorder=1)
    ax.add_patch(Circle((0, y_split), 0.06, color=_STREAM_COLOR, zorder=3))
    step = (y_join - y_split) / (len(boxes) + 1)
    previous = y_split
    for i, (text, color) in enumerate(boxes, start=1):
        y = y_split + i * step
        _arrow(ax, (_BRANCH_X, previous), (_BRANCH_X, y - _BOX_H / 2 - _GAP))
        _box(ax, _BRANCH_X, y, text, color)
        previous = y + _BOX_H / 2
    ax.plot([_BRANCH_X, _BRANCH_X], [previous, y_join], color="#555555", lw=1.2, zorder=1)
    _arrow(ax, (_BRANCH_X, y_join), (0.19 + _GAP, y_join))
    _plus(ax, 0, y_join)


def _stream(ax, y_from: float, y_to: float) -> None:
    """A stretch of the residual stream, its head stopping short of what it enters."""
    _arrow(ax, (0, y_from), (0, y_to - _GAP), color=_STREAM_COLOR, lw=2.4)


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
    ax.add_patch(Rectangle((-1.4, 0.55), 5.6, 5.6, fill=False, linestyle="--", edgecolor="#888888", lw=1.0))
    ax.text(4.1, 0.68, "× L blocks", ha="right", va="bottom", fontsize=_TEXT_PT, color="#555555")
    if placement == "pre":
        _branch(ax, 0.95, 3.05, [("ln1: RMSNorm", norm_color), (attention, attn_color)])
        _branch(ax, 3.45, 5.8, [("ln2: RMSNorm", norm_color), (feed_forward, ffn_color)])
        _stream(ax, _BOX_H / 2, 3.05 - 0.19)
        _stream(ax, 3.05 + 0.19, 5.8 - 0.19)
        _stream(ax, 5.8 + 0.19, 6.65 - _BOX_H / 2)
        _box(ax, 0, 6.65, "ln_final: RMSNorm", norm_color)
        ax.text(-1.6, 3.2, "residual stream:\nx reaches the\ntop untouched", ha="right", va="center",
                fontsize=_TEXT_PT, color="#333333")
        title = "pre-norm: x + Attn(Norm(x)), h + FFN(Norm(h))"
    else:
        _branch(ax, 0.95, 2.45, [(attention, attn_color)])
        _box(ax, 0, 3.05, "ln1: RMSNorm", norm_color)
        _branch(ax, 3.6, 5.1, [(feed_forward, ffn_color)])
        _box(ax, 0, 5.7, "ln2: RMSNorm", norm_color)
        _stream(ax, _BOX_H / 2, 2.45 - 0.19)
        _stream(ax, 2.45 + 0.19, 3.05 - _BOX_H / 2)
        _stream(ax, 3.05 + _BOX_H / 2, 5.1 - 0.19)
        _stream(ax, 5.1 + 0.19, 5.7 - _BOX_H / 2)
        ax.plot([0, 0], [5.7 + _BOX_H / 2, 6.65], color=_STREAM_COLOR, lw=2.4, zorder=1)
        ax.text(0.25, 6.7, "no final norm: the last\nblock already ends in one", ha="left", va="center",
                fontsize=_TEXT_PT, color="#555555")
        ax.text(-1.6, 3.2, "residual stream:\nrenormalised\nafter every sum", ha="right", va="center",
                fontsize=_TEXT_PT, color="#333333")
        title = "post-norm: Norm(x + Attn(x)), Norm(z + FFN(z))"
    _stream(ax, 6.65 + (_BOX_H / 2 if placement == "pre" else 0), 7.55 - _BOX_H / 2)
    _box(ax, 0, 7.55, "lm_head → logits", "#eeeeee")
    ax.set_title(title, fontsize=12)
    ax.set_xlim(-3.7, 4.3)
    ax.set_ylim(-0.4, 7.95)
    ax.set_aspect("equal")
    ax.axis("off")


def prenorm_vs_postnorm_diagram() -> plt.Figure:
    """The two blocks side by side, inside the language model."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.6))
    for ax, placement in zip(axes, ("pre", "post"), strict=True):
        draw_block_diagram(ax, placement)
    return fig




