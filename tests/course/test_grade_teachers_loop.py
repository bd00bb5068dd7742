"""After class: numeric grades for an LMS, a regrade in place, feedback per learner, late work (issue 35, item 5).

The grading side of the teacher's loop, through ``grade`` (its checker the stand-in of
``test_grade_folder_files``, which grades a file by the passes written in it) and, at the
end, through ``make grade`` as a teacher types it.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
from test_grade_folder_files import EXERCISES, NAME, _grade_within, graded, notebook_bytes, unescaped  # noqa: F401

from prenorm_course.exercises import grade
from prenorm_course.exercises.paths import repo_root

OTHER = "02_swiglu_silu_relu.ipynb"


def _csv(out: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}


def _class(folder: Path, passes: dict[str, int]) -> None:
    for learner, n in passes.items():
        (folder / learner).mkdir(parents=True, exist_ok=True)
        (folder / learner / NAME).write_bytes(notebook_bytes(n))


def test_grades_csv_has_points_maximum_and_percentage_per_notebook_as_numbers(graded, tmp_path: Path):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    _class(folder, {"alice": 3, "bob": 1})
    (folder / "carol").mkdir()
    (folder / "carol" / NAME).write_bytes(b"not a notebook")
    _grade_within(folder, out)
    header, rows = _csv(out)
    assert header == ["learner", *EXERCISES, "01_rmsnorm points", "01_rmsnorm max", "01_rmsnorm percent",
                      "points", "max", "percent", "notes"]
    assert [rows["alice"][c] for c in ("1.1", "1.2", "1.3")] == ["pass", "pass", "pass"]  # the status columns stay
    assert [(rows[k]["01_rmsnorm points"], rows[k]["01_rmsnorm max"], rows[k]["01_rmsnorm percent"])
            for k in ("alice", "bob", "carol")] == [("3", "3", "100.0"), ("1", "3", "33.3"), ("0", "3", "0.0")]
    for row in rows.values():  # an LMS reads these as numbers
        float(row["points"]), float(row["max"]), float(row["percent"])


def test_regrading_one_learner_updates_the_class_table_in_place(graded, tmp_path: Path):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    _class(folder, {"alice": 1, "bob": 2})
    _grade_within(folder, out)
    (folder / "alice" / NAME).write_bytes(notebook_bytes(3))  # alice fixed her notebook
    (folder / "bob" / NAME).write_bytes(notebook_bytes(0))  # bob's file changed too, but bob is not regraded
    graded.clear()

    table = grade.grade_folder(folder, out, jobs=1, progress=lambda _: None, learners=["alice"])

    assert graded == [NAME]  # alice's file alone was checked
    assert table["alice"] == dict.fromkeys(EXERCISES, "pass") and table["bob"]["1.3"] == "hint"
    _, rows = _csv(out)
    assert rows["alice"]["points"] == "3" and rows["bob"]["points"] == "2"
    assert sorted(p.name for p in out.iterdir()) == ["feedback", "grades.csv", "grades.json", "grades.md"]
    with pytest.raises(FileNotFoundError, match=r"no \.ipynb files of dave"):
        grade.grade_folder(folder, out, jobs=1, progress=lambda _: None, learners=["dave"])


def test_each_learner_gets_a_feedback_file_per_notebook_in_words_they_read(graded, tmp_path: Path):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    _class(folder, {"alice": 2})
    (folder / "alice" / OTHER).write_bytes(b"{}")
    _grade_within(folder, out)
    files = sorted(p.relative_to(out).as_posix() for p in (out / "feedback").rglob("*"))
    assert files == ["feedback/alice", "feedback/alice/01_rmsnorm-feedback.md", "feedback/alice/02_swiglu_silu_relu"
                     "-feedback.md"]
    text = unescaped((out / "feedback" / "alice" / "01_rmsnorm-feedback.md").read_text())
    assert text.splitlines()[:3] == [f"# Feedback on {NAME}", "", f"Your file alice/{NAME}: 2 of 3 exercises passed."]
    assert "- Exercise 1.1 (exercise 1.1): passed" in text and "- Exercise 1.3 (exercise 1.3): hint — a hint" in text
    other = unescaped((out / "feedback" / "alice" / "02_swiglu_silu_relu-feedback.md").read_text())
    assert "not a notebook: nbformat None" in other


def test_collection_json_adds_last_saved_and_late_and_is_never_a_learners_file(graded, tmp_path: Path):  # noqa: F811
    folder, out = tmp_path / "class", tmp_path / "grades"
    _class(folder, {"alice": 3, "bob": 2})
    (folder / "collection.json").write_text(json.dumps({
        "collected_at": "2026-05-01T18:00:00+00:00", "due": "2026-05-01T17:00:00+00:00",
        "files": {f"alice/{NAME}": {"last_saved": "2026-05-01T16:59:00+00:00", "late": False},
                  f"bob/{NAME}": {"last_saved": "2026-05-01T17:30:00+00:00", "late": True}}}))
    _grade_within(folder, out)
    header, rows = _csv(out)
    assert "01_rmsnorm last saved" in header and "01_rmsnorm late" in header and "collection" not in rows
    assert (rows["alice"]["01_rmsnorm late"], rows["bob"]["01_rmsnorm late"]) == ("no", "yes")
    assert rows["bob"]["01_rmsnorm last saved"] == "2026-05-01T17:30:00+00:00"
    markdown = unescaped((out / "grades.md").read_text())
    assert f"| bob | {NAME} | 2 | 3 | 66.7 % | bob/{NAME} | 2026-05-01T17:30:00+00:00 | late |" in markdown

    (folder / "collection.json").unlink()  # absent: nothing changes
    _grade_within(folder, out)
    header, _ = _csv(out)
    assert not any("late" in column or "saved" in column for column in header)
    (folder / "collection.json").write_text('{"files": 3}')  # not as collect writes it: said, and left out
    said: list[str] = []
    grade.grade_folder(folder, out, jobs=1, progress=said.append)
    assert any(line.startswith("collection.json is not as `collect --due` writes it") for line in said)


def test_make_grade_passes_out_jobs_and_learner(tmp_path: Path):
    """The front door: ``make grade DIR=… OUT=… JOBS=1``, then a regrade of one learner with LEARNER=.
    The files are not notebooks, so no kernel starts; the tables say so."""
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    for learner in ("alice", "bob"):
        (folder / learner).mkdir(parents=True)
        (folder / learner / NAME).write_text("{}")
    env = {**os.environ, "MAKEFLAGS": ""}
    first = subprocess.run(["make", "grade", f"DIR={folder}", f"OUT={out}", "JOBS=1"], cwd=repo_root(), env=env,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "--jobs 1" in first.stdout and f"--out {out}" in first.stdout
    assert (out / "grades.csv").is_file() and not (folder / "grades.csv").exists()
    (folder / "alice" / NAME).write_text("[]")
    again = subprocess.run(["make", "grade", f"DIR={folder}", f"OUT={out}", "LEARNER=alice"], cwd=repo_root(),
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    _, rows = _csv(out)
    assert "holds a JSON list" in rows["alice"]["notes"] and "nbformat None" in rows["bob"]["notes"]


def test_submissions_is_ignored_by_git():
    ignored = subprocess.run(["git", "check-ignore", "-q", "submissions/alice/01_rmsnorm.ipynb"], cwd=repo_root())
    assert ignored.returncode == 0
