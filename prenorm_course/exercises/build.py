"""Generate the exercise notebooks from the solution notebooks.

These things change; cells, ids and every other stored output stay as the solution
run left them (the figures and printed checks a learner reads before running):

* the title heading loses its mark `` — solutions`` (a solution notebook's title must end with it, so
  that the two versions differ in JupyterLab by title as by file name; see :mod:`paths`);
* a Markdown link to another solution notebook (``](02_swiglu_silu_relu_solutions.ipynb)``) leads to
  that notebook's exercise version (``](02_swiglu_silu_relu.ipynb)``), which sits beside it;
* each solution region becomes a placeholder (see :mod:`markers`);
* the exercise cells and their check cells store what running the *unfilled* notebook
  prints there: nothing under a stub, and under each check the one line "Exercise 1.1 is
  not done yet — fill in `my_rms_norm` above". A "passed" line under an unfilled stub
  would be an output the learner's code has not earned. ``make nbval`` runs the exercise
  notebooks too, which proves these outputs are what a fresh Run All gives;
* ``# NBVAL_...`` comment lines become cell tags (learners never see them);
* a cell tagged ``uses-exercises`` (it runs the learner's classes, e.g. trains their model)
  stores no output and gets the tag ``nbval-ignore-output``: unfilled, it prints that the
  exercises are not done; filled, it shows the learner's own results;
* a cell tagged ``answer`` (it shows the library's code for an exercise, or the runs that
  answer a prediction) is folded, and a notebook with an answer still in view is refused
  (:mod:`leaks`);
* each check cell gets ``metadata.prenorm``: which checker it calls, on which of the
  exercise's names, and what the learner's kernel runs instead of the call
  (nbgrader's pattern). ``check`` and ``grade`` read this from the course's exercise
  notebook instead of parsing the check cell's Python.

Output is written exactly as JupyterLab writes (nbformat, indent 1, trailing
newline), which makes rebuilding byte-stable and lets ``stale_notebooks`` compare bytes.
"""

from __future__ import annotations

import copy
import filecmp
import re
import tempfile
from pathlib import Path

import nbformat

from prenorm_course.exercises.leaks import ANSWER_TAG, answers_in_view, fold
from prenorm_course.exercises.markers import (
    METADATA_KEY,
    USES_EXERCISES_TAG,
    VALUE_PLACEHOLDER_RE,
    CheckCall,
    Exercise,
    NotebookError,
    check_calls,
    exercise_header,
    has_placeholder,
    markers_to_tags,
    scaffold_source,
    validate_solution,
)
from prenorm_course.exercises.paths import (
    SOLUTION_TITLE_MARK,
    exercise_dir,
    exercise_name,
    solution_name,
    solution_notebooks,
)
from prenorm_lib.checks.core import NotDone, todo

IGNORE_OUTPUT_TAG = "nbval-ignore-output"
# a Markdown link to a solution notebook beside this one, "](02_name_solutions.ipynb" or "…ipynb#part"
SOLUTION_LINK = re.compile(r"\]\((\d\d_[\w-]+\.ipynb)(?=[#)])")


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read without version conversion (a conversion would invent new cell ids)."""
    with open(path, encoding="utf-8") as f:
        nb = nbformat.read(f, as_version=nbformat.NO_CONVERT)
    if nb.nbformat != 4 or nb.nbformat_minor < 5:
        raise NotebookError(
            f"{path.name}: nbformat {nb.nbformat}.{nb.nbformat_minor} has no cell ids; "
            "open and save it in JupyterLab (nbformat 4.5 or later)"
        )
    return nb


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write as Jupyter does: nbformat's JSON (indent 1, sorted keys), trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        nbformat.write(nb, f)


def not_done_line(exercise: Exercise, call: CheckCall, scaffold: str) -> str:
    """What the check cell prints when the learner has not touched the exercise yet.

    The check cell hands the checker the names the exercise cell defines: functions and
    classes whose body is still ``raise NotImplementedError`` and answers still ``...``.
    The line comes from the checkers' own wording (``checks.core``), given stand-ins
    for those names.
    """
    placeholders = {m.group(1) for line in scaffold.split("\n") if (m := VALUE_PLACEHOLDER_RE.match(line))}

    def stand_in(name: str):
        if name in placeholders:
            return ...
        function = lambda: None  # only its name is read
        function.__name__ = name
        return function

    return f"{NotDone(exercise.id, todo(stand_in(name) for name in call.learner_names))}\n"


def title_line(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int] | None:
    """The first Markdown cell and the index of its title heading (its first ``# `` line); None if it has none."""
    first = next((cell for cell in nb.cells if cell.cell_type == "markdown"), None)
    lines = first.source.split("\n") if first is not None else []
    index = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
    return None if index is None else (first, index)


def is_marked(nb: nbformat.NotebookNode) -> bool:
    """True if ``nb``'s title heading ends with the solutions mark."""
    found = title_line(nb)
    return found is not None and found[0].source.split("\n")[found[1]].rstrip().endswith(SOLUTION_TITLE_MARK)


def learners_names(nb: nbformat.NotebookNode) -> None:
    """In place: the title heading without the solutions mark, and links to solution notebooks led to the
    exercise notebooks of the same names (what a learner's copy says)."""
    if is_marked(nb):
        cell, index = title_line(nb)
        lines = cell.source.split("\n")
        lines[index] = lines[index].rstrip()[:-len(SOLUTION_TITLE_MARK)]
        cell.source = "\n".join(lines)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = SOLUTION_LINK.sub(lambda m: f"]({exercise_name(m.group(1))}", cell.source)


def exercise_notebook(
    solution: nbformat.NotebookNode, name: str
) -> tuple[nbformat.NotebookNode, list[Exercise]]:
    """The exercise version of one solution notebook, and its exercises."""
    exercises = validate_solution(solution, name)
    calls = check_calls(solution, exercises, name)
    by_cell = {e.cell_id: e for e in exercises}
    by_checker = {e.checker_cell_id: e for e in exercises}
    nb = copy.deepcopy(solution)
    learners_names(nb)
    scaffolds = {}
    for cell in nb.cells:
        exercise = by_cell.get(cell.id)
        if exercise is not None:
            cell.source = scaffolds[exercise.id] = scaffold_source(cell.source, exercise.id, exercise.title)
            cell.outputs = []  # a stub defines names and prints nothing
        exercise = by_checker.get(cell.id)
        if exercise is not None:
            line = not_done_line(exercise, calls[exercise.id], scaffolds[exercise.id])
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line)]
            cell.metadata[METADATA_KEY] = calls[exercise.id].metadata(exercise.id)
        markers_to_tags(cell)
        tags = cell.metadata.get("tags", [])
        if USES_EXERCISES_TAG in tags:
            cell.outputs = []
            cell.execution_count = None
            if IGNORE_OUTPUT_TAG not in tags:
                cell.metadata["tags"] = [*tags, IGNORE_OUTPUT_TAG]
        if ANSWER_TAG in cell.metadata.get("tags", []):
            fold(cell)
    in_view = answers_in_view(nb, solution, exercises)
    if in_view:
        raise NotebookError(f"{name}: the exercise version would show answers — tag each such cell "
                            f"'{ANSWER_TAG}' to fold it, or move it: " + "; ".join(in_view))
    return nb, exercises


def has_learner_work(path: Path) -> bool:
    """True if an exercise cell in ``path`` lost its placeholder, i.e. someone filled it in.

    A stale generated notebook still has every placeholder; a learner's working
    copy does not, and rebuilding would silently erase their answers.
    """
    nb = read_notebook(path)
    return any(
        cell.cell_type == "code" and exercise_header(cell.source) and not has_placeholder(cell.source)
        for cell in nb.cells
    )


def build_all(root: Path, out_dir: Path | None = None, force: bool = False) -> list[Path]:
    """Write the exercise version of every solution notebook into ``out_dir``.

    Exercise ids must be unique across the whole course, not just per notebook.
    An exercise notebook holding a learner's answers is not overwritten unless
    ``force`` is set.
    """
    out_dir = exercise_dir(root) if out_dir is None else out_dir
    owners: dict[str, str] = {}
    written = []
    for path in solution_notebooks(root):
        solution = read_notebook(path)
        if not is_marked(solution):
            raise NotebookError(f"{path.name}: its title heading (the first '# ' line) must end with "
                                f"'{SOLUTION_TITLE_MARK.strip()}', which tells a learner the answers are open; "
                                "the exercise version is built without it")
        nb, exercises = exercise_notebook(solution, path.name)
        for exercise in exercises:
            if exercise.id in owners:
                raise NotebookError(
                    f"Exercise {exercise.id} appears in both {owners[exercise.id]} and {path.name}"
                )
            owners[exercise.id] = path.name
        target = out_dir / exercise_name(path)
        if not force and target.is_file() and has_learner_work(target):
            raise NotebookError(
                f"{target.name} in {out_dir.name}/ has filled-in exercises (your work?); copy it elsewhere "
                "first, or rebuild with --force to overwrite it"
            )
        write_notebook(nb, target)
        written.append(target)
    return written


def stale_notebooks(root: Path) -> list[str]:
    """What is out of date in notebooks/exercises/, one message per file (empty if nothing)."""
    problems = []
    current = exercise_dir(root)
    with tempfile.TemporaryDirectory(prefix="prenorm-build-") as tmp:
        fresh = {p.name: p for p in build_all(root, Path(tmp))}
        for name, path in fresh.items():
            existing = current / name
            if not existing.is_file():
                problems.append(f"notebooks/exercises/{name} is missing")
            elif not filecmp.cmp(path, existing, shallow=False):
                problems.append(f"notebooks/exercises/{name} is stale (differs from a fresh build)")
    if current.is_dir():
        for orphan in sorted(set(p.name for p in current.glob("*.ipynb")) - set(fresh)):
            problems.append(f"notebooks/exercises/{orphan} has no solution notebook notebooks/{solution_name(orphan)}")
    return problems
