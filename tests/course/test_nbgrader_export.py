"""The exercises as nbgrader source notebooks, tried by nbgrader itself.

``make nbgrader-export``'s notebooks carry nbgrader's cell metadata: each exercise cell an
autograded answer with the solution between nbgrader's markers, each check cell a locked
one-point test calling the course's check in its strict form. The slow test hands notebook
01 to nbgrader as a teacher would: ``nbgrader generate_assignment``, three learners'
notebooks (right, wrong 1.3, unfinished) into ``submitted/``, ``nbgrader autograde``, then
``nbgrader export``: 3, 2 and 0 points of 3.

nbgrader lives in a venv of its own (its notebook 7 and extensions stay out of the course's
JupyterLab): ``PRENORM_NBGRADER`` names that venv's ``bin`` folder (``.ci/run`` makes it);
CI sets PRENORM_REQUIRE_NBGRADER=1, so a skip there is a failure. The kernel nbgrader runs
is the course's own Python (a kernel spec named ``prenorm`` in a JUPYTER_PATH folder of the test).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prenorm_course import nbgrader_export
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.markers import BEGIN, END, exercise_header
from prenorm_course.exercises.paths import (
    SOLUTION_TITLE_MARK,
    exercise_name,
    repo_root,
    solution_notebooks,
    solution_path,
)
from prenorm_course.hub.distribution import HELD_BACK

NBGRADER = os.environ.get("PRENORM_NBGRADER")
REQUIRED = os.environ.get("PRENORM_REQUIRE_NBGRADER") == "1"
NOTEBOOK = "01_rmsnorm"
WRONG_1_3 = '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = "65504"\nnorm_without_upcast = "1"\n'


def test_every_exercise_is_an_answer_cell_and_every_check_a_one_point_test(tmp_path: Path):
    root = repo_root()
    written = nbgrader_export.export(root, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == \
        [f"source/{Path(exercise_name(p)).stem}/{exercise_name(p)}" for p in solution_notebooks(root)]
    assert "course_id" in (tmp_path / "nbgrader_config.py").read_text()
    for path in written:
        nb = read_notebook(path)
        exercises = [exercise_header(c.source)[0] for c in nb.cells
                     if c.cell_type == "code" and exercise_header(c.source)]
        answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
        tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(answers) == len(tests) == len(exercises) > 0, path.name
        assert SOLUTION_TITLE_MARK not in nb.cells[0].source, "nbgrader releases it to learners: no solutions mark"
        for cell in answers:
            assert BEGIN in cell.source and END in cell.source and not cell.metadata["nbgrader"]["locked"]
        for exercise, cell in zip(exercises, tests, strict=True):
            meta = cell.metadata["nbgrader"]
            expected = (1, True, f"check_{exercise.replace('.', '_')}")
            assert (meta["points"], meta["locked"], meta["grade_id"]) == expected
            assert ".core(" in cell.source and f"Exercise {exercise}" in cell.source
        assert not [c for c in nb.cells if c.get("outputs")], "a source notebook stores no outputs"
        assert not [c for c in nb.cells if "answer" in c.metadata.get("tags", []) and c.cell_type == "markdown"
                    and c.source != HELD_BACK]


def test_make_nbgrader_export_writes_every_notebook_and_the_configuration():
    root = repo_root()
    run = subprocess.run(["make", "nbgrader-export"], cwd=root, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = root / "dist" / "nbgrader"
    assert sorted(p.name for p in (out / "source").glob("*/*.ipynb")) == \
        [exercise_name(p) for p in solution_notebooks(root)]
    assert (out / "nbgrader_config.py").is_file() and "nbgrader generate_assignment" in run.stdout


def test_a_check_cell_the_export_cannot_place_is_refused():
    root = repo_root()
    solution = read_notebook(solution_path(root, f"{NOTEBOOK}.ipynb"))
    exercise = read_notebook(root / "notebooks" / "exercises" / f"{NOTEBOOK}.ipynb")
    stale = copy.deepcopy(exercise)
    next(c for c in stale.cells if "prenorm" in c.metadata).id = "not-in-the-course"
    with pytest.raises(ValueError, match=r"check cells \['not-in-the-course'\] .* run make exercises"):
        nbgrader_export.source_notebook(solution, stale)


def _nbgrader(course: Path, env: dict, *args: str) -> str:
    run = subprocess.run([str(Path(NBGRADER) / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout + run.stderr


def _learner(release: dict, solution: dict, answer: str) -> dict:
    """The released notebook with the learner's answers typed into its answer cells."""
    nb = copy.deepcopy(release)
    if answer == "unfinished":
        return nb
    sources = {c["id"]: "".join(c["source"]) for c in solution["cells"]}
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            text = "\n".join(line for line in sources[cell["id"]].splitlines() if BEGIN not in line and END not in line)
            cell["source"] = WRONG_1_3 if answer == "wrong" and text.startswith("# Exercise 1.3") else text
    return nb


@pytest.mark.slow
def test_nbgrader_generates_the_assignment_and_autogrades_right_wrong_and_unfinished(tmp_path: Path):
    if not NBGRADER or not (Path(NBGRADER) / "nbgrader").exists():
        message = "needs nbgrader in a venv of its own: PRENORM_NBGRADER=<venv>/bin (pip install nbgrader==0.9.6)"
        if REQUIRED:
            pytest.fail(message + " (PRENORM_REQUIRE_NBGRADER=1)")
        pytest.skip(message)
    root = repo_root()
    course = tmp_path / "course"
    nbgrader_export.export(root, course)
    kernels = tmp_path / "jupyter" / "kernels" / "prenorm"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "prenorm", "language": "python"}))
    with open(course / "nbgrader_config.py", "a") as f:
        f.write('c.Execute.kernel_name = "prenorm"  # the course\'s Python, where prenorm_lib imports\n')
    env = {**os.environ, "PATH": f"{NBGRADER}:{os.environ['PATH']}", "JUPYTER_PATH": str(tmp_path / "jupyter"),
           "HOME": str(tmp_path)}
    start = time.monotonic()
    _nbgrader(course, env, "generate_assignment", NOTEBOOK, "--force")
    release = json.loads((course / "release" / NOTEBOOK / f"{NOTEBOOK}.ipynb").read_text())
    released = "".join("".join(c["source"]) for c in release["cells"])
    assert BEGIN not in released and "raise NotImplementedError()" in released
    solution = json.loads(solution_path(root, f"{NOTEBOOK}.ipynb").read_text())
    for who in ("right", "wrong", "unfinished"):
        folder = course / "submitted" / who / NOTEBOOK
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.ipynb").write_text(json.dumps(_learner(release, solution, who), indent=1))
    _nbgrader(course, env, "autograde", NOTEBOOK, "--force")
    _nbgrader(course, env, "export", "--to", str(tmp_path / "grades.csv"))
    with open(tmp_path / "grades.csv", newline="") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    assert scores == {"right": (3.0, 3.0), "wrong": (2.0, 3.0), "unfinished": (0.0, 3.0)}
    print(f"\nnbgrader generate_assignment + autograde of 3 notebooks + export: {time.monotonic() - start:.0f} s")


def test_the_test_cell_raises_on_an_unfinished_exercise_where_the_self_check_only_prints(capsys):
    """Why the export calls ``.core``: nbgrader gives the point to any test cell that raises nothing, and the
    notebook's own check cell only prints "not done yet" (Run All goes on). Seen here on Exercise 1.1."""
    exercise = read_notebook(repo_root() / "notebooks" / "exercises" / f"{NOTEBOOK}.ipynb")
    cell = next(c for c in exercise.cells if c.metadata.get("prenorm", {}).get("exercise") == "1.1")

    def my_rms_norm(x, weight, eps=1e-5):
        raise NotImplementedError("Exercise 1.1: rms_norm kernel")

    namespace = {"my_rms_norm": my_rms_norm}
    exec(cell.source, namespace)  # the self-check: one line, no exception -> nbgrader would score it
    assert "Exercise 1.1 is not done yet" in capsys.readouterr().out
    with pytest.raises(Exception, match=r"Exercise 1\.1"):
        exec(nbgrader_export.strict_check(cell.metadata["prenorm"]), namespace)
