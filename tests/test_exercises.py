"""The exercise tool on a small synthetic course (``09_double.ipynb``) built in tmp_path.

Build, stale detection and marker errors run without a kernel. The nbval round
trips (unfilled fails at Exercise 9.1, a wrong answer gets its hint, the
filled-in notebook passes, a learner's endless loop times out) start real
kernels, a few seconds each, and are marked slow.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from prenorm_lib.exercises.__main__ import main
from prenorm_lib.exercises.build import build_all, read_notebook, stale_notebooks, write_notebook
from prenorm_lib.exercises.check import check_path, format_report
from prenorm_lib.exercises.grade import grade_folder
from prenorm_lib.exercises.markers import NotebookError, fill_scaffold, solution_regions
from prenorm_lib.exercises.verify import filled_in, verify

NAME = "09_double.ipynb"

# The notebook defines its own tiny checkers: a kernel that imports torch needs seconds
# per start-up, which would make the short per-cell timeouts below flaky on a busy machine.
# The exercise tool recognises a hint by the exception's name and its "Exercise N.M: " prefix.
CHECKERS = '''\
class Hint(AssertionError):
    pass

def check_double(fn):
    try:
        got = fn(3)
    except NotImplementedError:
        raise
    except Exception as exc:
        raise Hint(f"Exercise 9.1: your code raised {type(exc).__name__}: {exc}") from None
    if got != 6:
        raise Hint("Exercise 9.1: double(3) should be 6 — did you add instead of multiply?")
    print("Exercise 9.1 passed: double(3) == 6")

def check_answer(answer):
    if answer != "six":
        raise Hint("Exercise 9.2: not quite — 2 * 3 is six")
    print("Exercise 9.2 passed: six")'''

EXERCISE_1 = '''\
# Exercise 9.1: double a number
def double(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION'''

EXERCISE_2 = '''\
# Exercise 9.2: predict double(3)
### BEGIN SOLUTION
answer = "six"
### END SOLUTION'''


def _stdout(text: str):
    return new_output("stream", name="stdout", text=text)


def _code(cell_id: str, source: str, count: int, outputs=()):
    cell = new_code_cell(source, id=cell_id, execution_count=count)
    cell.outputs = list(outputs)
    return cell


def solution_notebook() -> nbformat.NotebookNode:
    """A stored, fully executed solution notebook (outputs written as a run would)."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Doubling", id="intro"),
            _code("setup", 'print("setup ok")', 1, [_stdout("setup ok\n")]),
            _code("checkers", CHECKERS, 2),
            _code("ex1", EXERCISE_1, 3),
            _code("check1", "check_double(double)", 4, [_stdout("Exercise 9.1 passed: double(3) == 6\n")]),
            _code("ex2", EXERCISE_2, 5),
            _code("check2", "check_answer(answer)", 6, [_stdout("Exercise 9.2 passed: six\n")]),
            _code("after", "print(1 + 1)", 7, [_stdout("2\n")]),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nb.nbformat_minor = 5
    return nb


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A course root: notebooks/09_double.ipynb and a minimal sanitize file."""
    root = tmp_path / "course"
    write_notebook(solution_notebook(), root / "notebooks" / NAME)
    (root / "tests").mkdir()
    (root / "tests" / "nbval_sanitize.cfg").write_text(
        "[object addresses]\nregex: (<[\\w.]+ (?:object )?at )0x[0-9a-fA-F]+>\nreplace: \\1ADDR>\n"
    )
    return root


def learner_copy(root: Path, folder: Path, edits: dict[str, str], name: str = NAME) -> Path:
    """The built exercise notebook with some cells' sources replaced, as a learner would save it."""
    nb = read_notebook(root / "notebooks" / "exercises" / NAME)
    for cell in nb.cells:
        if cell.id in edits:
            cell.source = edits[cell.id]
    path = folder / name
    write_notebook(nb, path)
    return path


# --- build ---------------------------------------------------------------------------


def test_build_writes_scaffold_and_keeps_everything_else(course: Path):
    (target,) = build_all(course)
    assert target == course / "notebooks" / "exercises" / NAME
    solution, exercise = read_notebook(course / "notebooks" / NAME), read_notebook(target)
    assert [c.id for c in exercise.cells] == [c.id for c in solution.cells]
    assert [c.get("outputs") for c in exercise.cells] == [c.get("outputs") for c in solution.cells]
    assert exercise.metadata == solution.metadata
    by_id = {c.id: c.source for c in exercise.cells}
    assert by_id["ex1"] == (
        "# Exercise 9.1: double a number\ndef double(x):\n"
        '    # YOUR CODE HERE\n    raise NotImplementedError("Exercise 9.1: double a number")'
    )
    assert by_id["ex2"].endswith('# YOUR CODE HERE\nraise NotImplementedError("Exercise 9.2: predict double(3)")')
    assert "BEGIN SOLUTION" not in target.read_text() and "2 * x" not in target.read_text()
    text = target.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n "cells": [\n  {\n')


def test_build_is_idempotent_and_detects_stale(course: Path):
    (target,) = build_all(course)
    first = target.read_bytes()
    build_all(course)
    assert target.read_bytes() == first
    assert stale_notebooks(course) == []
    assert main(["--root", str(course), "build", "--check"]) == 0

    target.write_bytes(first.replace(b"double a number", b"double a numbr"))
    assert stale_notebooks(course) == [f"notebooks/exercises/{NAME} is stale (differs from a fresh build)"]
    assert main(["--root", str(course), "build", "--check"]) == 1
    target.unlink()
    assert "is missing" in stale_notebooks(course)[0]


def test_build_does_not_overwrite_filled_in_work(course: Path):
    (target,) = build_all(course)
    learner_copy(course, target.parent, {"ex1": "# Exercise 9.1: double a number\ndef double(x):\n    return x * 2"})
    with pytest.raises(NotebookError, match="has filled-in exercises"):
        build_all(course)
    assert "return x * 2" in target.read_text()
    assert main(["--root", str(course), "build", "--force"]) == 0
    assert "return x * 2" not in target.read_text()


@pytest.mark.parametrize(
    ("cell_id", "source", "message"),
    [
        ("setup", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "marker outside an exercise cell"),
        ("ex1", "# Exercise 9.1: t\n### BEGIN SOLUTION\nx = 1", "never closed"),
        ("ex1", "# Exercise 9.1: t\nx = 1\n### END SOLUTION", "without a ### BEGIN SOLUTION"),
        ("ex1", "# Exercise 9.1: t\n### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
        ("ex1", "# Exercise 9.1: t\nx = 1", "has no ### BEGIN SOLUTION region"),
        ("ex2", "# Exercise 9.1: again\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "duplicate exercise id 9.1"),
    ],
)
def test_build_rejects_bad_markers(course: Path, cell_id: str, source: str, message: str):
    path = course / "notebooks" / NAME
    nb = read_notebook(path)
    next(c for c in nb.cells if c.id == cell_id).source = source
    write_notebook(nb, path)
    with pytest.raises(NotebookError, match=re.escape(message)):
        build_all(course)
    assert main(["--root", str(course), "build"]) == 2


def test_exercise_without_checker_cell_is_an_error(course: Path):
    path = course / "notebooks" / NAME
    nb = read_notebook(path)
    nb.cells = [c for c in nb.cells if c.id not in ("check2", "after")]
    write_notebook(nb, path)
    with pytest.raises(NotebookError, match=r"Exercise 9\.2 is not followed by a checker"):
        build_all(course)


def test_fill_scaffold_restores_the_solution_without_markers(course: Path):
    build_all(course)
    solution = read_notebook(course / "notebooks" / NAME)
    scaffold = read_notebook(course / "notebooks" / "exercises" / NAME)
    filled = {c.id: c.source for c in filled_in(scaffold, solution).cells}
    assert filled["ex1"] == "# Exercise 9.1: double a number\ndef double(x):\n    return 2 * x"
    with pytest.raises(NotebookError, match=r"1 solution regions but 0 placeholders"):
        fill_scaffold("x = 1", solution_regions(EXERCISE_1, "t"), "9.1")


# --- check, verify and grade with real nbval runs -------------------------------------


@pytest.mark.slow
def test_check_reports_hint_not_done_and_changed_cells(course: Path, tmp_path: Path, capsys):
    build_all(course)
    learner = learner_copy(
        course,
        tmp_path / "learner",
        {
            "ex1": "# Exercise 9.1: double a number\ndef double(x):\n    return x + 2",
            "check1": "# NBVAL_SKIP\npass",  # editing a check cell must not make it pass
            "after": "print(1 + 2)",
        },
    )
    nb = read_notebook(learner)
    nb.cells.append(new_code_cell("scratch = 1", id="mine"))
    write_notebook(nb, learner)

    result = check_path(learner, course, timeout=30)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["9.1"] == ("hint", "hint — double(3) should be 6 — did you add instead of multiply?")
    assert statuses["9.2"] == ("not done", "not done yet")
    assert not result.passed
    assert result.other_cells == ["cell `print(1 + 2)`: its output changed — you edited this cell"]
    report = format_report(result)
    assert "Exercise 9.1 (double a number): hint — double(3) should be 6" in report
    assert "Exercise 9.2 (predict double(3)): not done yet" in report
    assert "you edited the check cell after Exercise 9.1" in report
    assert "you added 1 code cell(s) (`scratch = 1`)" in report
    assert "Traceback" not in report
    assert report.endswith("0 of 2 exercises passed; the check fails.")


@pytest.mark.slow
def test_verify_unfilled_fails_at_first_exercise_and_filled_passes(course: Path):
    build_all(course)
    lines: list[str] = []
    assert verify(course, timeout=30, emit=lines.append)
    assert lines[0].startswith(f"ok    {NAME}: unfilled stops at Exercise 9.1, filled-in passes (2 exercises")
    assert lines[-1] == "1 passed, 0 failed"

    # A notebook whose unfilled exercise does not fail is caught (here: 9.1's check is gone).
    path = course / "notebooks" / NAME
    nb = read_notebook(path)
    next(c for c in nb.cells if c.id == "check1").source = "print('Exercise 9.1 passed: double(3) == 6')"
    write_notebook(nb, path)
    build_all(course)
    lines.clear()
    assert not verify(course, timeout=30, emit=lines.append)
    assert lines[-1] == "0 passed, 1 failed"


def test_verify_reports_stale_notebook_without_running_it(course: Path):
    lines: list[str] = []
    assert not verify(course, emit=lines.append)
    assert lines == [f"FAIL  notebooks/exercises/{NAME} is missing — run `python -m prenorm_lib.exercises build`",
                     "0 passed, 1 failed"]


@pytest.mark.slow
def test_grade_writes_table_with_pass_and_timeout(course: Path, tmp_path: Path):
    build_all(course)
    submissions = tmp_path / "submissions"
    solution = read_notebook(course / "notebooks" / NAME)
    scaffold = read_notebook(course / "notebooks" / "exercises" / NAME)
    write_notebook(filled_in(scaffold, solution), submissions / "alice.ipynb")  # renamed: matched by cell ids
    learner_copy(course, submissions / "bob", {
        "ex1": "# Exercise 9.1: double a number\ndef double(x):\n    while True:\n        pass",
        "ex2": '# Exercise 9.2: predict double(3)\nanswer = "nine"',
    })

    table = grade_folder(submissions, root=course, timeout=5, progress=lambda _: None)
    assert table == {"alice": {"9.1": "pass", "9.2": "pass"}, "bob": {"9.1": "timeout", "9.2": "hint"}}
    with open(submissions / "grades.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["learner", "9.1", "9.2", "passed"], ["alice", "pass", "pass", "2/2"],
                    ["bob", "timeout", "hint", "0/2"]]
    markdown = (submissions / "grades.md").read_text()
    assert "| bob | timeout | hint | 0/2 |" in markdown
    assert "**bob** — Exercise 9.2: hint — not quite — 2 * 3 is six" in markdown


def test_stored_notebook_is_valid_json_with_ids(course: Path):
    data = json.loads((course / "notebooks" / NAME).read_text())
    assert data["nbformat_minor"] == 5 and all("id" in c for c in data["cells"])


def test_check_cli_rejects_a_foreign_notebook(course: Path, tmp_path: Path, capsys):
    foreign = new_notebook(cells=[new_code_cell("x = 1", id="elsewhere")])
    foreign.nbformat_minor = 5
    write_notebook(foreign, tmp_path / "notes.ipynb")
    assert main(["--root", str(course), "check", str(tmp_path / "notes.ipynb")]) == 2
    assert "cannot tell which course notebook this is" in capsys.readouterr().err
