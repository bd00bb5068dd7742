"""Check cells carry their checker and arguments in metadata that ``build`` writes (nbgrader's pattern).

``check`` and ``grade`` read it from the course's exercise notebook, never from the
learner's file and never by parsing the check cell's Python; a check cell that lost it
is a clear error that says to rebuild.
"""

import shutil
from pathlib import Path

import pytest

from prenorm_course.exercises.build import read_notebook, write_notebook
from prenorm_course.exercises.check import course_checks
from prenorm_course.exercises.markers import METADATA_KEY, NotebookError, check_calls, validate_solution
from prenorm_course.exercises.paths import exercise_dir, exercise_name, repo_root, solution_notebooks, solution_path

ROOT = repo_root()


def course_copy(tmp_path: Path) -> Path:
    """The solution and exercise notebooks, copied (no learner code runs here)."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("*.png", "*.gif"))
    return tmp_path


@pytest.mark.parametrize("path", solution_notebooks(ROOT), ids=lambda p: p.name)
def test_metadata_names_the_same_check_as_the_check_cell(path):
    solution = read_notebook(path)
    exercises = validate_solution(solution, path.name, check_cells=False)
    assert course_checks(ROOT, exercise_name(path), solution, exercises) == check_calls(solution, exercises, path.name)


def _edited_first_check(tmp_path, edit):
    """A course copy whose Exercise 1.1 check cell had ``edit`` applied to its metadata."""
    root = course_copy(tmp_path)
    path = exercise_dir(root) / "01_rmsnorm.ipynb"
    nb = read_notebook(path)
    solution = read_notebook(solution_path(root, "01_rmsnorm.ipynb"))
    exercises = validate_solution(solution, path.name, check_cells=False)
    for cell in nb.cells:
        if cell.id == exercises[0].checker_cell_id:
            edit(cell.metadata)
    write_notebook(nb, path)
    return root, path.name, solution, exercises


def test_a_check_cell_without_metadata_is_a_clear_error(tmp_path):
    arguments = _edited_first_check(tmp_path, lambda metadata: metadata.pop(METADATA_KEY))
    with pytest.raises(NotebookError, match=r"Exercise 1\.1 has no `prenorm` metadata.*make exercises"):
        course_checks(*arguments)


def test_the_metadata_decides_which_checker_runs(tmp_path):
    """Not the check cell's Python: metadata pointing elsewhere is what the grader follows."""
    arguments = _edited_first_check(
        tmp_path, lambda metadata: metadata[METADATA_KEY].update(check="prenorm_lib.checks.rmsnorm.rms_norm_module"))
    calls = course_checks(*arguments)
    assert calls["1.1"].function == "rms_norm_module"


def test_metadata_naming_something_other_than_a_checker_is_refused(tmp_path):
    arguments = _edited_first_check(tmp_path, lambda metadata: metadata[METADATA_KEY].update(check="os.system"))
    with pytest.raises(NotebookError, match="malformed"):
        course_checks(*arguments)
