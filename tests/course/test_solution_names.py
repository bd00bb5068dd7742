"""A learner can tell the solutions from the exercises: by the file name (JupyterLab's tab) and by the title.

The solution notebooks are ``notebooks/NN_<name>_solutions.ipynb`` and their titles end with
" — solutions"; the exercise notebooks keep ``notebooks/exercises/NN_<name>.ipynb`` (learners'
homes, pulls and grading depend on them) and are built with the mark stripped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prenorm_course.exercises.build import build_all, read_notebook, title_line, write_notebook
from prenorm_course.exercises.markers import NotebookError
from prenorm_course.exercises.paths import (
    SOLUTION_TITLE_MARK,
    exercise_name,
    exercise_notebooks,
    exercise_path,
    repo_root,
    solution_name,
    solution_notebooks,
    solution_path,
)

ROOT = repo_root(Path(__file__).resolve().parents[2])
SOLUTIONS = solution_notebooks(ROOT)
LINK = re.compile(r"\]\(([^)#:]+\.ipynb)(?:#[^)]*)?\)")


def title(path: Path) -> str:
    nb = read_notebook(path)
    found = title_line(nb)
    assert found is not None, f"{path.name}: no title heading"
    cell, index = found
    return cell.source.split("\n")[index]


def test_the_names_map_one_to_one():
    assert [p.name[:2] for p in SOLUTIONS] == ["01", "02", "03", "04", "05", "06"]
    assert [exercise_path(ROOT, p) for p in SOLUTIONS] == exercise_notebooks(ROOT)
    for path in SOLUTIONS:
        assert path.name == solution_name(exercise_name(path)) and solution_path(ROOT, exercise_name(path)) == path
    assert exercise_name("01_rmsnorm.ipynb") == "01_rmsnorm.ipynb"  # an exercise name is its own
    assert solution_name("01_rmsnorm_solutions.ipynb") == "01_rmsnorm_solutions.ipynb"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name[:2])
def test_the_lab_tabs_and_titles_tell_the_two_versions_apart(path: Path):
    exercise = exercise_path(ROOT, path)
    # JupyterLab names a tab after the file: the two tabs now read differently
    assert path.name != exercise.name and path.name.endswith("_solutions.ipynb"), (path.name, exercise.name)
    assert title(path).endswith(SOLUTION_TITLE_MARK), title(path)
    assert SOLUTION_TITLE_MARK.strip() not in title(exercise), title(exercise)
    assert title(path) == title(exercise) + SOLUTION_TITLE_MARK


@pytest.mark.parametrize("path", [*SOLUTIONS, *exercise_notebooks(ROOT)], ids=lambda p: p.parent.name + "/" + p.name)
def test_links_to_other_notebooks_lead_to_files_that_exist(path: Path):
    for cell in read_notebook(path).cells:
        if cell.cell_type == "markdown":
            for target in LINK.findall(cell.source):
                assert (path.parent / target).is_file(), f"{path.name} links to {target}, which is not there"
                assert (exercise_name(target) == target) == (path.parent.name == "exercises"), \
                    f"{path.name} links to {target}: a solution should lead to a solution, an exercise to an exercise"


def test_the_build_refuses_a_solution_notebook_without_the_mark(tmp_path: Path):
    nb = read_notebook(SOLUTIONS[0])
    cell, index = title_line(nb)
    lines = cell.source.split("\n")
    lines[index] = lines[index].removesuffix(SOLUTION_TITLE_MARK)
    cell.source = "\n".join(lines)
    write_notebook(nb, tmp_path / "notebooks" / SOLUTIONS[0].name)
    with pytest.raises(NotebookError, match="must end with '— solutions'"):
        build_all(tmp_path, tmp_path / "out")
    cell.source = cell.source.replace(lines[index], lines[index] + SOLUTION_TITLE_MARK)
    write_notebook(nb, tmp_path / "notebooks" / SOLUTIONS[0].name)
    built = build_all(tmp_path, tmp_path / "out")
    assert [p.name for p in built] == [exercise_name(SOLUTIONS[0])]
    assert title(built[0]) == title(SOLUTIONS[0]).removesuffix(SOLUTION_TITLE_MARK)
