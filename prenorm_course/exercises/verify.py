"""Prove the exercise loop works for every notebook (what CI runs).

For each solution notebook:

1. its exercise notebook is up to date (a fresh build matches byte for byte);
2. the exercise notebook as shipped runs to the end as a learner's Run All does, check
   cells included: no cell raises, every check cell prints exactly one line,
   "Exercise N.M is not done yet — ...", the grader marks every exercise "not done",
   the other cells match the course run -- and so the check FAILS;
3. the exercise notebook with the solution regions typed back into its placeholders
   (as a learner would) PASSES the check.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from prenorm_course.exercises.build import read_notebook, stale_notebooks
from prenorm_course.exercises.check import (
    DEFAULT_TIMEOUT,
    NOT_DONE,
    PASSED,
    CheckResult,
    GradingError,
    check_notebook,
)
from prenorm_course.exercises.markers import (
    NotebookError,
    exercise_header,
    fill_scaffold,
    solution_regions,
    validate_solution,
)
from prenorm_course.exercises.paths import SOLUTION_GLOB, exercise_name, exercise_path, repo_root, solution_notebooks
from prenorm_course.exercises.sandbox import Confinement, CourseFiles, confinement


@dataclass
class NotebookVerdict:
    name: str
    ok: bool
    message: str


def filled_in(scaffold: nbformat.NotebookNode, solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The exercise notebook with each exercise's solution regions put back, matched by exercise id."""
    regions = {}
    for cell in solution.cells:
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is not None:
            regions[header[0]] = solution_regions(cell.source, f"Exercise {header[0]}")
    nb = copy.deepcopy(scaffold)
    for cell in nb.cells:
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is None:
            continue
        if header[0] not in regions:
            raise NotebookError(f"Exercise {header[0]} is in the exercise notebook but not in the solution")
        cell.source = fill_scaffold(cell.source, regions[header[0]], header[0])
    return nb


def _unfilled_problem(result: CheckResult) -> str:
    """Why the unfilled run is wrong ("" if it ran to the end with every exercise not done)."""
    if result.passed:
        return "the unfilled exercise notebook PASSES the check"
    for status in result.exercises:
        if status.status != NOT_DONE:
            return f"unfilled, {status.exercise.label} is '{status.detail}', not 'not done yet'"
        printed = result.check_cell_text.get(status.exercise.id, "")
        expected = f"Exercise {status.exercise.id} is not done yet — "
        if not printed.startswith(expected) or printed.count("\n") != 1:
            return (f"unfilled, the check cell of Exercise {status.exercise.id} should print one line "
                    f"'{expected}...', but printed {printed!r}")
    if result.cell_errors:
        return f"the unfilled notebook does not run to the end: {result.cell_errors[0]}"
    if result.other_cells:
        return f"the unfilled notebook differs from the course run: {result.other_cells[0]}"
    return ""


def verify_notebook(solution_path: Path, root: Path, timeout: float, course: CourseFiles | None = None,
                    confined: Confinement | None = None) -> NotebookVerdict:
    """Steps 2 and 3 for one notebook."""
    name = exercise_name(solution_path)
    start = time.perf_counter()
    try:
        solution = read_notebook(solution_path)
        exercises = validate_solution(solution, solution_path.name)
        scaffold = read_notebook(exercise_path(root, name))
        options = {"course": course, "confined": confined}
        unfilled = check_notebook(scaffold, name, root, timeout, inline_checks=True, **options)
        problem = _unfilled_problem(unfilled)
        if problem:
            return NotebookVerdict(name, False, problem)
        filled = check_notebook(filled_in(scaffold, solution), name, root, timeout, **options)
    except (NotebookError, GradingError, OSError) as exc:
        return NotebookVerdict(name, False, str(exc))
    seconds = time.perf_counter() - start
    if not filled.passed:
        problems = [s.line() for s in filled.exercises if s.status != PASSED] + filled.other_cells
        return NotebookVerdict(name, False, f"filled-in notebook fails the check: {'; '.join(problems)}")
    return NotebookVerdict(name, True, f"unfilled runs to the end ({len(exercises)} exercises not done), "
                                       f"filled-in passes ({len(exercises)} exercises, {seconds:.1f} s)")


def verify(
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int = 2,
    emit: Callable[[str], None] = print,
    trusted: bool = False,
) -> bool:
    """Run all checks, print one line per notebook and ``N passed, M failed``; True if all passed."""
    root = repo_root(root)
    notebooks = solution_notebooks(root)
    if not notebooks:
        emit(f"no solution notebooks notebooks/{SOLUTION_GLOB} found")
        emit("0 passed, 1 failed")
        return False
    try:
        stale = stale_notebooks(root)
    except NotebookError as exc:
        emit(f"FAIL  build: {exc}")
        emit("0 passed, 1 failed")
        return False
    stale_names = {message.split()[0].rsplit("/", 1)[-1] for message in stale}
    passed = failed = 0
    for message in stale:
        emit(f"FAIL  {message} — run `python -m prenorm_course.exercises build`")
        failed += 1
    runnable = [p for p in notebooks if exercise_name(p) not in stale_names]
    course, confined = CourseFiles.take(root), confinement(trusted)
    if runnable:
        emit(f"learner code runs {confined.how}")
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        for verdict in pool.map(lambda p: verify_notebook(p, root, timeout, course, confined), runnable):
            emit(f"{'ok  ' if verdict.ok else 'FAIL'}  {verdict.name}: {verdict.message}")
            passed += verdict.ok
            failed += not verdict.ok
    emit(f"{passed} passed, {failed} failed")
    return failed == 0
