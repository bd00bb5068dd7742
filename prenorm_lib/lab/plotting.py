"""The course's house style for figures, and the helpers every notebook draws with.

One palette for the whole course: a variant keeps its colour from notebook to notebook
(pre-norm is always the same blue, ReLU always the same grey), so a learner recognises
it before reading the legend. The palette is Okabe and Ito's, made for colour-vision
deficiency, and every line also gets a dash pattern (:data:`DASHES`), so lines stay apart
in greyscale too; :func:`indistinguishable_lines` checks a figure for it.
"""

from __future__ import annotations

import io
import re
from base64 import b64encode
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from prenorm_lib.lab.png import png_bytes

# Where `make figures` writes: figures/ of the folder it runs in (make runs from the course root;
# an installed library has no course root of its own). save_figure(directory=…) writes elsewhere.
FIGURES_DIR = Path("figures")

# Okabe & Ito's palette ("Color Universal Design", 2008): its colours stay apart for the
# common colour-vision deficiencies. Yellow (#F0E442) is left out: too light on white.
OKABE_ITO = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish_green": "#009E73",
    "reddish_purple": "#CC79A7",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "black": "#000000",
    "grey": "#8C8C8C",
}

COLORS = {
    # normalisation placement
    "pre": OKABE_ITO["blue"],
    "post": OKABE_ITO["vermillion"],
    "none": OKABE_ITO["grey"],
    # feed-forward variants
    "relu": OKABE_ITO["black"],
    "silu": OKABE_ITO["bluish_green"],
    "gelu": OKABE_ITO["orange"],
    "swiglu": "#882255",  # Tol's wine: darker than Okabe-Ito's purple, apart from SiLU in greyscale too
    "geglu": OKABE_ITO["orange"],  # GELU's colour: the gate is GELU
    "reglu": OKABE_ITO["blue"],
    "bilinear": OKABE_ITO["grey"],
    # generic roles
    "input": "#A5A5A5",
    "output": OKABE_ITO["blue"],
    "reference": "#222222",
    "layernorm": OKABE_ITO["vermillion"],
    "rmsnorm": OKABE_ITO["blue"],
    # point-wise replacements of the norm (notebook 01's deep dive)
    "dyt": OKABE_ITO["bluish_green"],
    "derf": OKABE_ITO["reddish_purple"],
}

# The second cue: colour is never the only thing that tells two lines apart. Lines drawn one
# after another in an axes take the next colour *and* the next dash pattern (the cycle below
# gives both, also to a line whose colour is set by hand); a variant named in the course keeps
# its own pattern where a figure asks for it (``linestyle=LINESTYLES[name]``).
DASHES = ["-", "--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (8, 3)), (0, (1, 3)), (0, (3, 2, 3, 5))]
LINESTYLES = {
    "pre": "-", "post": "--", "none": ":",
    "relu": ":", "silu": "-.", "gelu": (0, (8, 3)), "swiglu": "-", "geglu": (0, (6, 2, 1, 2, 1, 2)),
    "reglu": "--", "bilinear": (0, (1, 3)),
    "layernorm": "--", "rmsnorm": "-", "reference": ":", "dyt": "--", "derf": "-.",
}
CYCLE_COLORS = [OKABE_ITO[name] for name in
                ("blue", "vermillion", "bluish_green", "reddish_purple", "orange", "sky_blue", "black", "grey")]

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
    # Legends show the dash pattern: long enough handles to see it.
    "legend.handlelength": 3.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "image.cmap": "viridis",  # perceptually uniform and readable with colour-vision deficiency
    "svg.hashsalt": "prenorm",
    "axes.prop_cycle": mpl.cycler(color=CYCLE_COLORS) + mpl.cycler(linestyle=DASHES),
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
    """Write ``fig`` as ``figures/<name>.png`` (PNG: an SVG embeds a date and flaps).

    The PNG carries the figure's description (:func:`describe_figure`) in its standard
    ``Description`` text field, so a page that shows the file can use it as alt text. A file
    whose bytes would not change is not rewritten (``make figures`` leaves a clean tree clean).
    """
    if not name or "/" in name or name.endswith(".png"):
        raise ValueError(f"name must be a bare file stem like 'rmsnorm_scale', got {name!r}")
    out_dir = Path(directory) if directory is not None else FIGURES_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.png"
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None, "Description": describe_figure(fig)})
    if not path.is_file() or path.read_bytes() != buffer.getvalue():  # unchanged: the file is left alone
        path.write_bytes(buffer.getvalue())
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


# Colour-vision deficiency, simulated as Machado, Oliveira & Fernandes (2009), "A
# physiologically-based model for simulation of color vision deficiency", IEEE TVCG 15(6),
# severity 1.0 (dichromacy), applied to linear RGB; and greyscale as relative luminance.
MACHADO_2009 = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
}
LUMINANCE = (0.2126, 0.7152, 0.0722)
MIN_COLOUR_DIFFERENCE = 12.0  # CIELAB ΔE*ab below which two thin lines read as one colour


def _linear(rgb):
    rgb = np.asarray(rgb, dtype=float)
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(linear_rgb):
    """CIELAB (D65) of a linear sRGB colour."""
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear_rgb
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen_as(color, vision: str):
    """CIELAB of ``color`` as seen with ``vision``: "normal", "protanopia", "deuteranopia" or "greyscale"."""
    linear = _linear(mpl.colors.to_rgb(color))
    if vision == "greyscale":
        linear = np.full(3, float(np.dot(LUMINANCE, linear)))
    elif vision in MACHADO_2009:
        linear = np.clip(np.array(MACHADO_2009[vision]) @ linear, 0.0, 1.0)
    elif vision != "normal":
        raise ValueError(f"vision must be normal, protanopia, deuteranopia or greyscale, got {vision!r}")
    return _lab(linear)


def _second_cue(line) -> tuple:
    """What tells a line apart besides its colour: dash pattern, marker, and width."""
    _offset, dashes = line._unscaled_dash_pattern if hasattr(line, "_unscaled_dash_pattern") else (0, None)
    pattern = "solid" if line.get_linestyle() in ("-", "solid") else (line.get_linestyle(), tuple(dashes or ()))
    marker = line.get_marker() if line.get_marker() not in (None, "None", "", " ") else None
    return pattern, marker, round(float(line.get_linewidth()), 1)


def indistinguishable_lines(fig, visions=("deuteranopia", "protanopia", "greyscale"),
                            min_difference: float = MIN_COLOUR_DIFFERENCE) -> list[str]:
    """Pairs of labelled lines in one axes that only colour tells apart, and whose colours
    merge for one of ``visions``; an empty list if every line keeps a cue for everyone."""
    from matplotlib.lines import Line2D

    problems = []
    for ax in fig.axes:
        lines = [line for line in ax.get_lines() if isinstance(line, Line2D) and line.get_visible()
                 and not line.get_label().startswith("_") and len(line.get_xdata()) > 1
                 and line.get_linestyle() not in ("None", "", " ")]
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                if _second_cue(a) != _second_cue(b):
                    continue
                for vision in visions:
                    difference = float(np.linalg.norm(seen_as(a.get_color(), vision) - seen_as(b.get_color(), vision)))
                    if difference < min_difference:
                        problems.append(f"{ax.get_title() or 'an axes'!r}: {a.get_label()!r} and {b.get_label()!r} "
                                        f"differ only by colour, and with {vision} by ΔE {difference:.1f} "
                                        f"(under {min_difference:g})")
                        break
    return problems



def _legend_cue(handle) -> tuple:
    """What a legend entry shows besides its colour: a line's dash and marker, a patch's hatch."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if isinstance(handle, Line2D):
        style = handle.get_linestyle()
        _offset, dashes = getattr(handle, "_unscaled_dash_pattern", (0, None))
        pattern = "solid" if style in ("-", "solid") else "none" if style in ("None", "", " ") else tuple(dashes or ())
        marker = handle.get_marker()
        return "line", pattern, None if marker in (None, "None", "", " ") else str(marker)
    if isinstance(handle, Patch):
        return "patch", handle.get_hatch() or None
    return (type(handle).__name__,)


def legend_entries_alike(fig) -> list[str]:
    """Pairs of entries of one legend that only colour tells apart; empty when none.

    Stricter than :func:`indistinguishable_lines`, which allows two colours far apart in
    lightness: printed in greyscale or projected washed out, lightness is not enough, so
    every entry of a legend differs from every other in dash pattern, marker or hatch.
    """
    problems = []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        entries = list(zip(legend.legend_handles, (t.get_text() for t in legend.get_texts()), strict=True))
        for i, (a, label_a) in enumerate(entries):
            for b, label_b in entries[i + 1:]:
                if _legend_cue(a) == _legend_cue(b):
                    problems.append(f"{label_a!r} and {label_b!r} share dash, marker and hatch {_legend_cue(a)}")
    return problems

# --- alt text -------------------------------------------------------------------------------

# Mathtext a screen reader should hear as words or symbols: "$\theta_k$" reads "θ_k".
_MATHTEXT_SYMBOLS = {
    r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\epsilon": "ε", r"\varepsilon": "ε", r"\theta": "θ",
    r"\Theta": "Θ", r"\lambda": "λ", r"\mu": "μ", r"\sigma": "σ", r"\sqrt": "√", r"\cdot": "·",
    r"\times": "×", r"\approx": "≈", r"\leq": "≤", r"\geq": "≥", r"\ell": "ℓ", r"\|": "‖",
    r"\infty": "∞", r"\to": "→", r"\rightarrow": "→", r"\pm": "±", r"\ldots": "…", r"\dots": "…",
    r"\partial": "∂", r"\nabla": "∇", r"\Delta": "Δ", r"\delta": "δ", r"\pi": "π", r"\omega": "ω",
    r"\phi": "φ", r"\sum": "Σ", r"\prime": "′", r"\top": "ᵀ",
}


def plain_text(label: str) -> str:
    """A figure text without mathtext markup: ``"$m\\theta_k$"`` → ``"mθ_k"``."""
    if "$" not in label:
        return " ".join(label.split())
    for command, symbol in _MATHTEXT_SYMBOLS.items():  # a whole command only: \\top is not \\to + "p"
        whole = r"(?![A-Za-z])" if command[-1].isalpha() else ""
        label = re.sub(re.escape(command) + whole, symbol, label)
    for command in (r"\mathrm", r"\mathbf", r"\mathit", r"\text", r"\left", r"\right"):
        label = label.replace(command, "")
    label = label.replace("$", "").replace("{", "").replace("}", "").replace("\\,", " ").replace("\\", "")
    return " ".join(label.split())


def describe_figure(fig) -> str:
    """A description of ``fig`` from its own words, for an image's alt text.

    The title (a suptitle, else the axes titles), then each panel: its title, what its
    axes measure, and the names in its legend — what a reader who cannot see the picture
    needs to know what it shows. The notebook text around the figure says what it means.
    """
    def words(text) -> str:
        return plain_text(text.get_text()) if text is not None and text.get_visible() else ""

    axes = [ax for ax in fig.axes if ax.get_visible() and (ax.axison or ax.get_title())]
    title = words(getattr(fig, "_suptitle", None))
    panels = []
    for ax in axes:
        parts = []
        name = ", ".join(t for t in (plain_text(ax.get_title(loc)) for loc in ("left", "center", "right")) if t)
        if name and name != title:
            parts.append(name)
        x, y = plain_text(ax.get_xlabel()), plain_text(ax.get_ylabel())
        if ax.axison and (x or y):
            parts.append(" against ".join(label for label in (y, x) if label))
        legend = ax.get_legend()
        if legend is not None:
            entries = [words(text) for text in legend.get_texts()]
            parts.append("lines: " + ", ".join(entry for entry in entries if entry))
        if parts:
            panels.append("; ".join(parts))
    if not title and len(panels) == 1:
        return f"Figure: {panels[0]}."
    if not title:
        title = f"Figure with {len(panels)} panels" if panels else "Figure"
    if len(panels) > 1:
        return f"{title}. " + " ".join(f"Panel {i}: {panel}." for i, panel in enumerate(panels, start=1))
    return f"{title}. {panels[0]}." if panels else f"{title}."


def png_with_description(fig, base64: bool = False, **print_kwargs) -> tuple[bytes | str, dict]:
    """The figure as PNG, with its description as alt text in the output's metadata.

    Registered by :func:`prenorm_lib.setup` as IPython's PNG formatter for figures, so a
    figure shown in a notebook stores ``{"alt": …}`` next to its picture: nbconvert and the
    course's site read it as the image's alt text (JupyterLab 4.6's image renderer, which
    Voilà also uses, does not yet).

    Drawn once: with the inline backend's ``bbox_inches="tight"``, the figure is drawn at
    its dpi and cut to its tight box, widened by ``savefig.pad_inches`` of its own
    background. IPython's ``print_figure`` lays the figure out twice and encodes with
    Pillow, about twice the time; it still draws any figure whose content reaches past its
    own edges (it grows the canvas) or that asks for other options.
    """
    from IPython.core.pylabtools import print_figure

    description = {"alt": describe_figure(fig)}
    if print_kwargs != {"bbox_inches": "tight"} or not isinstance(fig.canvas, FigureCanvasAgg):
        return print_figure(fig, "png", base64=base64, **print_kwargs), description
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())  # (height, width, 4), top row first
    height, width = pixels.shape[:2]
    tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, from the bottom left
    if tight.x0 < 0 or tight.y0 < 0 or tight.x1 * fig.dpi > width or tight.y1 * fig.dpi > height:
        return print_figure(fig, "png", base64=base64, **print_kwargs), description
    box = tight.padded(mpl.rcParams["savefig.pad_inches"])
    left, top = round(box.x0 * fig.dpi), round(height - box.y1 * fig.dpi)  # whole pixels: no resampling
    right, bottom = left + int(box.width * fig.dpi), top + int(box.height * fig.dpi)  # matplotlib's size
    background = np.round(255 * np.asarray(mpl.colors.to_rgba(fig.get_facecolor()))).astype(np.uint8)
    out = np.empty((bottom - top, right - left, 4), dtype=np.uint8)
    out[:] = background
    rows, cols = slice(max(top, 0), min(bottom, height)), slice(max(left, 0), min(right, width))
    out[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left] = pixels[rows, cols]
    data = png_bytes(out)
    return (b64encode(data).decode("ascii") if base64 else data), description
