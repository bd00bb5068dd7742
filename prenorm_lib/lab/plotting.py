"""The course's house style for figures, and the helpers every notebook draws with.

One palette for the whole course: a variant keeps its colour from notebook to notebook
(pre-norm is always the same blue, ReLU always the same grey), so a learner recognises
it before reading the legend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np

# Where `make figures` writes: figures/ of the folder it runs in (make runs from the course root;
# an installed library has no course root of its own). save_figure(directory=…) writes elsewhere.
FIGURES_DIR = Path("figures")

COLORS = {
    # normalisation placement
    "pre": "#1f5fa8",
    "post": "#d2552d",
    "none": "#7a7a7a",
    # feed-forward variants
    "relu": "#7a7a7a",
    "silu": "#2a9d8f",
    "gelu": "#b08a2e",
    "swiglu": "#7b3fa0",
    "geglu": "#b08a2e",  # GELU's colour: the gate is GELU
    "reglu": "#1f5fa8",
    "bilinear": "#c2407a",
    # generic roles
    "input": "#9aa5b1",
    "output": "#1f5fa8",
    "reference": "#222222",
    "layernorm": "#d2552d",
    "rmsnorm": "#1f5fa8",
}

HOUSE_STYLE = {
    # Sized for a projector: at 100 dpi a 6.4-inch figure is 640 px wide, and no text is
    # smaller than 10 pt (≈ 10.4 pt on screen); layout_problems() checks every figure.
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "image.cmap": "viridis",
    "svg.hashsalt": "prenorm",
    "axes.prop_cycle": mpl.cycler(color=["#1f5fa8", "#d2552d", "#2a9d8f", "#7b3fa0", "#b08a2e", "#7a7a7a"]),
}


def use_house_style() -> None:
    """Apply the course style to matplotlib (called by :func:`prenorm_lib.setup`)."""
    mpl.rcParams.update(HOUSE_STYLE)


def mean_band(ax, x, runs, label: str, color: str | None = None, spread: str = "std"):
    """Plot the mean of several runs as a line and their spread as a shaded band.

    ``runs`` is (n_runs, len(x)); ``spread`` is "std" (mean ± one standard deviation) or
    "minmax" (the whole range). With one run there is no band: one seed is an anecdote.
    """
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != len(x):
        raise ValueError(f"runs must be (n_runs, {len(x)}), got shape {runs.shape}")
    mean = np.nanmean(runs, axis=0)
    (line,) = ax.plot(x, mean, label=label, color=color)
    if runs.shape[0] > 1:
        if spread == "std":
            sd = np.nanstd(runs, axis=0, ddof=1)
            low, high = mean - sd, mean + sd
        elif spread == "minmax":
            low, high = np.nanmin(runs, axis=0), np.nanmax(runs, axis=0)
        else:
            raise ValueError(f"spread must be 'std' or 'minmax', got {spread!r}")
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def save_figure(fig, name: str, directory: Path | str | None = None) -> Path:
    """Write ``fig`` as ``figures/<name>.png`` (PNG: an SVG embeds a date and flaps)."""
    if not name or "/" in name or name.endswith(".png"):
        raise ValueError(f"name must be a bare file stem like 'rmsnorm_scale', got {name!r}")
    out_dir = Path(directory) if directory is not None else FIGURES_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.png"
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


# What a figure must satisfy to be read from the back of a room (checked by layout_problems).
MIN_DISPLAYED_PT = 9.0  # no text smaller than this at the size the figure is shown
CSS_DPI = 96  # a browser shows one PNG pixel per CSS pixel, 96 of them to the inch
MAX_DISPLAY_PX = 1100  # wider PNGs are scaled down to the notebook's column (JupyterLab, Voilà, site)


def _drawn_tick_labels(axis) -> list:
    """Tick labels the axis really draws: ticks outside the view keep (invisible) labels too."""
    try:
        ticks = axis._update_ticks()  # what Axis.draw uses; private, but stable since matplotlib 3.1
    except AttributeError:  # pragma: no cover - a future matplotlib
        ticks = axis.get_major_ticks() + axis.get_minor_ticks()
    return [label for tick in ticks for label in (tick.label1, tick.label2) if label.get_visible()]


def _visible_texts(fig) -> list:
    """Every text the figure draws: titles, labels, legends, annotations and drawn tick labels."""
    from matplotlib.axis import Tick
    from matplotlib.text import Text

    tick_labels = {id(label) for tick in fig.findobj(Tick) for label in (tick.label1, tick.label2)}
    texts = [text for text in fig.findobj(Text) if id(text) not in tick_labels]
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:
            texts += _drawn_tick_labels(ax.xaxis) + _drawn_tick_labels(ax.yaxis)
    return [
        text for text in texts
        if text.get_visible() and text.get_text().strip() and (text.axes is None or text.axes.get_visible())
    ]


def displayed_points(fig, fontsize: float) -> float:
    """The size in points that text of ``fontsize`` has on screen, where the figure is shown.

    Notebooks show the PNG drawn at ``fig.dpi`` one pixel per CSS pixel (96 to the inch),
    scaled down if it is wider than the column.
    """
    width_px = fig.get_figwidth() * fig.dpi
    return fontsize * fig.dpi / CSS_DPI * min(1.0, MAX_DISPLAY_PX / width_px)


def layout_problems(fig, min_pt: float = MIN_DISPLAYED_PT, tolerance_px: float = 1.0) -> list[str]:
    """What keeps ``fig`` from being read on a projector; an empty list if nothing.

    Checks, after a real draw: text under ``min_pt`` at its displayed size; two text boxes
    that overlap (tick labels, legend entries, annotations, titles); text reaching outside
    the figure; a data marker whose centre lies outside its axes (drawn over the frame or
    clipped away). Each problem names the text or the axes, so a test failure says what to move.
    """
    from matplotlib.lines import Line2D

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    texts = _visible_texts(fig)
    boxes = [(text, text.get_window_extent(renderer)) for text in texts]
    for text, _ in boxes:
        shown = displayed_points(fig, text.get_fontsize())
        if shown < min_pt - 1e-6:
            problems.append(f"text {text.get_text()!r} is {shown:.1f} pt on screen (under {min_pt:g} pt)")
    figure_box = fig.bbox
    for text, box in boxes:
        if (box.x0 < figure_box.x0 - tolerance_px or box.y0 < figure_box.y0 - tolerance_px
                or box.x1 > figure_box.x1 + tolerance_px or box.y1 > figure_box.y1 + tolerance_px):
            problems.append(f"text {text.get_text()!r} reaches outside the figure")
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            overlap_w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            overlap_h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if overlap_w > tolerance_px and overlap_h > tolerance_px:
                problems.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        frame = ax.get_window_extent(renderer)
        for line in ax.get_lines():
            if not line.get_visible() or line.get_marker() in (None, "None", "", " ") or not isinstance(line, Line2D):
                continue
            points = line.get_transform().transform(line.get_xydata())
            outside = ((points[:, 0] < frame.x0 - tolerance_px) | (points[:, 0] > frame.x1 + tolerance_px)
                       | (points[:, 1] < frame.y0 - tolerance_px) | (points[:, 1] > frame.y1 + tolerance_px))
            if outside.any():
                label = line.get_label() if not line.get_label().startswith("_") else "a line"
                problems.append(f"{int(outside.sum())} marker(s) of {label!r} lie outside the axes "
                                f"{ax.get_title()!r}")
    return problems
