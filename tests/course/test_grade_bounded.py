"""One learner cannot stall or blind the class's grading (issue 36, item 3): each road the red team found.

No kernel starts here: ``check_notebook`` is the stand-in of ``test_grade_folder_files`` (a file's
passes are written in its one markdown cell), so each test looks at how the folder is walked
and read, what is held in memory and how the tables are written. Each case failed (or stalled,
or crashed the run) on the grader before these limits.
"""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from test_grade_folder_files import EXERCISES, NAME, _grade_within, graded, notebook_bytes, unescaped  # noqa: F401

from prenorm_course.exercises import grade, tables
from prenorm_course.exercises.check import NotANotebook, parse_learner
from prenorm_course.exercises.limits import LIMITS
from prenorm_course.exercises.paths import solution_path
from prenorm_course.exercises.sandbox import _remove_tree


def test_a_folder_a_thousand_deep_costs_only_its_own_learner(graded, tmp_path: Path):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    (folder / "good").mkdir(parents=True)
    (folder / "good" / NAME).write_bytes(notebook_bytes(3))
    deep = folder / "deep"
    deep.mkdir()
    here = os.getcwd()
    os.chdir(deep)  # 1000 levels of one-letter folders: made relative, each chdir one level down
    try:
        for _ in range(1000):
            os.mkdir("d")
            os.chdir("d")
        Path(NAME).write_bytes(notebook_bytes(3))  # a notebook at the bottom is not searched for
    except OSError:
        os.chdir(here)
        _remove_tree(deep / "d")
        raise
    finally:
        os.chdir(here)
    (deep / NAME).write_bytes(notebook_bytes(2))  # one at the top is graded

    try:
        table = _grade_within(folder, out)
    finally:  # pytest's own clean-up of tmp_path recurses, and would fail on a tree this deep
        _remove_tree(deep / "d")

    assert table["good"] == dict.fromkeys(EXERCISES, "pass")
    assert table["deep"] == {"1.1": "pass", "1.2": "pass", "1.3": "hint"}
    markdown = unescaped((out / "grades.md").read_text())
    assert f"folders more than {LIMITS.folder_depth} levels down were not searched: deep/d/d/d/d/d/d/d" in markdown


def test_three_thousand_files_of_one_learner_leave_the_class_on_time(graded, tmp_path: Path, monkeypatch):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    for learner in ("ann", "zed"):
        (folder / learner).mkdir(parents=True)
        (folder / learner / NAME).write_bytes(notebook_bytes(3))
    for i in range(3000):
        (folder / "many" / f"{i:04d}").mkdir(parents=True)
        (folder / "many" / f"{i:04d}" / NAME).write_bytes(b"x")
    writes = []
    real_write = tables.ClassTable.write
    monkeypatch.setattr(tables.ClassTable, "write", lambda self, out, **kw: (writes.append(1), real_write(self, out,
                                                                                                           **kw)))

    table = _grade_within(folder, out)

    assert table["ann"] == table["zed"] == dict.fromkeys(EXERCISES, "pass")
    assert graded == [NAME, NAME]  # the one-byte files are read, found not notebooks, and never checked
    markdown = unescaped((out / "grades.md").read_text())
    kept = LIMITS.learner_notebooks
    assert f"{3000 - kept} more notebooks not graded (the first {kept}" in markdown
    assert len(writes) <= 10, len(writes)  # the tables were written a few times, not after each of 32 files


def test_the_tables_are_written_in_time_linear_in_the_class(graded, tmp_path: Path):  # noqa: F811
    """Twice the class, about twice the time (a same-run ratio): one rewrite after every file was quadratic."""
    def seconds(learners: int) -> float:
        folder = tmp_path / f"class{learners}"
        for i in range(learners):
            (folder / f"l{i:05d}").mkdir(parents=True)
            (folder / f"l{i:05d}" / NAME).write_bytes(b"not json")
        start = time.perf_counter()
        _grade_within(folder, tmp_path / f"grades{learners}", seconds=300)
        return time.perf_counter() - start

    small, large = seconds(1000), seconds(3000)
    assert large < 6 * small, (small, large)  # linear: ~3×; rewriting after each file: ~9×


def test_a_learners_files_together_are_bounded_and_never_all_in_memory(graded, tmp_path: Path, monkeypatch):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    (folder / "sparse").mkdir(parents=True)
    for i in range(20):  # twenty sparse 99 MB files: no disk, but reading them all took the grader to 2.4 GB
        with open(folder / "sparse" / f"{i:02d}_{NAME}", "wb") as f:
            f.truncate(99 * 2**20)
    (folder / "good").mkdir()
    (folder / "good" / NAME).write_bytes(notebook_bytes(3))
    read = []
    real = grade.read_submission
    monkeypatch.setattr(grade, "read_submission", lambda path, limits: (read.append(path.name), real(path, limits))[1])

    table = _grade_within(folder, out)

    assert table["good"] == dict.fromkeys(EXERCISES, "pass")
    assert len([name for name in read if name != NAME]) == LIMITS.learner_bytes // (99 * 2**20)  # 2 of 20 read
    markdown = unescaped((out / "grades.md").read_text())
    assert f"not read: this learner's files pass {LIMITS.learner_bytes // 2**20} MB in all" in markdown


def test_a_million_empty_cells_are_refused_before_they_take_the_memory():
    cell = json.dumps({"cell_type": "code", "id": "x", "source": "", "metadata": {}, "outputs": [],
                       "execution_count": None}).encode()
    data = b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [' + b",".join([cell] * 1_000_000) + b"]}"
    tracemalloc.start()
    try:
        with pytest.raises(NotANotebook, match=f"more than {LIMITS.notebook_json_objects:,} JSON objects"):
            parse_learner(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(data) + 100 * 2**20, peak / 2**20  # the text itself, decoded; not a million cells
    small = replace(LIMITS, notebook_json_objects=10)
    course = solution_path(Path(__file__).parents[2], "01_rmsnorm.ipynb")
    parse_learner(course.read_bytes())  # a course notebook is far inside the limit
    with pytest.raises(NotANotebook):
        parse_learner(course.read_bytes(), small)


def test_the_folder_walk_needs_no_recursion(graded, tmp_path: Path):  # noqa: F811
    """The walk keeps its own queue: below Python's recursion limit it finds what os.walk found."""
    folder = tmp_path / "class"
    (folder / "a" / "b" / "c").mkdir(parents=True)
    (folder / "a" / "b" / "c" / NAME).write_bytes(b"{}")
    (folder / "a" / ".ipynb_checkpoints").mkdir()
    (folder / "a" / ".ipynb_checkpoints" / NAME).write_bytes(b"{}")
    (folder / "flat.ipynb").write_bytes(b"{}")
    (folder / "collection.json").write_text("{}")
    found = grade.walk_class(folder)
    assert {k: [p.relative_to(folder).as_posix() for p in v] for k, v in found.notebooks.items()} == {
        "a": [f"a/b/c/{NAME}"], "flat": ["flat.ipynb"]}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(60)  # a recursive walk of three levels inside pytest would not get far
    try:
        assert grade.walk_class(folder).notebooks.keys() == {"a", "flat"}
    finally:
        sys.setrecursionlimit(limit)
