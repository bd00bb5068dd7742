"""Contracts of the grader that no test held before (issue 36, item 7), and the one record per exercise.

* a notebook whose exercises all pass, but one of whose ordinary cells the learner changed so
  that its output differs from the course run, does not pass (``check`` exits 1);
* a checker that returns without reaching its ``passed`` line gives no verdict: an error,
  never a pass;
* each exercise of the course notebooks has exactly one record (``prenorm_lib.checks.catalogue``),
  of its own notebook, and what the grader withholds and what ``leaks`` keeps out of view are
  derived from those records.

(The third contract of the issue, the sign test dropping ties, is ``tests/lab/test_stats_ties.py``.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_exercises import NAME, course, filled_in_copy  # noqa: F401 — the mini course fixture

from prenorm_course.exercises import check
from prenorm_course.exercises.__main__ import main
from prenorm_course.exercises.build import read_notebook, write_notebook
from prenorm_course.exercises.check import PASSED, CheckResult, ExerciseStatus, Status, format_report
from prenorm_course.exercises.leaks import LIBRARY_ANSWERS
from prenorm_course.exercises.markers import CheckCall, Exercise, validate_solution
from prenorm_course.exercises.paths import exercise_name, exercise_path, repo_root, solution_notebooks
from prenorm_course.exercises.withheld import WITHHELD, derive_withheld
from prenorm_lib.checks import rmsnorm
from prenorm_lib.checks.agent import Agent
from prenorm_lib.checks.catalogue import EXERCISES, ExerciseRecord, validate

# --- a pass with a changed ordinary cell fails ----------------------------------------------------------


def test_every_exercise_passed_and_a_changed_cell_is_not_a_passing_notebook():
    passes = [ExerciseStatus(Exercise("1.1", "kernel", "a", "b"), PASSED, "passed")]
    clean = CheckResult(name=NAME, solution=Path(NAME), exercises=passes, isolation="as a test")
    changed = CheckResult(name=NAME, solution=Path(NAME), exercises=passes, isolation="as a test",
                          other_cells=["cell `print(1 + 1)`: its output changed — you edited this cell"])
    assert clean.passed and not changed.passed
    assert format_report(changed).endswith("1 of 1 exercises passed; the check fails.")


@pytest.mark.slow
def test_check_fails_a_notebook_whose_exercises_pass_but_whose_ordinary_cell_changed(course: Path,  # noqa: F811
                                                                                    tmp_path: Path, capsys):
    nb = filled_in_copy(course)
    write_notebook(nb, tmp_path / "right" / NAME)
    next(cell for cell in nb.cells if cell.id == "after").source = "print(1 + 2)"
    write_notebook(nb, tmp_path / "changed" / NAME)

    assert main(["--root", str(course), "check", str(tmp_path / "right" / NAME)]) == 0
    assert main(["--root", str(course), "check", str(tmp_path / "changed" / NAME)]) == 1
    report = capsys.readouterr().out.split("Checked ")[-1]
    assert "2 of 2 exercises passed; the check fails." in report
    assert "cell `print(1 + 2)`: its output changed — you edited this cell" in report


# --- a checker that returns without passing is an error --------------------------------------------------


class LoopbackKernel:
    """What ``check._grade`` needs of a kernel: a ``send`` to the agent, here in this process through JSON."""

    def __init__(self, namespace: dict):
        self.agent = Agent(namespace)

    def sender(self, deadline: float):
        return lambda request: json.loads(self.agent.handle(json.dumps(request)))


def _grade_1_1(kernel_fn) -> ExerciseStatus:
    exercise = Exercise("1.1", "rms_norm kernel", "ex", "check")
    call = CheckCall("prenorm_lib.checks.rmsnorm", "rms_norm", ("my_rms_norm",), "")
    status, _ = check._grade(exercise, call, LoopbackKernel({"my_rms_norm": kernel_fn}), "", 30)
    return status


def right_kernel(x, weight, eps=1e-5):
    import torch

    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def test_a_checker_that_returns_without_its_passed_line_is_an_error_not_a_pass(monkeypatch):
    assert _grade_1_1(right_kernel).status == Status.PASSED  # the control: the real checker passes it
    monkeypatch.setattr(rmsnorm.rms_norm, "core", lambda fn: None)  # returns, never reaches passed()
    status = _grade_1_1(right_kernel)
    assert (status.status, status.detail) == (Status.ERROR, "error — the checker gave no verdict")


# --- one record per exercise ------------------------------------------------------------------------------


def test_every_exercise_of_the_course_has_one_record_of_its_own_notebook():
    found = {}
    for path in solution_notebooks(repo_root()):
        for exercise in validate_solution(read_notebook(path), path.name):
            found[exercise.id] = exercise_name(path)
    assert found == {record.id: record.notebook for record in EXERCISES.values()}


def test_withheld_and_library_answers_are_derived_from_the_records():
    assert derive_withheld(EXERCISES.values()) == WITHHELD
    assert {i: r.answers for i, r in EXERCISES.items() if r.answers} == LIBRARY_ANSWERS
    toy = [ExerciseRecord("4.4", answers=("prenorm_lib.attention:MultiHeadSelfAttention.forward",),
                          also_withheld=("prenorm_lib.attention:MultiHeadSelfAttention",)),
           ExerciseRecord("4.5", answers=("prenorm_lib.attention:MultiHeadSelfAttention",))]
    # a method of a withheld class goes with the class; a piece two exercises withhold is withheld once
    assert derive_withheld(toy) == {"04_attention.ipynb": ("prenorm_lib.attention:MultiHeadSelfAttention",)}


@pytest.mark.parametrize(("record", "message"), [
    (ExerciseRecord("1.1", answers=("functional.rms_norm",)), "is not 'prenorm_lib.module:name'"),
    (ExerciseRecord("1.1", refuses=frozenset({"torch.rms_norm"})), "a refusal needs the task it says"),
    (ExerciseRecord("1.x"), "ids are N.M and unique"),
])
def test_a_malformed_record_is_refused_when_the_catalogue_loads(record, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        validate((record,))
    with pytest.raises(ValueError, match=r"ids are N\.M and unique"):
        validate((ExerciseRecord("1.1"), ExerciseRecord("1.1")))


def test_the_exercise_tool_still_reads_check_cells_of_every_notebook():
    """The records name no checker: the check cells do (``metadata.prenorm``), as before; both agree on ids."""
    root = repo_root()
    for path in solution_notebooks(root):
        exercise_nb = read_notebook(exercise_path(root, path))
        ids = {cell.metadata["prenorm"]["exercise"] for cell in exercise_nb.cells if "prenorm" in cell.metadata}
        assert ids == {i for i, record in EXERCISES.items() if record.notebook == exercise_name(path)}


def test_the_grader_docs_show_the_limits_as_they_are():
    """docs/grader.md's table of limits is what GradingLimits says (regenerate: python -m
    prenorm_course.exercises.limits)."""
    from prenorm_course.exercises.limits import LIMITS

    assert LIMITS.table() in (repo_root() / "docs" / "grader.md").read_text(encoding="utf-8")


def test_the_limits_table_check_sees_one_changed_limit():
    """The two tests of grader.md's limits (this file's and test_the_limits_table_as_typed) fail on
    purpose: a table with any one limit changed is not in the document."""
    from dataclasses import fields, replace

    from prenorm_course.exercises.limits import LIMITS

    text = (repo_root() / "docs" / "grader.md").read_text(encoding="utf-8")
    for limit in fields(LIMITS):
        changed = replace(LIMITS, **{limit.name: getattr(LIMITS, limit.name) * 2 + 1})
        assert changed.table() not in text, f"doubling {limit.name} left grader.md's table as it is"
