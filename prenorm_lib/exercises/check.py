"""Check a learner's notebook without trusting its stored outputs.

The learner's file holds the learner's outputs, so nbval on it would compare
a wrong run with itself. Instead the learner's code is put into the pristine
course notebook (the solution notebook, whose stored outputs are the correct
run) cell by cell id, and nbval runs that:

* exercise cells and other code cells take the learner's source;
* checker cells (the code cell after each exercise) always keep the course
  source, so editing or deleting a check cannot make it pass;
* a deleted exercise cell becomes its scaffold again (counts as not done); a
  deleted ordinary cell is run as in the course; cells the learner added are
  not run; markdown edits are ignored. Each of these is reported.

Each exercise's status comes from its exercise cell and its checker cell:
NotImplementedError means not done, a ``Hint`` is a hint, anything else an
error, a cell that ran past the per-cell limit a timeout.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from prenorm_lib.exercises.build import read_notebook, write_notebook
from prenorm_lib.exercises.markers import (
    Exercise,
    NotebookError,
    scaffold_source,
    strip_nbval_markers,
    validate_solution,
)
from prenorm_lib.exercises.paths import repo_root, sanitize_file, solution_dir, solution_notebooks
from prenorm_lib.exercises.runner import DEFAULT_TIMEOUT, CellResult, RunResult, run_nbval

PASSED, HINT, NOT_DONE, ERROR, TIMEOUT, NOT_RUN = "pass", "hint", "not done", "error", "timeout", "not run"


@dataclass
class ExerciseStatus:
    exercise: Exercise
    status: str  # one of PASSED, HINT, NOT_DONE, ERROR, TIMEOUT, NOT_RUN
    detail: str

    def line(self) -> str:
        text = {PASSED: "passed", NOT_DONE: "not done yet", NOT_RUN: "not run (the check stopped earlier)"}
        return f"{self.exercise.label}: {text.get(self.status, self.detail)}"


@dataclass
class CheckResult:
    """Everything ``check`` learned about one learner notebook."""

    name: str
    solution: Path
    exercises: list[ExerciseStatus]
    other_cells: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    run: RunResult = field(default_factory=lambda: RunResult(returncode=-1))

    @property
    def passed(self) -> bool:
        return self.run.passed


def _first_line(source: str) -> str:
    line = next((s.strip() for s in source.split("\n") if s.strip()), "")
    return line if len(line) <= 50 else line[:47] + "..."


def find_solution(name: str, learner: nbformat.NotebookNode, root: Path) -> Path:
    """The course notebook a learner notebook belongs to.

    Same file name as a solution notebook first; otherwise (a renamed
    submission) the solution notebook sharing the most cell ids with it.
    """
    by_name = solution_dir(root) / name
    if by_name.is_file() and name[:2].isdigit():
        return by_name
    ids = {cell.get("id") for cell in learner.cells}
    shared = {path: len(ids & {c.get("id") for c in read_notebook(path).cells}) for path in solution_notebooks(root)}
    best = max(shared, key=shared.get, default=None)
    if best is None or shared[best] == 0:
        raise NotebookError(
            f"{name}: cannot tell which course notebook this is (no file of that name in "
            "notebooks/ and no cell ids in common with any of them)"
        )
    return best


def merge(
    learner: nbformat.NotebookNode, solution: nbformat.NotebookNode, exercises: list[Exercise]
) -> tuple[nbformat.NotebookNode, set[str], list[str]]:
    """The course notebook with the learner's code in it.

    Returns the merged notebook, the ids of ordinary cells the learner edited,
    and notes for the learner about cells added, deleted or ignored.
    """
    mine = {cell.get("id"): cell for cell in learner.cells}
    exercise_of = {e.cell_id: e for e in exercises}
    checker_of = {e.checker_cell_id: e for e in exercises}
    merged = copy.deepcopy(solution)
    edited: set[str] = set()
    notes: list[str] = []
    for cell in merged.cells:
        if cell.cell_type != "code":
            continue
        theirs = mine.get(cell.id)
        exercise = exercise_of.get(cell.id)
        if cell.id in checker_of:
            if theirs is not None and theirs.source != cell.source:
                notes.append(f"you edited the check cell after Exercise {checker_of[cell.id].id}; "
                             "the check runs the original")
        elif theirs is None or theirs.cell_type != "code":
            if exercise is not None:
                cell.source = scaffold_source(cell.source, exercise.id, exercise.title)
                notes.append(f"the cell of Exercise {exercise.id} is missing from your notebook; "
                             "it counts as not done")
            else:
                notes.append(f"code cell `{_first_line(cell.source)}` is missing from your notebook; "
                             "the check runs the course's version")
        else:
            source = strip_nbval_markers(theirs.source, cell.source)
            if exercise is None and source != cell.source:
                edited.add(cell.id)
            cell.source = source
    known = {cell.id for cell in solution.cells}
    added = [c for c in learner.cells if c.cell_type == "code" and c.get("id") not in known]
    if added:
        names = ", ".join(f"`{_first_line(c.source)}`" for c in added[:3]) + (", ..." if len(added) > 3 else "")
        notes.append(f"you added {len(added)} code cell(s) ({names}); the check does not run them — "
                     "code that an exercise needs belongs in its exercise cell")
    return merged, edited, notes


def exercise_status(exercise: Exercise, cells: dict[str, CellResult], timeout: float) -> ExerciseStatus:
    """Classify one exercise from its exercise cell, then its checker cell."""
    prefix = f"Exercise {exercise.id}: "
    for cell_id, whose in ((exercise.cell_id, "your exercise cell"), (exercise.checker_cell_id, "the check cell")):
        cell = cells.get(cell_id)
        if cell is None:
            return ExerciseStatus(exercise, NOT_RUN, "not run")
        if cell.kind == "timeout":
            return ExerciseStatus(exercise, TIMEOUT, f"timeout — {whose} ran longer than {timeout:g} s "
                                                     "(an endless loop?)")
        if cell.kind == "exception":
            if cell.ename == "NotImplementedError":
                return ExerciseStatus(exercise, NOT_DONE, "not done yet")
            if cell.ename == "Hint" and cell.evalue.startswith(prefix):
                return ExerciseStatus(exercise, HINT, "hint — " + cell.evalue.removeprefix(prefix))
            return ExerciseStatus(exercise, ERROR, f"error — {whose} raised {cell.ename}: {cell.evalue}")
        if cell.kind == "output":
            return ExerciseStatus(exercise, ERROR, f"error — {whose} printed something other than the "
                                                   "course run (a leftover print()?)")
        if cell.kind == "other":
            return ExerciseStatus(exercise, ERROR, f"error — {cell.message}")
    return ExerciseStatus(exercise, PASSED, "passed")


def _other_cell_problems(
    merged: nbformat.NotebookNode, exercises: list[Exercise], cells: dict[str, CellResult], edited: set[str]
) -> list[str]:
    exercise_cells = {e.cell_id for e in exercises} | {e.checker_cell_id for e in exercises}
    problems = []
    for cell in merged.cells:
        result = cells.get(cell.get("id"))
        if cell.id in exercise_cells or result is None or result.kind in ("ok", "skipped"):
            continue
        what = {
            "output": "its output changed",
            "timeout": "it ran past the time limit",
            "exception": f"it raised {result.ename}: {result.evalue}",
        }.get(result.kind, result.message)
        why = " — you edited this cell" if cell.id in edited else ""
        problems.append(f"cell `{_first_line(cell.source)}`: {what}{why}")
    return problems


def check_notebook(
    learner: nbformat.NotebookNode,
    name: str,
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    stop_first: bool = False,
) -> CheckResult:
    """Check an in-memory learner notebook called ``name`` (its file name)."""
    root = repo_root(root)
    solution_path = find_solution(name, learner, root)
    solution = read_notebook(solution_path)
    exercises = validate_solution(solution, solution_path.name)
    merged, edited, notes = merge(learner, solution, exercises)
    with tempfile.TemporaryDirectory(prefix="prenorm-check-") as tmp:
        target = Path(tmp) / solution_path.name
        write_notebook(merged, target)
        n_code = sum(cell.cell_type == "code" for cell in merged.cells)
        run = run_nbval(target, sanitize_file(root), timeout, stop_first, n_code)
    return CheckResult(
        name=name,
        solution=solution_path,
        exercises=[exercise_status(e, run.cells, timeout) for e in exercises],
        other_cells=_other_cell_problems(merged, exercises, run.cells, edited),
        notes=notes,
        run=run,
    )


def check_path(path: Path, root: Path | None = None, timeout: float = DEFAULT_TIMEOUT,
               stop_first: bool = False) -> CheckResult:
    """Check the learner notebook saved at ``path``."""
    return check_notebook(read_notebook(Path(path)), Path(path).name, root, timeout, stop_first)


def format_report(result: CheckResult, verbose: bool = False) -> str:
    """The learner-facing summary (pytest's full output only with ``verbose``)."""
    lines = [f"Checked {result.name} against the course notebook notebooks/{result.solution.name} "
             f"({result.run.seconds:.1f} s)"]
    lines += [f"  {status.line()}" for status in result.exercises]
    if result.other_cells:
        lines.append("Other cells that did not match the course run:")
        lines += [f"  {problem}" for problem in result.other_cells]
    notes = list(result.notes)
    if any(cell.kind == "timeout" for cell in result.run.cells.values()):
        notes.append("a cell was stopped at the time limit; errors in the cells after it may follow from that")
    if notes:
        lines.append("Notes:")
        lines += [f"  - {note}" for note in notes]
    if verbose or (not result.passed and not result.run.cells):
        lines += ["", "pytest/nbval output:", result.run.log.rstrip()]
    done = sum(status.status == PASSED for status in result.exercises)
    verdict = "the notebook passes" if result.passed else "the check fails"
    lines.append(f"{done} of {len(result.exercises)} exercises passed; {verdict}.")
    return "\n".join(lines)
