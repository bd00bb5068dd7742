"""lab.tables: what a notebook cell shows instead of hand-aligned print lines."""

from __future__ import annotations

import pytest

from prenorm_lib.lab import stats, tables
from prenorm_lib.lab.tables import Table, paired_table


def test_text_and_html_hold_the_same_cells():
    table = Table(("block", "loss"), [("pre-norm", "2.25"), ("post <norm>", "3.86")], title="t", note="n")
    text = repr(table).splitlines()
    assert text[0] == "t" and text[-1] == "n"
    assert text[1].split() == ["block", "loss"] and text[3].split() == ["pre-norm", "2.25"]
    html = table._repr_html_()
    assert html.count("<tr>") == 3 and "<caption>t</caption>" in html
    assert "post &lt;norm&gt;" in html  # cells are escaped, not interpreted


def test_columns_align_as_asked():
    table = Table(["FFN", "loss"], [["ReLU", 1.535], ["SwiGLU", "1.5"]])
    assert repr(table).splitlines()[3] == "SwiGLU    1.5"  # first column left, the rest right
    assert 'style="text-align:right">1.535<' in table._repr_html_()


@pytest.mark.parametrize(("rows", "align", "words"), [
    ([["only one"]], None, "row 0 has 1 cells, expected 2"),
    ([["a", "b"]], "lx", "align must be one of l/r/c"),
])
def test_table_refuses_ragged_rows_and_unknown_alignment(rows, align, words):
    with pytest.raises(ValueError, match=words):
        Table(["x", "y"], rows, align=align)


def test_paired_table_carries_the_verdict_of_each_comparison():
    lower = stats.paired([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 2.2, 1.9], a_name="a", b_name="b")
    unclear = stats.paired([1.0, 2.0, 1.0], [1.5, 1.5, 1.4], a_name="c", b_name="d")
    rows = paired_table([lower, unclear]).rows
    assert rows[0][0] == "a − b" and rows[0][1] == "4 / 0 of 4" and rows[0][-1] == "lower"
    assert rows[1][-1] == "not separated"
    assert rows[0][2].startswith("−1") and "[" in rows[0][2]


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


def test_few_seeds_are_named_beside_the_verdict():
    three = stats.paired([1.0, 2.0, 3.0], [2.0, 3.0, 4.1])
    note = paired_table([three], note="lr 0.01").note
    assert note.startswith("lr 0.01; few seeds")
    assert "3 seeds: t interval with 2 degrees of freedom, sign p ≥ 0.25" in note
    six = stats.paired([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 3.0, 4.0, 5.0, 6.0, 7.1])
    assert paired_table([six]).note == ""
