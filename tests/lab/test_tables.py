"""Rendered tables and verdict lines: Markdown a notebook shows, plain text nbval compares."""

from __future__ import annotations

import pytest

from prenorm_lib.lab import stats, tables


def test_table_renders_markdown_with_aligned_columns_and_escaped_bars():
    table = tables.Table(["FFN", "loss"], [["ReLU", 1.535], ["a|b", "x"]])
    assert str(table) == "| FFN | loss |\n|:--|--:|\n| ReLU | 1.535 |\n| a\\|b | x |"
    assert table._repr_markdown_() == str(table) == repr(table)


@pytest.mark.parametrize(("rows", "align", "words"), [
    ([["only one"]], None, "row 0 has 1 cells, expected 2"),
    ([["a", "b"]], "lx", "align must be one of l/r/c"),
])
def test_table_refuses_ragged_rows_and_unknown_alignment(rows, align, words):
    with pytest.raises(ValueError, match=words):
        tables.Table(["x", "y"], rows, align=align)


def test_verdict_line_reads_as_english_with_a_real_minus():
    comparison = stats.paired([1.0, 2.0, 3.0], [2.0, 3.1, 4.05])
    line = tables.verdict_line("RoPE below sinusoidal", comparison)
    assert line.startswith("RoPE below sinusoidal: 3 of 3 seeds, mean −1.050 [95 % CI −")
    assert line.endswith("→ lower") and "True" not in line and "-" not in line


def test_a_long_verdict_breaks_after_its_label():
    comparison = stats.paired([1.0, 2.0, 3.0, 4.0], [1.5, 1.5, 3.5, 3.5])
    line = tables.verdict_line("A label long enough to push the line past ninety characters", comparison)
    label, rest = line.split("\n")
    assert all(len(part) <= tables.WIDTH for part in (label, rest)) and rest.startswith("    ")
    assert "\n" not in tables.verdicts([line])._repr_markdown_()


def test_interval_and_difference():
    assert tables.difference(-0.0512) == "−0.051" and tables.difference(0.0125) == "+0.013"
    comparison = stats.paired([0.0, 0.0, 0.0], [0.1, 0.2, 0.3])
    assert tables.interval(comparison).startswith("−0.200 [−")
