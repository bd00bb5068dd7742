"""No answer in view: an exercise notebook's outputs and unfolded cells give no exercise away.

The build refuses such a notebook (``prenorm_course.exercises.leaks``); these tests run
it on the course's notebooks and show it fire when a fold is taken away or an answer is
printed near its exercise.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from prenorm_course.exercises.build import exercise_notebook, read_notebook
from prenorm_course.exercises.leaks import ANSWER_TAG, answers_in_view
from prenorm_course.exercises.markers import NotebookError, validate_solution
from prenorm_course.exercises.paths import exercise_path, solution_notebooks, solution_path

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = solution_notebooks(ROOT)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_stored_exercise_notebooks_show_no_answer(path: Path) -> None:
    solution = read_notebook(path)
    stored = read_notebook(exercise_path(ROOT, path))
    assert answers_in_view(stored, solution, validate_solution(solution, path.name)) == []


def _without_fold(name: str, cell_id: str) -> nbformat.NotebookNode:
    solution = read_notebook(solution_path(ROOT, name))
    cell = next(c for c in solution.cells if c.id == cell_id)
    assert ANSWER_TAG in cell.metadata["tags"], "the cell this test unfolds is no longer tagged"
    cell.metadata["tags"].remove(ANSWER_TAG)
    return solution


@pytest.mark.parametrize(("name", "cell_id", "exercise", "what"), [
    ("01_rmsnorm.ipynb", "62342b28", "1.1", "prenorm_lib.functional:rms_norm"),
    ("05_prenorm_vs_postnorm.ipynb", "1a6940fa", "5.1", "pre_norm_forward"),
    ("05_prenorm_vs_postnorm.ipynb", "1a6940fa", "5.2", "post_norm_forward"),
    ("05_prenorm_vs_postnorm.ipynb", "715261b5", "5.3", "diverges, stalls, trains"),
])
def test_build_refuses_an_unfolded_answer(name: str, cell_id: str, exercise: str, what: str) -> None:
    with pytest.raises(NotebookError) as caught:
        exercise_notebook(_without_fold(name, cell_id), name)
    message = str(caught.value)
    assert f"cell {cell_id}" in message and f"Exercise {exercise} " in message and what in message


def test_a_printed_solution_is_refused() -> None:
    """A new cell that prints 5.1's solution lines is seen, wherever it sits."""
    name = "05_prenorm_vs_postnorm.ipynb"
    solution = read_notebook(solution_path(ROOT, name))
    cell = nbformat.v4.new_code_cell("pass")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="h = x + attn(ln1(x))\nreturn h + ffn(ln2(h))\n")]
    solution.cells.append(cell)
    with pytest.raises(NotebookError, match=r"lines of the solution of Exercise 5\.1"):
        exercise_notebook(solution, name)


def test_folded_cells_hide_source_and_outputs() -> None:
    nb, _ = exercise_notebook(read_notebook(solution_path(ROOT, "01_rmsnorm.ipynb")), "01_rmsnorm.ipynb")
    folded = next(c for c in nb.cells if c.id == "62342b28")
    assert folded.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
