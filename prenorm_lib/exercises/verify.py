"""Prove the exercise loop works for every notebook (what CI runs).

For each solution notebook:

1. its exercise notebook is up to date (a fresh build matches byte for byte);
2. the exercise notebook as shipped FAILS ``check``, and the first failure is
   its first exercise's ``NotImplementedError("Exercise N.M: ...")`` (the run
   stops at the first failing cell);
3. the exercise notebook with the solution regions typed back into its
   placeholders (as a learner would) PASSES ``check``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from prenorm_lib.exercises.build import read_notebook, stale_notebooks
from prenorm_lib.exercises.check import PASSED, CheckResult, check_notebook
from prenorm_lib.exercises.markers import (
    Exercise,
    NotebookError,
    exercise_header,
    fill_scaffold,
    solution_regions,
    validate_solution,
)
from prenorm_lib.exercises.paths import exercise_dir, repo_root, solution_notebooks
from prenorm_lib.exercises.runner import DEFAULT_TIMEOUT


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


def _unfilled_problem(result: CheckResult, first: Exercise) -> str:
    """Why the unfilled run is wrong ("" if it failed exactly at the first exercise)."""
    failures = [c for c in result.run.cells.values() if c.kind not in ("ok", "skipped")]
    if result.passed or not failures:
        return f"the unfilled exercise notebook PASSES the check (Exercise {first.id} is not checked)"
    cell = failures[0]
    expected = f"Exercise {first.id}:"
    if (cell.cell_id not in (first.cell_id, first.checker_cell_id) or cell.ename != "NotImplementedError"
            or not cell.evalue.startswith(expected)):
        seen = f"{cell.ename}: {cell.evalue}" if cell.ename else cell.message
        return (f"the unfilled notebook should first fail with NotImplementedError('{expected} ...') "
                f"in Exercise {first.id}, but failed with {seen}")
    return ""


def verify_notebook(solution_path: Path, root: Path, timeout: float) -> NotebookVerdict:
    """Steps 2 and 3 for one notebook."""
    name = solution_path.name
    start = time.perf_counter()
    try:
        solution = read_notebook(solution_path)
        exercises = validate_solution(solution, name)
        scaffold = read_notebook(exercise_dir(root) / name)
        if exercises:
            problem = _unfilled_problem(check_notebook(scaffold, name, root, timeout, stop_first=True), exercises[0])
            if problem:
                return NotebookVerdict(name, False, problem)
        filled = check_notebook(filled_in(scaffold, solution), name, root, timeout)
    except (NotebookError, OSError) as exc:
        return NotebookVerdict(name, False, str(exc))
    seconds = time.perf_counter() - start
    if not filled.passed:
        problems = [s.line() for s in filled.exercises if s.status != PASSED] + filled.other_cells
        detail = "; ".join(problems) or (filled.run.log.strip().splitlines() or ["no output"])[-1]
        return NotebookVerdict(name, False, f"filled-in notebook fails the check: {detail}")
    stop = f"unfilled stops at Exercise {exercises[0].id}, " if exercises else "no exercises, "
    return NotebookVerdict(name, True, f"{stop}filled-in passes ({len(exercises)} exercises, {seconds:.1f} s)")


def verify(
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int = 2,
    emit: Callable[[str], None] = print,
) -> bool:
    """Run all checks, print one line per notebook and ``N passed, M failed``; True if all passed."""
    root = repo_root(root)
    notebooks = solution_notebooks(root)
    if not notebooks:
        emit("no solution notebooks notebooks/NN_*.ipynb found")
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
        emit(f"FAIL  {message} — run `python -m prenorm_lib.exercises build`")
        failed += 1
    runnable = [p for p in notebooks if p.name not in stale_names]
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        for verdict in pool.map(lambda p: verify_notebook(p, root, timeout), runnable):
            emit(f"{'ok  ' if verdict.ok else 'FAIL'}  {verdict.name}: {verdict.message}")
            passed += verdict.ok
            failed += not verdict.ok
    emit(f"{passed} passed, {failed} failed")
    return failed == 0
