"""Pacing for self-study: optional deep dives are marked where a learner reads (Lab, the classroom),
and 02's statistics primer comes before its first verdict line."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from prenorm_course import classroom

ROOT = Path(__file__).resolve().parents[2]
MARK, TAG = "optional deep dive", "deep-dive"
DEEP_DIVES = {  # the research-level sections a first reading may skip (issue 28)
    "01": ["Timing RMSNorm against LayerNorm", "Do we still need the norm?"],
    "02": ["Two controls", "Squared ReLU"],
    "03": ["Long-term decay", "Beyond the training length", "Positions after 2024"],
    "04": ["Sinks and gates"],
    "05": ["Why SwiGLU turns the profile over", "Depth: initialisation scale", "Why warmup?", "The frontier"],
}


def read(number: str) -> nbformat.NotebookNode:
    return nbformat.read(classroom.find_notebook(number, ROOT / "notebooks"), as_version=4)


def headings(cell: nbformat.NotebookNode) -> list[str]:
    return [line for line in cell.source.split("\n") if line.startswith("#")]


@pytest.mark.parametrize("number", sorted(DEEP_DIVES))
def test_deep_dives_are_tagged_and_say_so_in_their_heading(number):
    marked = [cell for cell in read(number).cells if TAG in cell.metadata.get("tags", [])]
    assert len(marked) == len(DEEP_DIVES[number])
    for cell, section in zip(marked, DEEP_DIVES[number], strict=True):
        assert section in headings(cell)[0] and headings(cell)[0].rstrip("*").endswith(MARK)


@pytest.mark.parametrize("number", sorted(DEEP_DIVES))
def test_the_classroom_shows_the_mark(number):
    view = classroom.dashboard(read(number))
    assert any(MARK in cell.source for cell in view.cells if cell.cell_type == "markdown")


def test_the_statistics_primer_comes_before_the_first_verdict_line():
    cells = read("02").cells
    primer = next(i for i, cell in enumerate(cells) if cell.id == "stats-primer")
    verdicts = [i for i, cell in enumerate(cells) if cell.cell_type == "code" and any(
        "95 % CI" in str(output.get("text", output.get("data", {}).get("text/plain", "")))
        for output in cell.outputs)]
    assert verdicts and primer < verdicts[0]
    for words in ("paired", "95 % interval", "sign test", "**lower**", "**not separated**"):
        assert words in cells[primer].source
