"""A notebook that is bad on purpose, so every browser check is seen to fire.

It holds two LiveFigures (the slider figure every course notebook uses): one that redraws
normally (the latency measurement is tried on it) and one whose update raises when its
slider reaches 1 (the traceback must show under the figure, and the error checks must see
it). A static copy of the first LiveFigure's frame is shown twice (the duplicate check must
see both copies and the live one) under a printed line, and the last cell raises on purpose. Its cells carry the
`classroom` tag, so its classroom view shows them although the notebook is stored unexecuted.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

FIXTURE_NAME = "livefigure_fixture.ipynb"
RAISED_IN_CELL = "this cell raises on purpose"
RAISED_IN_UPDATE = "the update raised on purpose"

IMPORTS = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

from prenorm_lib.lab.sliders import LiveFigure
"""

WAVE = """\
x = np.linspace(0, 2 * np.pi, 400)
fig, ax = plt.subplots(figsize=(6.4, 3.2))
(line,) = ax.plot(x, np.sin(x))
ax.set_ylim(-3.2, 3.2)
title = ax.set_title("")


def draw_wave(amplitude, harmonic):
    line.set_ydata(amplitude * np.sin(harmonic * x))
    title.set_text(f"a = {amplitude:.1f}, k = {harmonic}")


wave = LiveFigure(fig, draw_wave, {
    "amplitude": widgets.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.1, description="amplitude"),
    "harmonic": widgets.IntSlider(value=1, min=1, max=6, description="harmonic", continuous_update=False),
}, "a sine wave (sliders: amplitude, harmonic)")
wave
"""

RAISING = f"""\
fig_raising, ax_raising = plt.subplots(figsize=(6.4, 2.4))
(bar,) = ax_raising.bar([0], [1.0], color="#1f5fa8")
ax_raising.set_ylim(0, 2)


def draw_or_raise(fail):
    if fail:
        raise RuntimeError("{RAISED_IN_UPDATE}")
    bar.set_height(1.0)


LiveFigure(fig_raising, draw_or_raise, {{"fail": widgets.IntSlider(value=0, min=0, max=1, description="fail")}},
           "a bar whose update raises when fail = 1 (slider: fail)")
"""

DUPLICATES = """\
print("a printed line, kept by the classroom tag")
frame = wave.frame()
display(Image(frame))
display(Image(frame))
"""


def fixture_notebook() -> nbformat.NotebookNode:
    code = nbformat.v4.new_code_cell
    cells = [
        nbformat.v4.new_markdown_cell("# A LiveFigure fixture\n\nBad on purpose: used by the browser tests."),
        code(IMPORTS),
        code(WAVE, metadata={"tags": ["classroom"]}),
        code(RAISING, metadata={"tags": ["classroom"]}),
        code(DUPLICATES, metadata={"tags": ["classroom"]}),
        code(f'raise ValueError("{RAISED_IN_CELL}")'),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def write_fixture(folder: Path) -> Path:
    """Write the fixture notebook into `folder`; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / FIXTURE_NAME
    nbformat.write(fixture_notebook(), target)
    return target
