"""lab.tables: what a notebook cell shows instead of hand-aligned print lines."""

from __future__ import annotations

import pytest

from prenorm_lib.lab.stats import paired
from prenorm_lib.lab.tables import Table, paired_table


def test_text_and_html_hold_the_same_cells():
    table = Table(("block", "loss"), [("pre-norm", "2.25"), ("post <norm>", "3.86")], title="t", note="n")
    text = repr(table).splitlines()
    assert text[0] == "t" and text[-1] == "n"
    assert text[1].split() == ["block", "loss"] and text[3].split() == ["pre-norm", "2.25"]
    html = table._repr_html_()
    assert html.count("<tr>") == 3 and "<caption>t</caption>" in html
    assert "post &lt;norm&gt;" in html  # cells are escaped, not interpreted


def test_a_row_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="row 1 has 1 cells, expected 2"):
        Table(("a", "b"), [("1", "2"), ("3",)])


def test_paired_table_carries_the_verdict_of_each_comparison():
    lower = paired([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 2.2, 1.9], a_name="a", b_name="b")
    unclear = paired([1.0, 2.0, 1.0], [1.5, 1.5, 1.4], a_name="c", b_name="d")
    rows = paired_table([lower, unclear]).rows
    assert rows[0][0] == "a − b" and rows[0][1] == "4 / 0 of 4" and rows[0][-1] == "lower"
    assert rows[1][-1] == "not separated"
    assert rows[0][2].startswith("−1") and "[" in rows[0][2]
