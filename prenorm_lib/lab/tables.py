"""Small rendered tables and verdict lines for the notebooks, instead of long f-string printouts.

A notebook shows a comparison as a Markdown table (JupyterLab, the site and the classroom
render it; nbval compares its text) and a verdict as one short line. The numbers are
formatted here once, so every notebook writes a difference, an interval and a p-value the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from prenorm_lib.lab.stats import PairedComparison

__all__ = ["Table", "Verdicts", "difference", "interval", "verdict_line", "verdicts"]


def difference(x: float, digits: int = 3) -> str:
    """A signed number with a real minus sign: ``+0.051``, ``−0.012``."""
    return f"{x:+.{digits}f}".replace("-", "−")


def interval(comparison: PairedComparison, digits: int = 3) -> str:
    """``−0.051 [−0.061, −0.041]``: the mean paired difference and its 95 % interval."""
    return (f"{difference(comparison.mean, digits)} "
            f"[{difference(comparison.low, digits)}, {difference(comparison.high, digits)}]")


WIDTH = 90  # the widest printed line a notebook shows (wider ones wrap mid-word on a projector)


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
    """A Markdown table that renders in a notebook; ``str()`` is its Markdown source."""

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None):
        header = [str(h) for h in header]
        rows = [[str(cell) for cell in row] for row in rows]
        for i, row in enumerate(rows):
            if len(row) != len(header):
                raise ValueError(f"row {i} has {len(row)} cells, expected {len(header)} (one per header)")
        align = align or "l" + "r" * (len(header) - 1)
        if len(align) != len(header) or set(align) - set("lrc"):
            raise ValueError(f"align must be one of l/r/c per column ({len(header)}), got {align!r}")
        self.header, self.rows, self.align = header, rows, align

    def __str__(self) -> str:
        rule = {"l": ":--", "r": "--:", "c": ":-:"}
        lines = ["| " + " | ".join(self.header) + " |", "|" + "|".join(rule[a] for a in self.align) + "|"]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in self.rows]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:  # the plain-text view (a terminal, nbval's text/plain)
        return str(self)


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
