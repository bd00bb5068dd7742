"""Sliders that redraw a figure in place, fast enough to keep up with a hand on the slider.

``ipywidgets.interact`` builds a new figure on every move: a new Figure, a new layout, a
new output area. In a classroom that is a visible lag. A :class:`LiveFigure` builds its
figure once; a move only calls ``update(**values)``, which changes the artists that depend
on the slider (``set_ydata``, ``set_text``, …), and only those are drawn again
(:mod:`prenorm_lib.lab.blitting`) over a stored picture of the rest, into an
``ipywidgets.Image``. Tick labels, legends and anything else the slider does not touch
are drawn once.

Displayed, a LiveFigure is the controls above the picture. Its display also carries the
first frame as a PNG and a one-line ``text/plain`` description, so a page without a
kernel (the static site, a notebook viewer) still shows the picture, and nbval compares a
stable line rather than a widget's repr.
"""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from prenorm_lib.lab.blitting import Blitter
from prenorm_lib.lab.plotting import describe_figure

__all__ = ["LiveFigure", "render_png", "value_text"]


def value_text(name: str, control: widgets.ValueWidget) -> str:
    """What a control says it is set to, for people who cannot see the knob: its name and the
    value as its readout shows it ("Θ = 10 000", "depth L = 6", "β = 1"), never a position.

    A selection slider's value is the option's label (not its index); a log slider's is the
    value itself (not its exponent).
    """
    label = control.description or name
    labels, index = getattr(control, "_options_labels", None), getattr(control, "index", None)
    # A selection widget: the option's label (its `label` trait stays '' while index 0 is the first one set).
    shown = labels[index] if labels is not None and index is not None else None
    if shown is None:
        value = control.value
        shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{label} = {shown}"


def _ends(control: widgets.ValueWidget) -> list:
    """The values at both ends of a control (a log slider's min and max are exponents)."""
    options = getattr(control, "options", None)
    if options:
        values = [option[1] if isinstance(option, tuple) else option for option in options]
        return [values[0], values[-1]]
    if all(hasattr(control, bound) for bound in ("min", "max")):
        if hasattr(control, "base"):
            return [control.base ** control.min, control.base ** control.max]
        return [control.min, control.max]
    return []


def render_png(fig: Figure) -> bytes:
    """The figure as PNG bytes at its own dpi after a full draw, without cropping.

    A LiveFigure's first frame (the picture a notebook stores), and the full redraw that
    the blitted frames are compared with in tests and timed against in ``make bench``.
    """
    buffer = io.BytesIO()
    fig.canvas.print_png(buffer, metadata={"Software": None}, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


class LiveFigure:
    """A figure, the controls that change it, and the callback that updates its artists.

    ``update(**values)`` receives every control's current value by name and must change the
    figure's artists in place; it is called once at construction, so the figure may be
    built empty of slider-dependent data. The layout is computed once, on that first
    frame, and then frozen. A move redraws only the artists ``update`` changed, and the
    ones a full draw paints over them (:mod:`~prenorm_lib.lab.blitting`); so a fast
    figure keeps its axis limits fixed (a new limit costs a full draw) and puts what
    does not move beneath what does (``zorder``, ``ax.set_axisbelow(True)``).

    ``description`` is the line a page without widgets shows (and nbval compares), e.g.
    ``"RMSNorm and LayerNorm of a shifted vector (slider: shift)"``.
    """

    def __init__(
        self,
        fig: Figure,
        update: Callable[..., Any],
        controls: Mapping[str, widgets.ValueWidget],
        description: str,
    ):
        if not isinstance(fig, Figure):
            raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
        if not callable(update):
            raise TypeError(f"update must be a function of the control values, got {type(update).__name__}")
        if not controls:
            raise ValueError("controls must name at least one widget, e.g. {'c': widgets.FloatSlider(...)}")
        for name, control in controls.items():
            if not isinstance(control, widgets.ValueWidget):
                raise TypeError(f"controls[{name!r}] must be an ipywidgets value widget, got {type(control).__name__}")
        if not isinstance(description, str) or not description.strip():
            raise ValueError("description must be a non-empty line saying what the figure shows")
        plt.close(fig)  # pyplot must not show it a second time at the end of the cell
        self.fig = fig
        FigureCanvasAgg(fig)
        self.update = update
        self.controls = dict(controls)
        self.description = description
        self.render_ms: list[float] = []
        self.errors = widgets.Output()
        self.image = widgets.Image(format="png")
        self._showing_error = False
        start = time.perf_counter()
        self.update(**self.values)
        self.image.value = render_png(fig)  # a full draw, which also computes the layout
        self.render_ms.append((time.perf_counter() - start) * 1e3)
        fig.set_layout_engine("none")  # positions fixed from the first frame on
        self.blitter = Blitter(fig)
        self.blitter.settle()
        self._rehearse()
        for name, control in self.controls.items():
            control.observe(self._on_change, names="value")
            self._announce(name, control)
            control.observe(lambda _change, name=name, control=control: self._announce(name, control), names="value")
        self.widget = widgets.VBox(
            [widgets.HBox(list(self.controls.values())), self.image, self.errors],
            layout=widgets.Layout(align_items="center"),
        )

    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: Any) -> None:
        """Move controls programmatically (as a learner would with the mouse); redraws once per control."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise ValueError(f"no control named {unknown}; this figure has {sorted(self.controls)}")
        for name, value in values.items():
            self.controls[name].value = value

    def frame(self) -> bytes:
        """The PNG currently shown."""
        return bytes(self.image.value)

    def _rehearse(self) -> None:
        """Set each control to its ends and back, without drawing, so the blitter knows every
        artist a move can change before the first move (one background, not one per surprise)."""
        start = self.values
        for name, control in self.controls.items():
            for end in _ends(control):
                try:
                    self.update(**{**start, name: end})
                except Exception:  # a move there will show the error under the figure
                    continue
                self.blitter.learn()
        self.update(**start)
        self.blitter.settle()

    @staticmethod
    def _announce(name: str, control: widgets.ValueWidget) -> None:
        """Name and value of the control as text (its tooltip, which pages read as its title;
        the classroom page also gives it to the knob as aria-label and aria-valuetext)."""
        control.tooltip = value_text(name, control)

    def _on_change(self, _change) -> None:
        # The errors area is touched only when there is something to show or take away: each
        # use is a message to the page, and a move should cost one (the picture).
        if self._showing_error:
            self.errors.clear_output()
            self._showing_error = False
        try:
            self._redraw()
        except Exception:
            self._showing_error = True
            with self.errors:  # in a kernel: the traceback under the figure, not in a log
                raise

    def _redraw(self) -> None:
        start = time.perf_counter()
        self.update(**self.values)
        self.image.value = self.blitter.frame()
        self.render_ms.append((time.perf_counter() - start) * 1e3)

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        bundle["text/plain"] = self.description
        bundle["image/png"] = base64.b64encode(self.frame()).decode("ascii")
        return bundle, {"image/png": {"alt": f"{self.description}. {describe_figure(self.fig)}"}}
