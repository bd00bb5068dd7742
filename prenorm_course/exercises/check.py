"""Check a learner's notebook: the learner's code runs in its own kernel, the verdict is made here.

1. The file is read as untrusted data (``load_learner``): anything that is not a
   version-4 notebook with cell ids is "not a notebook: <why>".
2. Which course notebook it is comes from its content (cell ids and exercise headers),
   not its file name.
3. The learner's code is put into the pristine course notebook cell by cell id
   (``merge``): exercise cells and other code cells take the learner's source; check
   cells, markdown, tags and nbval options always come from the course.
4. The merged notebook runs top to bottom in a fresh kernel in a sandbox
   (:mod:`kernel`, :mod:`sandbox`). At each check cell the kernel runs only the
   cell's own statements, not the checker call; the grader instead looks up the
   learner's objects and calls the checker *here* (``checker.core``), on
   :class:`~prenorm_lib.checks.remote.RemoteObject` proxies. The learner's code
   runs there on inputs the checker chose and sends back plain data; the checker
   compares it with references computed here and decides. An exercise passes only if
   the checker, in this process, reached its ``passed`` line -- nothing the learner's
   kernel prints or sends is read as a verdict.
5. Each exercise: passed, hint, not done yet, error, timeout, or not run. Other cells
   are compared with the course run (sanitized as nbval does) and reported, with the
   cells the learner edited, added or deleted.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import nbformat

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.inert import quoted
from prenorm_course.exercises.kernel import DIED, OK, CellRun, Kernel
from prenorm_course.exercises.kernel import ERROR as RAN_INTO_ERROR
from prenorm_course.exercises.kernel import TIMEOUT as RAN_TOO_LONG
from prenorm_course.exercises.limits import LIMITS, GradingLimits
from prenorm_course.exercises.markers import (
    METADATA_KEY,
    USES_EXERCISES_TAG,
    CheckCall,
    Exercise,
    NotebookError,
    course_options,
    defined_names,
    exercise_header,
    has_placeholder,
    scaffold_source,
    strip_nbval_markers,
    validate_solution,
)
from prenorm_course.exercises.paths import (
    exercise_dir,
    exercise_name,
    repo_root,
    sanitize_file,
    solution_notebooks,
)
from prenorm_course.exercises.sandbox import Confinement, CourseFiles, Sandbox, confinement
from prenorm_course.exercises.withheld import MARKER as WITHHELD_MARKER
from prenorm_lib.checks.core import Hint, NotDone, collecting_passes
from prenorm_lib.checks.remote import KernelStopped, Learner, LearnerTimeout, Missing, NoAnswer

DEFAULT_TIMEOUT = LIMITS.cell_seconds  # the command line's --timeout


class Status(StrEnum):
    """An exercise's outcome, as the tables write it."""

    PASSED = "pass"
    HINT = "hint"
    NOT_DONE = "not done"
    ERROR = "error"
    TIMEOUT = "timeout"
    NOT_RUN = "not run"
    NOT_A_NOTEBOOK = "not a notebook"  # the learner's file could not be read as a notebook
    MISSING = "missing"  # no file of that notebook from this learner


PASSED, HINT, NOT_DONE, ERROR, TIMEOUT, NOT_RUN = (Status.PASSED, Status.HINT, Status.NOT_DONE, Status.ERROR,
                                                   Status.TIMEOUT, Status.NOT_RUN)
NOT_A_NOTEBOOK = Status.NOT_A_NOTEBOOK
UNCOMPARED_MIME = ("image/png", "image/jpeg", "application/vnd.jupyter.widget-view+json",
                   "application/vnd.jupyter.widget-state+json")


class NotANotebook(NotebookError):
    """A file that is not a notebook the tool can read."""

    def __init__(self, why: str):
        super().__init__(f"not a notebook: {why}")


class GradingError(RuntimeError):
    """The grader itself could not run a notebook (the kernel did not start): not the learner's fault."""


@dataclass
class ExerciseStatus:
    exercise: Exercise
    status: Status
    detail: str

    def line(self) -> str:
        text = {PASSED: "passed", NOT_DONE: "not done yet"}
        return f"{self.exercise.label}: {text.get(self.status, self.detail)}"


@dataclass
class CheckResult:
    """Everything ``check`` learned about one learner notebook."""

    name: str
    solution: Path
    exercises: list[ExerciseStatus]
    other_cells: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    isolation: str = ""
    peak_memory_kb: int = 0
    check_cell_text: dict[str, str] = field(default_factory=dict)  # what each check cell printed in the kernel
    cell_errors: list[str] = field(default_factory=list)  # every cell that raised, timed out or stopped the kernel

    @property
    def passed(self) -> bool:
        return all(s.status == PASSED for s in self.exercises) and not self.other_cells


# --- reading a learner's file -----------------------------------------------------------


class _TooManyObjects(Exception):
    pass


def parse_learner(data: bytes, limits: GradingLimits = LIMITS) -> nbformat.NotebookNode:
    """A learner's notebook from the bytes of its file; ``NotANotebook`` says why not."""
    if len(data) > limits.notebook_bytes:
        raise NotANotebook(f"the file is larger than {limits.notebook_bytes // 2**20} MB")
    objects = 0

    def counted(pairs: list) -> dict:  # a million empty cells is a small file but gigabytes of parsed objects
        nonlocal objects
        objects += 1
        if objects > limits.notebook_json_objects:
            raise _TooManyObjects
        return dict(pairs)

    try:
        content = json.loads(data.decode("utf-8"), object_pairs_hook=counted)
    except _TooManyObjects:
        raise NotANotebook(f"the file holds more than {limits.notebook_json_objects:,} JSON objects (cells, "
                           "outputs, metadata); a course notebook holds a few thousand") from None
    except UnicodeDecodeError:
        raise NotANotebook("the file is not text (UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise NotANotebook(f"invalid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise NotANotebook("the JSON is nested too deeply") from None
    if not isinstance(content, dict):
        raise NotANotebook(f"the file holds a JSON {type(content).__name__}, not a notebook object")
    if content.get("nbformat") != 4:
        raise NotANotebook(f"nbformat {content.get('nbformat')!r}; only version 4 notebooks can be checked")
    cells = content.get("cells")
    if not isinstance(cells, list):
        raise NotANotebook(f'"cells" is a {type(cells).__name__}, not a list of cells')
    clean = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise NotANotebook(f"cell {index} is not a code, markdown or raw cell")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotANotebook(f"cell {index} has no text source")
        cell_id = cell.get("id")
        if not isinstance(cell_id, str) or not cell_id:
            raise NotANotebook(f"cell {index} has no id (nbformat 4.5 or later); open and save it in JupyterLab")
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        clean.append({"cell_type": cell["cell_type"], "id": cell_id, "source": source, "metadata": metadata,
                      **({"outputs": [], "execution_count": None} if cell["cell_type"] == "code" else {})})
    nb = nbformat.v4.new_notebook(cells=[nbformat.from_dict(c) for c in clean])
    nb.nbformat_minor = 5
    return nb


def load_learner(path: Path) -> nbformat.NotebookNode:
    """Read and parse a learner's file (``NotANotebook`` for anything unreadable)."""
    try:
        return parse_learner(Path(path).read_bytes())
    except IsADirectoryError:
        raise NotANotebook("it is a folder") from None


# --- which course notebook, and the learner's code in it ----------------------------------


def _first_line(source: str) -> str:
    line = next((s.strip() for s in source.split("\n") if s.strip()), "")
    return line if len(line) <= 50 else line[:47] + "..."


def _exercise_ids(nb: nbformat.NotebookNode) -> set[str]:
    return {h[0] for c in nb.cells if c.cell_type == "code" and (h := exercise_header(c.source))}


def identify(learner: nbformat.NotebookNode, name: str, root: Path) -> tuple[Path, str]:
    """The solution notebook of the course notebook ``learner`` is, by its content; and a note if its file
    name says otherwise (notes name the exercise notebook, ``01_rmsnorm.ipynb``, the name a learner has).

    Shared cell ids count once each, shared exercise headers five times (a notebook
    rebuilt by copying cells keeps its headers but not its ids). A tie goes to the
    notebook of the same exercise name.
    """
    ids = {cell.get("id") for cell in learner.cells}
    headers = _exercise_ids(learner)
    scores = {}
    for path in solution_notebooks(root):
        course = read_notebook(path)
        scores[path] = len(ids & {c.id for c in course.cells}) + 5 * len(headers & _exercise_ids(course))
    best = max(scores, key=lambda p: (scores[p], exercise_name(p) == name), default=None)
    if best is None or scores[best] == 0:
        raise NotebookError(
            f"{name}: cannot tell which course notebook this is (no cell ids or exercise headers in common "
            "with any notebook in notebooks/)"
        )
    note = ""
    if exercise_name(best) != name:
        note = f"recognised by its cells as the course notebook {exercise_name(best)}"
        if name in {exercise_name(p) for p in scores}:
            note += f", although the file is called {name}"
    return best, note


def merge(
    learner: nbformat.NotebookNode, solution: nbformat.NotebookNode, exercises: list[Exercise]
) -> tuple[nbformat.NotebookNode, set[str], list[str]]:
    """The course notebook with the learner's code in it.

    Exercise cells are matched by id, else by their header line. Returns the merged
    notebook, the ids of ordinary cells the learner edited, and notes for the learner
    about cells added, deleted or ignored.
    """
    mine = {cell.get("id"): cell for cell in learner.cells}
    by_header = {h[0]: c for c in learner.cells if c.cell_type == "code" and (h := exercise_header(c.source))}
    exercise_of = {e.cell_id: e for e in exercises}
    checker_of = {e.checker_cell_id: e for e in exercises}
    merged = copy.deepcopy(solution)
    edited: set[str] = set()
    notes: list[str] = []
    used = set()
    for cell in merged.cells:
        if cell.cell_type != "code":
            continue
        theirs = mine.get(cell.id)
        exercise = exercise_of.get(cell.id)
        if exercise is not None and (theirs is None or theirs.cell_type != "code"):
            theirs = by_header.get(exercise.id)
        if theirs is not None:
            used.add(theirs.get("id"))
        if cell.id in checker_of:
            if theirs is not None and strip_nbval_markers(theirs.source) != strip_nbval_markers(cell.source):
                notes.append(f"you edited the check cell after Exercise {checker_of[cell.id].id}; "
                             "the check runs the original")
        elif theirs is None or theirs.cell_type != "code":
            if exercise is not None:
                cell.source = scaffold_source(cell.source, exercise.id, exercise.title)
                notes.append(f"the cell of Exercise {exercise.id} is missing from your notebook; "
                             "it counts as not done")
            else:
                notes.append(f"code cell `{_first_line(cell.source)}` is missing from your notebook; "
                             "the check runs the course's version")
        else:
            if exercise is None and strip_nbval_markers(theirs.source) != strip_nbval_markers(cell.source):
                edited.add(cell.id)
            cell.source = theirs.source
    known = {cell.id for cell in solution.cells} | used
    added = [c for c in learner.cells if c.cell_type == "code" and c.get("id") not in known]
    if added:
        names = ", ".join(f"`{_first_line(c.source)}`" for c in added[:3]) + (", ..." if len(added) > 3 else "")
        notes.append(f"you added {len(added)} code cell(s) ({names}); the check does not run them — "
                     "code that an exercise needs belongs in its exercise cell")
    return merged, edited, notes


# --- comparing a cell's outputs with the course run ---------------------------------------


def sanitize_patterns(root: Path) -> list[tuple[str, str]]:
    """nbval's sanitize rules (pairs of ``regex:`` / ``replace:`` lines), or none."""
    path = sanitize_file(root)
    if path is None:
        return []
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)


def _comparable(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list[str]]:
    """What nbval compares: streams by name, every data type but images and widgets, sanitized."""
    found: dict[str, list[str]] = {}
    streams: dict[str, str] = {}
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            streams[output.get("name", "stdout")] = streams.get(output.get("name", "stdout"), "") + output["text"]
        elif kind in ("display_data", "execute_result"):
            for mime, value in output.get("data", {}).items():
                if mime not in UNCOMPARED_MIME:
                    text = "".join(value) if isinstance(value, list) else value
                    found.setdefault(mime, []).append(text if isinstance(text, str) else json.dumps(text))
    for name, text in streams.items():
        found.setdefault(name, []).append(text)
    for key, texts in found.items():
        for regex, replace in patterns:
            texts[:] = [re.sub(regex, replace, t) for t in texts]
        found[key] = texts
    return found


# --- one exercise ---------------------------------------------------------------------------


def course_checks(root: Path, name: str, solution: nbformat.NotebookNode,
                  exercises: list[Exercise]) -> dict[str, CheckCall]:
    """Each exercise's check, from the ``metadata.prenorm`` that ``build`` wrote into the course's exercise notebook.

    Never from the learner's file (its metadata is the learner's to change), and never by
    parsing the check cell's Python. An exercise notebook whose check cells differ from
    the solution's, or lost their metadata, is an error that says to rebuild it.
    """
    where = f"notebooks/exercises/{name}"
    path = exercise_dir(root) / name
    if not path.is_file():
        raise NotebookError(f"{where} is missing; build the exercise notebooks with `make exercises`")
    built = {cell.id: cell for cell in read_notebook(path).cells}
    course = {cell.id: cell for cell in solution.cells}
    calls = {}
    for exercise in exercises:
        cell = built.get(exercise.checker_cell_id)
        if cell is None or strip_nbval_markers(cell.source) != strip_nbval_markers(
                course[exercise.checker_cell_id].source):
            raise NotebookError(f"{where} is stale: the check cell of Exercise {exercise.id} differs from the "
                                f"solution notebook's; rebuild the exercise notebooks with `make exercises`")
        calls[exercise.id] = CheckCall.from_metadata(cell.metadata.get(METADATA_KEY), exercise.id, where)
    return calls


def _checker(call: CheckCall) -> Any:
    module = importlib.import_module(call.module)
    checker = getattr(module, call.function, None)
    if checker is None or not hasattr(checker, "core"):
        raise NotebookError(f"{call.module}.{call.function} is not an exercise checker")
    return checker


def _grade(exercise: Exercise, call: CheckCall, kernel: Kernel, learner_source: str,
           timeout: float, over: str = "") -> tuple[ExerciseStatus, list[str]]:
    """Call the checker here, on the learner's objects in the kernel; the status and notes.

    ``over`` words a timeout when ``timeout`` is what is left of the notebook's time, not the cell's limit.
    """
    notes: list[str] = []

    def status(kind: str, detail: str) -> tuple[ExerciseStatus, list[str]]:
        return ExerciseStatus(exercise, kind, detail), notes

    learner = Learner(kernel.sender(time.monotonic() + timeout))
    try:
        values = []
        for name in call.learner_names:
            value = learner.lookup(name)
            if isinstance(value, Missing):
                if has_placeholder(learner_source):
                    return status(NOT_DONE, "not done yet")
                defined = [n for n in defined_names(learner_source) if not n.startswith("_")]
                also = f" (it defines {', '.join(f'`{n}`' for n in defined[:4])})" if defined else ""
                return status(HINT, f"hint — the check uses `{name}`, but your exercise cell does not define it"
                                    f"{also}; keep the name the exercise gives")
            values.append(value)
        checker = _checker(call)
        lines: list[str] = []
        with collecting_passes(lines.append):
            checker.core(*values)
        notes += [f"Exercise {exercise.id}: your code printed or warned: {text.strip().splitlines()[0]}"
                  for text in learner.printed[:2]]
        if not lines:  # every checker ends with passed(); returning without it is no verdict
            return status(ERROR, "error — the checker gave no verdict")
        return status(PASSED, "passed")
    except Hint as hint:
        return status(HINT, f"hint — {hint.hint}")
    except NotDone:
        return status(NOT_DONE, "not done yet")
    except LearnerTimeout:
        return status(TIMEOUT, f"timeout — {over or f'your code ran longer than {timeout:g} s (an endless loop?)'}")
    except KernelStopped as exc:
        return status(ERROR, f"error — {exc}")
    except NoAnswer as exc:
        return status(ERROR, f"error — {exc}")
    except NotebookError:
        raise
    except Exception as exc:  # anything else the learner's data did to a checker: never a pass
        return status(ERROR, f"error — the check could not finish: {type(exc).__name__}: {exc}")


def _cell_status(exercise: Exercise, run: CellRun | None, whose: str, death: str,
                 timeout: float, over: str = "") -> ExerciseStatus | None:
    """The status an exercise gets from how its exercise cell (or check cell) ran; None if it ran fine.

    ``over`` words a timeout when the limit was what was left of the notebook's time."""
    if run is None:
        return ExerciseStatus(exercise, NOT_RUN, f"not run — {death}" if death else "not run")
    if run.status == DIED:
        return ExerciseStatus(exercise, ERROR, f"error — {whose}: {death}")
    if run.status == RAN_TOO_LONG:
        return ExerciseStatus(exercise, TIMEOUT, f"timeout — {over} ({whose})" if over else
                              f"timeout — {whose} ran longer than {timeout:g} s (an endless loop?)")
    if run.status == RAN_INTO_ERROR:
        if run.ename == "NotImplementedError" and run.evalue.startswith("Exercise "):
            return ExerciseStatus(exercise, NOT_DONE, "not done yet")
        return ExerciseStatus(exercise, ERROR, f"error — {whose} raised {run.ename}: {run.evalue}")
    return None


def _other_cell_problems(
    merged: nbformat.NotebookNode, exercises: list[Exercise], runs: dict[str, CellRun], edited: set[str],
    patterns: list[tuple[str, str]], course: dict[str, nbformat.NotebookNode],
) -> tuple[list[str], str]:
    """The ordinary cells that did not match the course run, and a note on those not compared.

    From the first unedited cell that needed a piece of the library withheld while grading
    (:mod:`withheld`), an unedited cell that fails or differs is not counted: it may only lack
    that cell's results. A withheld piece keeps its signature, so a helper in front of it (06's
    ``build_model`` in a ``uses-exercises`` cell) reaches its message rather than an error of
    its own. A cell the learner edited is always compared.
    """
    exercise_cells = {e.cell_id for e in exercises} | {e.checker_cell_id for e in exercises}
    problems = []
    withheld_from, uncompared = "", 0
    for cell in merged.cells:
        run = runs.get(cell.get("id"))
        if cell.cell_type != "code" or cell.id in exercise_cells or run is None:
            continue
        options = course_options(course[cell.id])
        if run.status == RAN_INTO_ERROR and "raises-exception" not in options:
            what = f"it raised {run.ename}: {run.evalue}"
        elif run.status == RAN_TOO_LONG:
            what = "it ran past the time limit"
        elif run.status == DIED:
            what = "the kernel stopped in this cell"
        elif run.status == OK and not options & {"nbval-ignore-output", USES_EXERCISES_TAG} and \
                _comparable(run.outputs, patterns) != _comparable(course[cell.id].outputs, patterns):
            what = "its output changed"
        else:
            continue
        if cell.id not in edited:
            if not withheld_from and run.status == RAN_INTO_ERROR and WITHHELD_MARKER in run.evalue:
                withheld_from = _first_line(cell.source)
            if withheld_from:
                uncompared += 1
                continue
        why = " — you edited this cell" if cell.id in edited else ""
        problems.append(f"cell `{_first_line(cell.source)}`: {what}{why}")
    note = (f"{uncompared} cell(s) from `{withheld_from}` on were not compared with the course run: they use "
            "prenorm_lib's answers to this notebook's exercises, which the graded kernel does not have"
            if uncompared else "")
    return problems, note


# --- a whole notebook ---------------------------------------------------------------------


def check_notebook(
    learner: nbformat.NotebookNode,
    name: str,
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    inline_checks: bool = False,
    course: CourseFiles | None = None,
    confined: Confinement | None = None,
    trusted: bool = False,
    limits: GradingLimits = LIMITS,
) -> CheckResult:
    """Check an in-memory learner notebook called ``name`` (its file name).

    ``inline_checks`` also runs the check cells' own checker calls in the kernel, as a
    learner's Run All does (``verify`` uses it to prove an unfilled notebook runs to the
    end); the verdict is the grader's either way. ``course`` and ``confined`` come from
    ``grade`` (one snapshot of the course for all submissions; how kernels run). Without
    ``confined`` the kernel runs in bubblewrap, or, only if ``trusted``, unconfined.
    """
    root = repo_root(root)
    solution_path, identified = identify(learner, name, root)
    solution = read_notebook(solution_path)
    notebook = exercise_name(solution_path)  # the course's name for it: the catalogue's, withheld's, the reports'
    exercises = validate_solution(solution, notebook, check_cells=False)
    calls = course_checks(root, notebook, solution, exercises)
    merged, edited, notes = merge(learner, solution, exercises)
    if identified:
        notes.insert(0, identified)
    confined = confined or confinement(trusted)
    course = course or CourseFiles.take(root)
    by_id = {cell.id: cell for cell in merged.cells}
    course_cells = {cell.id: cell for cell in solution.cells}
    exercise_of_checker = {e.checker_cell_id: e for e in exercises}
    statuses: dict[str, ExerciseStatus] = {}
    runs: dict[str, CellRun] = {}
    start = time.monotonic()
    deadline = start + limits.notebook_seconds  # the notebook's time in all: every cell and every check
    over = f"the notebook's time limit ({limits.notebook_seconds:g} s in all) was reached"
    out_of_time = False
    for call in calls.values():  # every checker is imported here before any learner code runs
        _checker(call)
    # graded: the kernel's library lacks the answers to this notebook's exercises; inline, it is the learner's own
    kernel = Kernel(Sandbox.create(confined.mode, course if inline_checks else course.for_grading(notebook),
                                   limits))
    try:
        try:
            kernel.start()
        except KernelStopped as exc:
            raise GradingError(str(exc)) from None
        for cell in merged.cells:
            if cell.cell_type != "code" or "nbval-skip" in course_options(course_cells[cell.id]):
                continue
            exercise = exercise_of_checker.get(cell.id)
            source = cell.source if exercise is None or inline_checks else calls[exercise.id].kernel_source
            left = deadline - time.monotonic()
            if left <= 0:
                out_of_time = True
                break
            capped = left < timeout  # this cell gets what is left of the notebook's time
            runs[cell.id] = kernel.run_cell(source, min(timeout, left)) if source.strip() else CellRun()
            out_of_time = capped and runs[cell.id].status == RAN_TOO_LONG
            if exercise is not None:
                statuses[exercise.id] = (
                    _cell_status(exercise, runs.get(exercise.cell_id), "your exercise cell", kernel.death, timeout)
                    or _cell_status(exercise, runs[cell.id], "the check cell", kernel.death, timeout,
                                    over if capped else "")
                )
                left = deadline - time.monotonic()
                if statuses[exercise.id] is None and left <= 0:
                    out_of_time = True
                elif statuses[exercise.id] is None:
                    statuses[exercise.id], extra = _grade(exercise, calls[exercise.id], kernel,
                                                          by_id[exercise.cell_id].source, min(timeout, left),
                                                          over if left < timeout else "")
                    out_of_time = out_of_time or (left < timeout and statuses[exercise.id].status == TIMEOUT)
                    notes += extra
            if out_of_time:
                break
            if not kernel.alive():
                kernel.death = kernel.death or "the kernel stopped"
                break
        kernel._read_peak_memory()
    finally:
        kernel.stop()
    if kernel.death:
        notes.append(f"{kernel.death}; the cells after that did not run")
    if out_of_time:
        left_out = [e for e in exercises if e.id not in statuses or statuses[e.id] is None]
        for exercise in left_out:
            in_it = runs.get(exercise.cell_id) is not None and runs[exercise.cell_id].status == RAN_TOO_LONG
            statuses[exercise.id] = (ExerciseStatus(exercise, TIMEOUT, f"timeout — {over} (your exercise cell)")
                                     if in_it else ExerciseStatus(exercise, NOT_RUN, f"not run — {over} before it"))
        notes.append(f"{over}; the cells after that did not run ({len(left_out)} exercises not run)")
    other_cells, uncompared = _other_cell_problems(merged, exercises, runs, edited, sanitize_patterns(root),
                                                   course_cells)
    result = CheckResult(
        name=name,
        solution=solution_path,
        exercises=[statuses.get(e.id) or _cell_status(e, None, "", kernel.death, timeout) for e in exercises],
        other_cells=other_cells,
        notes=notes + ([uncompared] if uncompared else []),
        seconds=time.monotonic() - start,
        isolation=confined.how,
        peak_memory_kb=kernel.peak_memory_kb,
    )
    for exercise in exercises:
        run = runs.get(exercise.checker_cell_id)
        result.check_cell_text[exercise.id] = "".join(
            o.get("text", "") for o in (run.outputs if run else []) if o.get("output_type") == "stream")
    result.cell_errors = [f"cell `{_first_line(by_id[cell_id].source)}`: {run.status} {run.ename}: {run.evalue}"
                          for cell_id, run in runs.items() if run.status != OK]
    if any(run.status == RAN_TOO_LONG for run in runs.values()):
        result.notes.append("a cell was stopped at the time limit; errors in the cells after it may follow from that")
    return result


def check_path(path: Path, root: Path | None = None, timeout: float = DEFAULT_TIMEOUT, **options: Any) -> CheckResult:
    """Check the learner notebook saved at ``path``."""
    return check_notebook(load_learner(Path(path)), Path(path).name, root, timeout, **options)


def format_report(result: CheckResult, verbose: bool = False) -> str:
    """The learner-facing summary; every item passes through ``quoted``, so learner text cannot forge a line."""
    lines = [f"Checked {quoted(result.name)} against the course notebook notebooks/{result.solution.name} "
             f"({result.seconds:.1f} s)"]
    lines += [f"  {quoted(status.line())}" for status in result.exercises]
    if result.other_cells:
        lines.append("Other cells that did not match the course run:")
        lines += [f"  {quoted(problem)}" for problem in result.other_cells]
    if result.notes:
        lines.append("Notes:")
        lines += [f"  - {quoted(note)}" for note in result.notes]
    lines.append(f"Learner code ran {result.isolation}")
    if verbose:
        lines.append(f"(peak memory of the kernel {result.peak_memory_kb / 1024:.0f} MB)")
    done = sum(status.status == PASSED for status in result.exercises)
    verdict = "the notebook passes" if result.passed else "the check fails"
    lines.append(f"{done} of {len(result.exercises)} exercises passed; {verdict}.")
    return "\n".join(lines)
