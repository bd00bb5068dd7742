"""Small tables for notebook output: an HTML table in Jupyter, aligned text everywhere else.

A notebook cell that ends in a :class:`Table` shows a real table (readable on a projector
and on a phone) instead of a block of hand-aligned ``print`` lines. The caller formats the
numbers (at a precision that holds on any CPU); the table only lays them out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """``rows`` of cells under ``columns``; ``title`` is the caption, ``note`` a line below."""

    columns: Sequence[str]
    rows: Sequence[Sequence[object]]
    title: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"row {i} has {len(row)} cells, expected {len(self.columns)} (one per column)")

    def _cells(self) -> list[list[str]]:
        return [[str(c) for c in self.columns]] + [[str(c) for c in row] for row in self.rows]

    def __repr__(self) -> str:
        cells = self._cells()
        widths = [max(len(row[j]) for row in cells) for j in range(len(self.columns))]
        lines = [self.title] if self.title else []
        for i, row in enumerate(cells):
            lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                                   for j, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                       for row in self.rows)
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        note = f"<p><small>{html.escape(self.note)}</small></p>" if self.note else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def _signed(x: float, digits: int) -> str:
    return f"{x:+.{digits}g}".replace("-", "−")


def paired_table(comparisons: Sequence, title: str = "", digits: int = 2, note: str = "") -> Table:
    """One row per :class:`prenorm_lib.lab.stats.PairedComparison`: what, seeds each way, mean
    difference with its 95 % interval, the sign test's p-value, and the verdict word."""
    rows = []
    for c in comparisons:
        what = f"{c.a_name} − {c.b_name}" + (f" ({c.what})" if c.what else "")
        rows.append((what, f"{c.n_lower} / {c.n_higher} of {c.n}",
                     f"{_signed(c.mean, digits)} [{_signed(c.low, digits)}, {_signed(c.high, digits)}]",
                     f"{c.sign_p:.2g}", c.verdict))
    return Table(("a − b", "seeds a<b / a>b", "mean [95 % CI]", "sign p", "verdict"), rows, title, note)
