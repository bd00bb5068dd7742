"""Small rendered tables and verdict lines for the notebooks, instead of long f-string printouts.

A notebook cell that ends in a :class:`Table` shows a real table (an HTML table in
JupyterLab, on the site and in the classroom; aligned text in a terminal and for nbval),
readable on a projector and on a phone. The caller formats the numbers at a precision that
holds on any CPU; the table only lays them out. Differences, intervals and verdict lines
are formatted here once, so every notebook writes them the same way.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from prenorm_lib.lab.stats import PairedComparison

__all__ = ["Table", "Verdicts", "difference", "interval", "paired_table", "verdict_line", "verdicts"]

WIDTH = 90  # the widest printed line a notebook shows (wider ones wrap mid-word on a projector)


def difference(x: float, digits: int = 3) -> str:
    """A signed number with a real minus sign: ``+0.051``, ``−0.012``."""
    return f"{x:+.{digits}f}".replace("-", "−")


def interval(comparison: PairedComparison, digits: int = 3) -> str:
    """``−0.051 [−0.061, −0.041]``: the mean paired difference and its 95 % interval."""
    return (f"{difference(comparison.mean, digits)} "
            f"[{difference(comparison.low, digits)}, {difference(comparison.high, digits)}]")


def verdict_line(label: str, comparison: PairedComparison, digits: int = 3) -> str:
    """One short line: ``SwiGLU below ReLU: 6 of 6 seeds, mean −0.051 [95 % CI …] → lower``.

    ``comparison`` is ``stats.paired(a, b)``: the seeds counted are those where a < b. A line
    wider than ``WIDTH`` breaks after the label.
    """
    rest = (f"{comparison.n_lower} of {comparison.n} seeds, mean {difference(comparison.mean, digits)} "
            f"[95 % CI {difference(comparison.low, digits)}, {difference(comparison.high, digits)}] "
            f"→ {comparison.verdict}")
    line = f"{label}: {rest}"
    return line if len(line) <= WIDTH else f"{label}:\n    {rest}"


class Table:
    """``rows`` of cells under ``columns``; ``title`` is the caption, ``note`` a line below.

    ``align`` gives one of l/r/c per column (default: the first column left, the rest right).
    """

    def __init__(self, columns: Sequence[object], rows: Sequence[Sequence[object]], title: str = "",
                 note: str = "", align: str | None = None):
        self.columns = [str(c) for c in columns]
        self.rows = [[str(cell) for cell in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"row {i} has {len(row)} cells, expected {len(self.columns)} (one per column)")
        align = align or "l" + "r" * (len(self.columns) - 1)
        if len(align) != len(self.columns) or set(align) - set("lrc"):
            raise ValueError(f"align must be one of l/r/c per column ({len(self.columns)}), got {align!r}")
        self.title, self.note, self.align = title, note, align

    def __repr__(self) -> str:  # the plain-text view (a terminal, nbval's text/plain)
        cells = [self.columns, *self.rows]
        widths = [max(len(row[j]) for row in cells) for j in range(len(self.columns))]
        pad = {"l": str.ljust, "r": str.rjust, "c": str.center}
        lines = [self.title] if self.title else []
        for i, row in enumerate(cells):
            lines.append("  ".join(pad[a](c, w) for c, w, a in zip(row, widths, self.align, strict=True)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        side = {"l": "left", "r": "right", "c": "center"}

        def cell(tag: str, text: str, a: str) -> str:
            return f'<{tag} style="text-align:{side[a]}">{html.escape(text)}</{tag}>'

        head = "".join(cell("th", c, a) for c, a in zip(self.columns, self.align, strict=True))
        body = "".join("<tr>" + "".join(cell("td", c, a) for c, a in zip(row, self.align, strict=True)) + "</tr>"
                       for row in self.rows)
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        note = f"<p><small>{html.escape(self.note)}</small></p>" if self.note else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


FEW_SEEDS = 6  # below this a two-sided sign test cannot reach p < 0.05 (2/2⁵ = 0.0625)


def paired_table(comparisons: Sequence[PairedComparison], title: str = "", digits: int = 3,
                 note: str = "") -> Table:
    """One row per paired comparison: what, seeds each way, mean difference with its 95 % interval,
    the sign test's p-value, and the verdict word.

    With few seeds the verdict rests on the t interval alone, and a reader should be told so
    beside it: below :data:`FEW_SEEDS` seeds the table adds a note saying how many degrees of
    freedom the interval has and how low a two-sided sign test can go at all (2/2ⁿ: 0.25 with
    3 seeds, 0.0625 with 5), so a sign p of 0.25 reads as the floor it is, not as weak data.
    """
    rows = []
    for c in comparisons:
        what = f"{c.a_name} − {c.b_name}" + (f" ({c.what})" if c.what else "")
        rows.append((what, f"{c.n_lower} / {c.n_higher} of {c.n}", interval(c, digits), f"{c.sign_p:.2g}", c.verdict))
    few = sorted({c.n for c in comparisons if c.n < FEW_SEEDS})
    if few:
        floors = "; ".join(f"{n} seeds: t interval with {n - 1} degrees of freedom, sign p ≥ {2 / 2 ** n:.2g}"
                           for n in few)
        note = "; ".join(part for part in (note, f"few seeds — the verdict rests on the t interval ({floors})")
                         if part)
    return Table(("a − b", "seeds a < b / a > b", "mean [95 % CI]", "sign p", "verdict"), rows, title, note)


class Verdicts:
    """Verdict lines shown large, one per line (a projector's view of a comparison)."""

    def __init__(self, lines: Sequence[str]):
        self.lines = [str(line) for line in lines]

    def _repr_markdown_(self) -> str:
        return "\n\n".join("**" + " ".join(line.split()) + "**" for line in self.lines)

    def __repr__(self) -> str:
        return "\n".join(self.lines)


def verdicts(lines: Sequence[str]) -> Verdicts:
    """Show ``lines`` as verdicts: bold, one paragraph each, in the notebook and the classroom."""
    return Verdicts(lines)
