"""One call at the top of every notebook makes its stored outputs reproducible.

nbval compares a fresh run with the stored one, on other CPUs, with other thread counts,
on the next torch patch release. What makes outputs flap is fixed here, once.
"""

from __future__ import annotations

import functools
import random
import warnings

import numpy as np
import torch

from prenorm_lib.lab.plotting import png_with_description, use_house_style

DEFAULT_SEED = 0


def seed_everything(seed: int = DEFAULT_SEED) -> None:
    """Seed Python's, NumPy's and torch's generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed: int = DEFAULT_SEED) -> None:
    """Prepare a notebook session: one thread, seeds, print options, plot style, quiet.

    - One torch thread: large reductions sum in a different order with 2 threads, which
      changes the last printed digits. (The experiments are sized for one core.)
    - Seeds for Python, NumPy and torch.
    - Short, fixed print formats for tensors and arrays.
    - The house plot style, PNG figures for inline display.
    - Known harmless warnings silenced: a warning's text carries the kernel's temp path,
      which differs on every run.
    """
    torch.set_num_threads(1)
    seed_everything(seed)
    torch.set_printoptions(precision=4, sci_mode=False, linewidth=100)
    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    use_house_style()
    _inline_png()
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    warnings.filterwarnings("ignore", message=".*IProgress not found.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def _inline_png() -> None:
    """Ask IPython's inline backend for PNG only (no SVG, whose text embeds a date), each
    figure stored with its description as alt text (:func:`plotting.png_with_description`)."""
    try:
        from IPython import get_ipython
        from matplotlib.figure import Figure
        from matplotlib_inline.backend_inline import InlineBackend, set_matplotlib_formats
    except ImportError:  # plain Python: nothing to configure
        return
    shell = get_ipython()
    if shell is None:
        return
    set_matplotlib_formats("png")
    options = dict(InlineBackend.instance().print_figure_kwargs)
    shell.display_formatter.formatters["image/png"].for_type(
        Figure, functools.partial(png_with_description, base64=True, **options))
