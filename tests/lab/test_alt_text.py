"""Every figure carries a description (alt text) made from its own words, in the notebook too.

IPython's PNG formatter for figures is replaced by :func:`plotting.png_with_description`, so
a figure shown in a notebook stores ``{"image/png": {"alt": …}}`` beside its picture; the
site, nbconvert and Voilà read it. Each test here can fail: a figure without words gets the
bare "Figure." that the notebook test rejects.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from prenorm_lib.lab.plotting import describe_figure, plain_text, png_with_description

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize(("label", "expected"), [
    (r"$m\theta_k$", "mθ_k"),
    (r"$\|x_l\|^2$ by layer", "‖x_l‖^2 by layer"),
    (r"gain $\sqrt{d_k}$", "gain √d_k"),
    ("plain  words\nsplit", "plain words split"),
    (r"$\|J_F^\top g\|^2$", "‖J_F^ᵀ g‖^2"),  # \top is not \to followed by "p" (05's alt text read "J_F^→p")
    (r"$x \to \infty$", "x → ∞"),
])
def test_mathtext_reads_as_symbols(label, expected):
    assert plain_text(label) == expected


def test_a_figure_is_described_by_its_titles_axes_and_legend():
    fig, (left, right) = plt.subplots(1, 2)
    fig.suptitle("Pre-norm against post-norm")
    left.plot([0, 1], label="pre-norm")
    left.plot([1, 0], label="post-norm")
    left.legend()
    left.set(title="Loss", xlabel="update", ylabel="validation loss")
    right.set(title=r"Gradient of $x_l$", xlabel="layer")
    assert describe_figure(fig) == (
        "Pre-norm against post-norm. Panel 1: Loss; validation loss against update; lines: pre-norm, "
        "post-norm. Panel 2: Gradient of x_l; layer.")
    plt.close(fig)


def test_a_figure_without_words_says_only_that_it_is_a_figure():
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    assert describe_figure(fig) == "Figure."
    plt.close(fig)


def test_the_png_comes_with_its_description():
    fig, ax = plt.subplots()
    ax.set(title="A line", xlabel="x", ylabel="y")
    data, metadata = png_with_description(fig, base64=True)
    assert base64.b64decode(data).startswith(b"\x89PNG")
    assert metadata == {"alt": "Figure: A line; y against x."}
    plt.close(fig)


def test_setup_makes_ipython_store_the_description_with_the_figure():
    script = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import json, matplotlib.pyplot as plt, prenorm_lib\n"
        "shell = InteractiveShell.instance()\n"
        "prenorm_lib.setup()\n"
        "fig, ax = plt.subplots(); ax.set(title='Loss by layer', xlabel='layer', ylabel='loss')\n"
        "data, metadata = shell.display_formatter.format(fig)\n"
        "print(json.dumps({'png': 'image/png' in data, 'svg': 'image/svg+xml' in data, 'metadata': metadata}))\n"
    )
    shown = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                      check=True, env={"MPLBACKEND": "module://matplotlib_inline.backend_inline",
                                                       "PATH": ""}).stdout.splitlines()[-1])
    assert shown == {"png": True, "svg": False,
                     "metadata": {"image/png": {"alt": "Figure: Loss by layer; loss against layer."}}}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_every_stored_figure_of_a_notebook_has_a_description(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    missing = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
                if len(alt) < 20 or alt.startswith("Figure."):
                    missing.append(f"cell {index}: {alt!r}")
    assert not missing, f"figures without a real description in {path.name}: {missing}"
