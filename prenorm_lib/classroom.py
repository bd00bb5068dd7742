"""Classroom mode: one notebook as a Voilà dashboard of headings, sliders and plots.

    python -m prenorm_lib.classroom 03        # = make demo NB=03

Projected in a classroom, a notebook's printed checks and prose are noise; the pictures
and the sliders are the show. :func:`dashboard` derives that view from a course notebook
without touching it: every code cell still runs (later cells need what earlier ones
define), but a cell whose stored outputs hold no picture and no widget runs under
``%%capture``, so it shows nothing; markdown cells shrink to their headings. Voilà then
hides all code.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SHOWN_MIME_TYPES = ("image/png", "application/vnd.jupyter.widget-view+json")
HEADING = re.compile(r"^#{1,3} .+$", re.MULTILINE)


def shows_picture_or_widget(cell: nbformat.NotebookNode) -> bool:
    """True if the cell's stored outputs contain a PNG or a widget view."""
    return any(mime in output.get("data", {}) for output in cell.get("outputs", []) for mime in SHOWN_MIME_TYPES)


def dashboard(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``notebook`` that shows only headings, plots and sliders when run."""
    result = nbformat.from_dict(notebook)  # deep copy: the course notebook stays as it is
    cells = []
    for cell in result.cells:
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            if headings:
                cell.source = "\n\n".join(headings)
                cells.append(cell)
        elif cell.cell_type == "code":
            if not shows_picture_or_widget(cell):
                cell.source = "%%capture\n" + cell.source
            cells.append(cell)
    result.cells = cells
    return result


def find_notebook(number: str, folder: Path = NOTEBOOKS) -> Path:
    """The course notebook whose file name starts with ``number`` (e.g. "03")."""
    matches = sorted(folder.glob(f"{number}_*.ipynb"))
    if not matches:
        available = ", ".join(p.name[:2] for p in sorted(folder.glob("[0-9][0-9]_*.ipynb")))
        raise ValueError(f"NB={number!r} matches no notebook in {folder.name}/; expected one of {available}")
    return matches[0]


def write_dashboard(source: Path, folder: Path) -> Path:
    """Write the dashboard of ``source`` into ``folder`` under the same file name."""
    target = Path(folder) / Path(source).name
    nbformat.write(dashboard(nbformat.read(source, as_version=4)), target)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prenorm_lib.classroom", description=__doc__.split("\n")[0])
    parser.add_argument("number", help="the notebook's number, e.g. 03")
    parser.add_argument("voila_args", nargs=argparse.REMAINDER, help="passed on to voila (e.g. --port=8867)")
    args = parser.parse_args(argv)
    try:
        source = find_notebook(args.number)
    except ValueError as error:
        parser.error(str(error))
    folder = Path(tempfile.mkdtemp(prefix="prenorm-demo-"))
    notebook = write_dashboard(source, folder)
    voila = Path(sys.executable).with_name("voila")
    print(f"classroom view of {source.name}: headings, sliders and plots (Ctrl+C to stop)")
    os.chdir(folder)
    os.execv(voila, [str(voila), notebook.name, *args.voila_args])


if __name__ == "__main__":
    main()
