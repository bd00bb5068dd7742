"""Exercise cells and their solution regions (the conventions of EXERCISES.md).

An exercise cell is a code cell whose first line is ``# Exercise N.M: title``;
it holds one or more regions between ``### BEGIN SOLUTION`` and
``### END SOLUTION``. The code cell after it calls the checker. Anything that
breaks these rules is a ``NotebookError``: a marker that ``build`` silently
skipped would ship a solution to learners.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat

EXERCISE_RE = re.compile(r"^# Exercise (\d+\.\d+): (.+)$")
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
YOUR_CODE = "# YOUR CODE HERE"
NBVAL_MARKER_RE = re.compile(r"^\s*#\s*NBVAL_\w+\s*$")


class NotebookError(ValueError):
    """A solution or learner notebook that breaks the exercise conventions."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ``N.M``, title, and the ids of its two cells."""

    id: str
    title: str
    cell_id: str
    checker_cell_id: str

    @property
    def label(self) -> str:
        return f"Exercise {self.id} ({self.title})"


def id_key(exercise_id: str) -> tuple[int, int]:
    """Sort key so that 1.10 comes after 1.9."""
    major, minor = exercise_id.split(".")
    return int(major), int(minor)


def exercise_header(source: str) -> tuple[str, str] | None:
    """``(id, title)`` if ``source`` starts with an exercise header line, else None."""
    match = EXERCISE_RE.match(source.split("\n", 1)[0].rstrip())
    return (match.group(1), match.group(2).strip()) if match else None


def not_implemented_line(exercise_id: str, title: str) -> str:
    message = f"Exercise {exercise_id}: {title}"
    literal = f'"{message}"' if '"' not in message and "\\" not in message else repr(message)
    return f"raise NotImplementedError({literal})"


def _marker(line: str) -> str | None:
    stripped = line.strip()
    return stripped if stripped in (BEGIN, END) else None


def solution_regions(source: str, where: str) -> list[list[str]]:
    """The lines inside each BEGIN/END region, in order; checks that markers balance."""
    regions: list[list[str]] = []
    current: list[str] | None = None
    for number, line in enumerate(source.split("\n"), start=1):
        marker = _marker(line)
        if marker == BEGIN:
            if current is not None:
                raise NotebookError(f"{where}, line {number}: {BEGIN} inside another region")
            current = []
        elif marker == END:
            if current is None:
                raise NotebookError(f"{where}, line {number}: {END} without a {BEGIN}")
            regions.append(current)
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise NotebookError(f"{where}: {BEGIN} is never closed by {END}")
    return regions


def scaffold_source(source: str, exercise_id: str, title: str) -> str:
    """Replace each solution region by ``# YOUR CODE HERE`` + ``raise NotImplementedError``."""
    solution_regions(source, f"Exercise {exercise_id}")  # validates the markers
    out: list[str] = []
    inside = False
    for line in source.split("\n"):
        marker = _marker(line)
        if marker == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + YOUR_CODE, indent + not_implemented_line(exercise_id, title)]
            inside = True
        elif marker == END:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def fill_scaffold(scaffold: str, regions: list[list[str]], exercise_id: str) -> str:
    """Put solution ``regions`` back in place of the scaffold's placeholders, in order.

    This is what a learner does by hand; ``verify`` uses it to prove that a
    correctly filled exercise notebook passes.
    """
    lines = scaffold.split("\n")
    out: list[str] = []
    filled = 0
    i = 0
    while i < len(lines):
        is_placeholder = (
            lines[i].strip() == YOUR_CODE
            and i + 1 < len(lines)
            and lines[i + 1].strip().startswith("raise NotImplementedError(")
        )
        if is_placeholder:
            if filled == len(regions):
                raise NotebookError(f"Exercise {exercise_id}: more placeholders than solution regions")
            out += regions[filled]
            filled += 1
            i += 2
        else:
            out.append(lines[i])
            i += 1
    if filled != len(regions):
        raise NotebookError(
            f"Exercise {exercise_id}: {len(regions)} solution regions but {filled} placeholders"
        )
    return "\n".join(out)


def strip_nbval_markers(source: str, allowed: str) -> str:
    """Drop ``# NBVAL_...`` lines from learner code unless the course cell ``allowed`` has them.

    A learner's stray ``# NBVAL_SKIP`` must not turn a failing cell into a pass.
    """
    keep = {line.strip() for line in allowed.split("\n") if NBVAL_MARKER_RE.match(line)}
    return "\n".join(
        line for line in source.split("\n") if not NBVAL_MARKER_RE.match(line) or line.strip() in keep
    )


def find_exercises(nb: nbformat.NotebookNode, name: str) -> list[Exercise]:
    """Every exercise of a solution (or exercise) notebook, with its checker cell.

    Raises NotebookError for a cell without an id, a duplicate exercise id, or
    an exercise not followed by a checker cell.
    """
    exercises: list[Exercise] = []
    seen: set[str] = set()
    cells = nb.cells
    for index, cell in enumerate(cells):
        if "id" not in cell:
            raise NotebookError(f"{name}: cell {index} has no id; save it with nbformat >= 4.5 (JupyterLab does)")
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is None:
            continue
        exercise_id, title = header
        if exercise_id in seen:
            raise NotebookError(f"{name}: duplicate exercise id {exercise_id}")
        seen.add(exercise_id)
        checker = next((c for c in cells[index + 1 :] if c.cell_type == "code"), None)
        if checker is None or exercise_header(checker.source) is not None:
            raise NotebookError(f"{name}: Exercise {exercise_id} is not followed by a checker code cell")
        exercises.append(Exercise(exercise_id, title, cell.id, checker.id))
    return exercises


def validate_solution(nb: nbformat.NotebookNode, name: str) -> list[Exercise]:
    """``find_exercises`` plus the marker rules that only solution notebooks must meet."""
    exercises = find_exercises(nb, name)
    exercise_cells = {e.cell_id: e for e in exercises}
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        exercise = exercise_cells.get(cell.id)
        if exercise is None:
            if any(_marker(line) for line in cell.source.split("\n")):
                raise NotebookError(f"{where}: solution marker outside an exercise cell")
            continue
        if not solution_regions(cell.source, f"{where} (Exercise {exercise.id})"):
            raise NotebookError(f"{where}: Exercise {exercise.id} has no {BEGIN} region")
    return exercises
