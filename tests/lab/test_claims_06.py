"""What notebook 06 says about the handout and its own accounting, held to the sources (issue 40's reading).

Each test reads the notebook's Markdown as a learner sees it and fails on the wording a reader
found wrong, so the claim cannot come back unnoticed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from prenorm_lib.lab import accounting

NOTEBOOK = next((Path(__file__).resolve().parents[2] / "notebooks").glob("06_*.ipynb"))


def markdown(cell_id: str | None = None) -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "\n".join(" ".join("".join(c["source"]).split()) for c in cells
                     if c["cell_type"] == "markdown" and cell_id in (None, c.get("id")))


def test_06_not_every_adapter_loads_weights():
    """The handout's run_rope and run_scaled_dot_product_attention take no weights (tests/adapters.py, v1.0.2)."""
    prose = markdown("title")
    assert "Each builds your module, loads the test's weights" not in prose
    assert "`run_rope` has no weights to load" in prose


def test_06_the_accounting_answer_names_every_part_that_grows():
    """Transformer_accounting (d) asks which parts take "proportionally more or less" as the model grows.

    torch's FlopCounterMode on the library's model says which shares grow from GPT-2 small to XL;
    the reading of the figure must name each of them as growing, and no other.
    """
    shares = {}
    for name, shape in accounting.GPT2_SHAPES.items():
        flops = accounting.measured_flops(shape)
        shares[name] = {part: value / sum(flops.values()) for part, value in flops.items()}
    small, xl = shares["GPT-2 small"], shares["GPT-2 XL"]
    growing = {part for part in small if xl[part] > small[part]}
    assert growing == {"feed-forward", "projections"}  # the arithmetic the sentence below states
    sentence = re.search(r"So as the model grows at a fixed context,(.*?): the head's shrinks", markdown(
        "accounting-reading"))
    assert sentence is not None, "the reading of the figure lost its sentence on the model's growth"
    assert "feed-forward's share grows" in sentence.group(1)
    assert "projections'" in sentence.group(1)
