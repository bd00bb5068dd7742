"""Grade one Gradescope submission with the course's grader and write ``results.json``.

One test per exercise of the assignment's notebooks (one point each), named by the
exercise, with the grader's own line as its output ("passed", the one-line hint, "not
done yet", the error). Submitted files are found like ``make grade`` finds them (no
symbolic links) and recognised by their content, so a renamed notebook still counts;
a notebook of the assignment that was not submitted scores 0 with "not submitted".

How the learner's code ran is decided here, once, and written into ``results.json``
(the overall ``output``, every test's ``output`` and ``extra_data.confinement``):

* ``bubblewrap`` -- the course's confinement, as in ``make grade``: the kernel cannot
  see ``/autograder`` (the solutions, the grader, the results file);
* ``container`` -- bubblewrap cannot start in this container (the container does
  not allow the namespaces it makes). Gradescope gives each submission
  a container of its own, thrown away after it, so the container is the confinement
  of the whole; within it the kernel runs as a fresh unprivileged user
  (:func:`~prenorm_course.exercises.sandbox.container_confinement`) for whom
  ``/autograder/source`` -- the solutions, the grader, the full library -- is root's
  alone and unreadable (proved before any learner code runs), with the withheld
  library build in its own folder as everywhere. Without namespaces the kernels of one
  submission would share ``/tmp`` (notebook 01's kernel holds 06's answers in its library
  copy, and could leave them there for 06's kernel): so here every kernel's copy lacks the
  answers of *every* notebook of the assignment, the notebooks are checked one after the
  other, and each kernel's user leaves nothing behind (its processes killed, its files in
  the shared folders removed: ``sandbox.remove_leftovers``). The results say which mode ran.

Learner text reaches Gradescope inert: control characters shown as escapes, and every
output declared plain text (``output_format``), never Markdown, HTML or ANSI.

Never a silent fallback: the mode is in every result, and a run that cannot grade at
all still writes a ``results.json`` that says why.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.check import PASSED, CheckResult, check_notebook, identify, parse_learner, quoted
from prenorm_course.exercises.grade import learner_notebooks
from prenorm_course.exercises.inert import one_line
from prenorm_course.exercises.markers import NotebookError, find_exercises
from prenorm_course.exercises.paths import exercise_name, solution_path
from prenorm_course.exercises.sandbox import (
    Confinement,
    ConfinementUnavailable,
    CourseFiles,
    Mode,
    confinement,
    container_confinement,
)
from prenorm_course.gradescope.autograder_zip import CONFIG_NAME

BUBBLEWRAP, CONTAINER = Mode.CONFINED, Mode.CONTAINER
CONTAINER_HOW = ("in Gradescope's container only, NOT in bubblewrap (it could not start here): the container, "
                 "made for this submission alone, is the confinement; inside it the code ran ")


def decide_confinement(root: Path) -> tuple[str, Confinement, str]:
    """(mode, how kernels run, why bubblewrap was not used or ""); raises if neither can keep ``root`` hidden."""
    try:
        return BUBBLEWRAP, confinement(), ""
    except ConfinementUnavailable as exc:
        inside = container_confinement([root])
        return CONTAINER, Confinement(inside.mode, CONTAINER_HOW + inside.how), str(exc)


def _tests_of(result: CheckResult | None, notebook: str, root: Path, why_missing: str) -> list[dict]:
    exercises = find_exercises(read_notebook(solution_path(root, notebook)), notebook)
    statuses = {s.exercise.id: s for s in result.exercises} if result else {}
    tests = []
    for exercise in exercises:
        status = statuses.get(exercise.id)
        passed = status is not None and status.status == PASSED
        tests.append({"name": f"{notebook}: {exercise.label}", "score": 1.0 if passed else 0.0, "max_score": 1.0,
                      "status": "passed" if passed else "failed",
                      "output": quoted(status.line() if status else f"{exercise.label}: {why_missing}"),
                      "output_format": "text", "visibility": "visible"})
    return tests


def grade_submission(submission: Path, root: Path, timeout: float, log=print) -> dict:
    """The results.json dictionary for the notebooks in ``submission``."""
    start = time.monotonic()
    assignment = json.loads((root / CONFIG_NAME).read_text(encoding="utf-8"))["notebooks"]
    mode, confined, why = decide_confinement(root)
    log(f"learner code runs {confined.how}" + (f" ({why})" if why else ""))
    course = CourseFiles.take(root, together=tuple(assignment) if mode == CONTAINER else ())
    results: dict[str, CheckResult] = {}
    notes: list[str] = []
    for _, path in learner_notebooks(submission) if submission.is_dir() else []:
        where = path.relative_to(submission).as_posix()
        try:
            learner = parse_learner(path.read_bytes())
            notebook = exercise_name(identify(learner, path.name, root)[0])
            if notebook not in assignment:
                notes.append(f"{where}: the course notebook {notebook}, not part of this assignment; not graded")
            elif notebook in results:
                notes.append(f"{where}: a second copy of {notebook}; only the first file was graded")
            else:
                results[notebook] = check_notebook(learner, path.name, root, timeout, course=course,
                                                   confined=confined)
                log(one_line(f"{where}: {notebook}, {results[notebook].seconds:.1f} s"))
                notes += [f"{where}: {note}" for note in results[notebook].notes + results[notebook].other_cells]
        except (NotebookError, OSError) as exc:
            notes.append(f"{where}: {exc}")
    tests = [test for notebook in assignment
             for test in _tests_of(results.get(notebook), notebook, root, f"not submitted (no notebook of {notebook})")]
    how = f"Learner code ran {confined.how}."
    output = "\n".join([how, *(quoted(note) for note in notes)])
    marker = ("(run in bubblewrap, as with make grade)" if mode == BUBBLEWRAP else
              "(run in Gradescope's container only, NOT in bubblewrap: see the overall output)")
    for test in tests:
        test["output"] += f"\n{marker}"
    return {"score": sum(t["score"] for t in tests), "execution_time": round(time.monotonic() - start, 1),
            "output": output, "output_format": "text", "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"confinement": mode, "notebooks": sorted(results)}}


def failure_results(message: str) -> dict:
    """What Gradescope shows when the autograder itself could not grade: never a silent zero."""
    return {"score": 0.0, "output": f"The autograder could not grade this submission: {message}. "
                                    "Your teacher has been told by this message; resubmitting will not help.",
            "tests": [], "extra_data": {"confinement": "none", "error": message}}


def write_results(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
