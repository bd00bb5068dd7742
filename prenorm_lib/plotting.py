"""The course's house style for figures, and the helpers every notebook draws with.

One palette for the whole course: a variant keeps its colour from notebook to notebook
(pre-norm is always the same blue, ReLU always the same grey), so a learner recognises
it before reading the legend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np

FIGURES_DIR = Path(__file__).resolve().parent.parent / "figures"

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
    # generic roles
    "input": "#9aa5b1",
    "output": "#1f5fa8",
    "reference": "#222222",
    "layernorm": "#d2552d",
    "rmsnorm": "#1f5fa8",
}

HOUSE_STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 90,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
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
