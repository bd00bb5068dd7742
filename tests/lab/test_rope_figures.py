"""Notebook 03's figure module: its tables, verdict lines and figure labels."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from prenorm_lib.lab.figures import rope
from prenorm_lib.lab.sliders import LiveFigure
from prenorm_lib.lab.stats import paired


def test_table_renders_markdown_and_aligned_text():
    table = rope.Table(["name", "value"], [["a", 1], ["long name", "2.50"]], caption="numbers")
    assert table._repr_markdown_().splitlines() == [
        "**numbers**", "", "| name | value |", "|:---|---:|", "| a | 1 |", "| long name | 2.50 |"]
    assert repr(table).splitlines() == ["numbers", "name       value", "a              1", "long name   2.50"]


def test_table_refuses_a_row_of_the_wrong_width():
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        rope.Table(["a", "b"], [["only one"]])


def test_comparison_table_and_verdict_line_read_the_paired_comparison():
    comparison = paired([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.5, 4.5], a_name="A", b_name="B", what="loss")
    row = rope.comparison_table([comparison]).rows[0]
    assert row[0] == "A − B, loss" and row[1] == "−1.000" and row[3] == "4 / 0" and row[5] == comparison.verdict
    assert row[2] == f"[{comparison.low:+.3f}, {comparison.high:+.3f}]".replace("-", "−")
    assert rope.verdict_line(comparison, "A vs B") == "A vs B: lower (4 of 4 seeds lower, p = 0.12)"


def _visible_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        texts += [t.get_text() for t in legend.get_texts()] if legend else []
    return [t for t in texts if t]


def _outside_math(text: str) -> str:
    return re.sub(r"\$[^$]*\$", "", text)


@pytest.mark.parametrize("name", sorted(rope.EXAMPLES))
def test_figure_labels_use_mathtext_not_raw_subscripts(name):
    drawn = rope.EXAMPLES[name]()
    fig = drawn.fig if isinstance(drawn, LiveFigure) else drawn
    try:
        fig.canvas.draw()
        raw = [t for t in _visible_texts(fig) if "_" in _outside_math(t) or "·" in _outside_math(t)]
        assert not raw, f"{name}: labels with a raw subscript or a middle dot outside $…$: {raw}"
    finally:
        plt.close(fig)


def test_the_label_check_fires_on_a_raw_subscript():
    fig, ax = plt.subplots()
    ax.set_xlabel("m·θ_k")
    fig.canvas.draw()
    assert [t for t in _visible_texts(fig) if "_" in _outside_math(t)] == ["m·θ_k"]
    plt.close(fig)
