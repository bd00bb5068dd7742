"""A class folder survives any file in it: what ``grade`` does with odd files, copies and a killed run.

No kernel starts here: ``check_notebook`` is replaced by a stand-in that grades a file by
the number of passes written in its one markdown cell, so each test looks only at how
the folder is read, which copy counts and when the tables are on disk.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from prenorm_course.exercises import grade
from prenorm_course.exercises.check import CheckResult, ExerciseStatus, Status
from prenorm_course.exercises.markers import Exercise
from prenorm_course.exercises.sandbox import TRUSTED, Confinement

NAME = "01_rmsnorm.ipynb"
EXERCISES = ("1.1", "1.2", "1.3")


def unescaped(markdown: str) -> str:
    """grades.md as it reads rendered: learner text in it is escaped (``inert.markdown``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def notebook_bytes(passes: int) -> bytes:
    cell = {"cell_type": "markdown", "id": "m", "metadata": {}, "source": f"passes={passes}"}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}).encode()


def fake_check(graded: list[str]):
    def check_notebook(nb, name, root, timeout, **options):
        passes = int(nb.cells[0].source.split("=")[1])
        graded.append(name)
        statuses = [ExerciseStatus(Exercise(e, f"exercise {e}", "c", "d"), Status.PASSED if i < passes else Status.HINT,
                                   "passed" if i < passes else "hint — a hint") for i, e in enumerate(EXERCISES)]
        return CheckResult(name=name, solution=Path(NAME), exercises=statuses, isolation="as a test")
    return check_notebook


@pytest.fixture
def graded(monkeypatch) -> list[str]:
    names: list[str] = []
    monkeypatch.setattr(grade, "confinement", lambda trusted, limits: Confinement(TRUSTED, "as a test"))
    monkeypatch.setattr(grade.CourseFiles, "take", classmethod(lambda cls, root: None))
    monkeypatch.setattr(grade, "check_notebook", fake_check(names))
    return names


def _grade_within(folder: Path, out: Path, seconds: float = 30) -> dict:
    """grade_folder in a thread: a grader that blocks fails the test instead of hanging it."""
    found: dict = {}
    worker = threading.Thread(target=lambda: found.update(
        table=grade.grade_folder(folder, out, jobs=1, progress=lambda _: None)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "grading blocked on a file of the folder"
    return found["table"]


def test_a_named_pipe_and_a_huge_file_cost_only_their_own_rows(graded, tmp_path: Path):
    folder, out = tmp_path / "class", tmp_path / "grades"
    for learner in ("pipe", "huge", "good"):
        (folder / learner).mkdir(parents=True)
    os.mkfifo(folder / "pipe" / NAME)  # opened for reading, it would wait for a writer forever
    with open(folder / "huge" / NAME, "wb") as f:  # 2 GiB, sparse: no disk, but a read would take the memory
        f.truncate(2 * 2**30)
    (folder / "good" / NAME).write_bytes(notebook_bytes(3))

    table = _grade_within(folder, out)

    assert table["good"] == dict.fromkeys(EXERCISES, "pass")
    assert table["pipe"] == table["huge"] == dict.fromkeys(EXERCISES, "not a notebook")
    markdown = unescaped((out / "grades.md").read_text())
    assert f"pipe/{NAME}: not a notebook: it is a named pipe, not a file" in markdown
    assert f"huge/{NAME}: not a notebook: the file is larger than 100 MB (2048 MB); it was not read" in markdown
    assert graded == [NAME]  # only the good file reached the checker


def test_grades_decided_are_on_disk_before_the_next_file_is_graded(graded, tmp_path: Path, monkeypatch):
    folder, out = tmp_path / "class", tmp_path / "grades"
    (folder / "ann").mkdir(parents=True)
    (folder / "ann" / NAME).write_bytes(notebook_bytes(2))
    (folder / "zed").mkdir()
    (folder / "zed" / NAME).write_bytes(notebook_bytes(1))
    check = fake_check(graded)
    seen: list[str] = []

    def killed_while_grading_zed(nb, name, root, timeout, **options):
        if graded:  # the second file: the grader is killed here (a time limit, an out-of-memory kill)
            seen.append((out / "grades.md").read_text() if (out / "grades.md").exists() else "")
            raise KeyboardInterrupt
        return check(nb, name, root, timeout, **options)

    monkeypatch.setattr(grade, "check_notebook", killed_while_grading_zed)
    with pytest.raises(KeyboardInterrupt):
        grade.grade_folder(folder, out, jobs=1, progress=lambda _: None)

    assert re.search(r"^\| ann \| pass \| pass \| hint \| 2/3 \|$", seen[0], flags=re.MULTILINE), seen


def test_two_copies_of_a_notebook_say_which_one_counted_and_why(graded, tmp_path: Path):
    folder, out = tmp_path / "class", tmp_path / "grades"
    (folder / "alice" / "retry").mkdir(parents=True)
    (folder / "alice" / NAME).write_bytes(notebook_bytes(1))
    (folder / "alice" / "retry" / NAME).write_bytes(notebook_bytes(2))
    (folder / "bob" / "b").mkdir(parents=True)
    (folder / "bob" / NAME).write_bytes(notebook_bytes(2))
    (folder / "bob" / "b" / NAME).write_bytes(notebook_bytes(2))

    table = _grade_within(folder, out)

    assert table["alice"] == {"1.1": "pass", "1.2": "pass", "1.3": "hint"}
    markdown = unescaped((out / "grades.md").read_text())
    assert (f"2 copies of {NAME}: alice/retry/{NAME} (2 passed) counted, not alice/{NAME} (1 passed) — "
            f"{grade.COPY_RULE}") in markdown
    assert f"2 copies of {NAME}: bob/{NAME} (2 passed) counted, not bob/b/{NAME} (2 passed)" in markdown
    assert markdown.count("Exercise 1.3: hint — a hint") == 2  # the details of the copies counted, once each
