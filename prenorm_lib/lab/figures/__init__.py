"""The key figure of each notebook, drawn from the library.

Each topic module defines ``FIGURES``: a mapping from a file stem (the name of the PNG in
``figures/``) to a function that takes no argument and returns a matplotlib Figure; and
``SLIDERS``, the same for its LiveFigures (the benchmark and the redraw tests move them all).
The notebooks call the same functions, so the README's pictures and the notebooks'
pictures cannot drift apart. ``python -m prenorm_lib.lab.figures`` (``make figures``) writes
them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

TOPICS = ("rmsnorm", "ffn", "rope", "attention", "placement")


def registry() -> dict[str, Callable]:
    """Every figure function of every topic, by file stem, in course order."""
    figures: dict[str, Callable] = {}
    for topic in TOPICS:
        module = importlib.import_module(f"prenorm_lib.lab.figures.{topic}")
        for name, draw in module.FIGURES.items():
            if name in figures:
                raise ValueError(f"figure name {name!r} is defined twice")
            figures[name] = draw
    return figures


def slider_registry() -> dict[str, Callable]:
    """Every LiveFigure of every topic, built with its defaults, by name, in course order."""
    return {name: make for topic in TOPICS
            for name, make in importlib.import_module(f"prenorm_lib.lab.figures.{topic}").SLIDERS.items()}


def write_all(directory: Path | str | None = None) -> list[Path]:
    """Draw every figure and save it as PNG; return the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from prenorm_lib.lab.plotting import save_figure, use_house_style
    from prenorm_lib.lab.reproducible import seed_everything

    use_house_style()
    paths = []
    for name, draw in registry().items():
        seed_everything()
        fig = draw()
        paths.append(save_figure(fig, name, directory))
        plt.close(fig)
    return paths
