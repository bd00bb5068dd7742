"""Redraw only what a slider move changed, over a stored picture of everything else.

A full draw lays out and rasterises every tick label, title and legend entry again, though
a move changes a few lines and a title; text is most of what a frame costs. A
:class:`Blitter` keeps a picture of the figure *without* the artists that moves change,
and a frame copies it back and draws just those artists on top (matplotlib's blitting,
made automatic and exact):

- What changed is read off matplotlib's own ``stale`` flags, which every setter raises.
  The unit of redrawing is a direct child of an Axes (a line, a bar, a title, an axis)
  or of the Figure.
- A full draw paints in z-order. A unchanged unit that a full draw paints *after* a
  changing one, over the same pixels (a spine over a bar, a legend over a line), is
  redrawn with it, so the layering is the full draw's.
- A move that changes something new (another unit, an axis range, the set of artists)
  makes a new background first: that frame costs a full draw, and stays exact.

The frame is the full draw's, pixel for pixel; ``tests/lab/test_blitting.py`` checks that
for every slider of the course.
"""

from __future__ import annotations

from operator import methodcaller

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from prenorm_lib.lab.png import png_bytes

__all__ = ["Blitter", "encode_png"]

PAD_PX = 2  # anti-aliasing reaches about a pixel past an artist's box


def encode_png(fig: Figure) -> bytes:
    """The canvas as it is now, as PNG bytes (:func:`~prenorm_lib.lab.png.png_bytes`), without drawing it first."""
    return png_bytes(np.asarray(fig.canvas.buffer_rgba()))


def _draw_order(fig: Figure) -> list[tuple[Axes | None, Artist]]:
    """Every unit a full draw paints, in the order it paints them, each with its Axes (None: the figure's own).

    Mirrors ``Figure.draw`` and ``Axes.draw``: children sorted by zorder (a stable sort),
    the background patches first, spines and axes only where they are shown.
    """
    order: list[tuple[Axes | None, Artist]] = []
    for top in sorted((a for a in fig.get_children() if a is not fig.patch), key=methodcaller("get_zorder")):
        if not isinstance(top, Axes):
            order.append((None, top))
            continue
        children = [c for c in top.get_children() if c is not top.patch]
        if not (top.axison and top.get_frame_on()):
            children = [c for c in children if c not in top.spines.values()]
        if not top.axison:
            children = [c for c in children if not isinstance(c, Axis)]
        order.extend((top, child) for child in sorted(children, key=methodcaller("get_zorder")))
    return order


def _changed(unit: Artist) -> bool:
    return any(artist.stale for artist in unit.findobj())


def _settle(fig: Figure) -> None:
    """Lower every stale flag, so the next move's setters are all that raise one."""
    for artist in fig.findobj():
        artist.stale = False


def _limits(fig: Figure) -> tuple:
    return tuple(tuple(ax.viewLim.bounds) for ax in fig.axes), fig.canvas.get_width_height()


class Blitter:
    """Frames of one figure after moves, each drawn as little as keeps it exact. See the module's docstring."""

    def __init__(self, fig: Figure):
        self.fig = fig
        self.background = None
        self.moving: set[Artist] = set()  # units that moves have changed so far
        self.drawn: list[Artist] = []  # what a frame draws over the background, in order
        self.full_draws = 0  # backgrounds made: 1 after the first move, unless a move changes something new
        self._made_for: tuple | None = None  # the units and limits the background was drawn for

    def settle(self) -> None:
        """Call after a full draw (the first frame): from now on, raised stale flags mean a move changed them."""
        _settle(self.fig)

    def learn(self) -> None:
        """Count what has changed since :meth:`settle` as moving, before any frame is drawn.

        A text that happens to read the same after a move is not stale, and would cost a new
        background the first time it does change; moves tried in advance find it.
        """
        self.moving |= {unit for _, unit in _draw_order(self.fig) if _changed(unit)}
        _settle(self.fig)

    def frame(self) -> bytes:
        """The figure as the last ``update`` left it, as PNG bytes."""
        order = _draw_order(self.fig)
        units = [unit for _, unit in order]
        changed = {unit for unit in units if _changed(unit)}
        made_for = (tuple(map(id, units)), _limits(self.fig))
        if self._made_for is None:  # the first move: what learn() found still holds
            self._made_for = made_for
        if self.background is None or made_for != self._made_for or not changed <= self.moving:
            self.moving = changed | (self.moving if made_for == self._made_for else set())
            self._new_background(order)
            self._made_for = made_for
        else:
            self.fig.canvas.restore_region(self.background)
            renderer = self.fig.canvas.get_renderer()
            for unit in self.drawn:
                unit.draw(renderer)
        _settle(self.fig)
        return encode_png(self.fig)

    def _new_background(self, order: list[tuple[Axes | None, Artist]]) -> None:
        canvas = self.fig.canvas
        renderer = canvas.get_renderer()
        self.drawn, regions = [], []
        for ax, unit in order:
            region = self._region(ax, unit, renderer)
            if unit in self.moving or any(region.overlaps(r) for r in regions):
                self.drawn.append(unit)
                regions.append(region)
        shown = [unit.get_visible() for unit in self.drawn]
        # Axes.draw places the titles afresh, reading a hidden title's extent as the unit box, which
        # moves the titles beside it too. The layout is frozen since the first frame: keep them put
        # (matplotlib's own switch for a title placed by hand).
        automatic = [(ax, ax._autotitlepos) for ax in self.fig.axes]
        for ax, _ in automatic:
            ax._autotitlepos = False
        for unit in self.drawn:
            unit.set_visible(False)
        canvas.draw()
        for ax, auto in automatic:
            ax._autotitlepos = auto
        self.background = canvas.copy_from_bbox(self.fig.bbox)
        self.full_draws += 1
        for unit, visible in zip(self.drawn, shown, strict=True):
            unit.set_visible(visible)
            unit.draw(renderer)

    def _region(self, ax: Axes | None, unit: Artist, renderer) -> Bbox:
        """The pixels ``unit`` may paint, padded: its clip box if it is clipped, else its extent.

        A changing text may grow along its line, so its band spans the figure's width. An
        axis paints its labels outside the Axes and, where the grid is on, lines inside it.
        """
        if isinstance(unit, Axis):
            box = unit.get_tightbbox(renderer) or Bbox.null()
            if ax is not None and any(tick.gridline.get_visible() for tick in unit.get_major_ticks()):
                box = Bbox.union([box, ax.bbox]) if box.width > 0 else ax.bbox
        elif unit.get_clip_on() and unit.get_clip_box() is not None:
            box = unit.get_clip_box()
        else:
            box = unit.get_window_extent(renderer)
            if unit in self.moving:
                box = Bbox.from_extents(self.fig.bbox.x0, box.y0, self.fig.bbox.x1, box.y1)
        return box.padded(PAD_PX)
