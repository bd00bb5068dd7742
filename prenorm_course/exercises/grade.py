"""Grade a folder of learner notebooks into the class's tables (:mod:`tables`).

Layout and learner names:

* ``FOLDER/<learner>/<any>.ipynb`` -- one subfolder per learner (any depth below it, up to a
  limit); the learner is the subfolder's name;
* ``FOLDER/<learner>.ipynb`` -- a flat file; the learner is the file's stem;
* ``FOLDER/collection.json`` -- when the hub's ``collect --due`` wrote it: when each file was
  last saved and whether that was late; never a learner's file.

Which course notebook a file belongs to is taken from its content (cell ids and exercise
headers), so ``alice.ipynb`` works and a notebook saved under another notebook's name is
still graded as what it is. Each notebook is checked in its own sandboxed kernel, ``jobs``
at a time, and the verdicts are computed in this process (see :mod:`check`).

One learner cannot stall or blind the class (every bound is a field of ``GradingLimits``):

* the folder is walked without recursion (``walk_class``): below a learner's folder at most
  ``folder_depth`` levels and ``learner_entries`` entries are searched, and a learner's first
  ``learner_notebooks`` notebooks (sorted) are graded; what was left is named in their notes;
* a file is read only when it is graded, its type and size checked first
  (``read_submission``: a named pipe, a device or a file over ``notebook_bytes`` is a row
  with its reason), and a learner's files count against ``learner_bytes`` together: the
  grader holds at most ``jobs`` files, never a class, in memory;
* a notebook has ``notebook_seconds`` in all, not only ``cell_seconds`` per cell;
* the tables are written in time linear in the class (:mod:`tables`).

One bad submission never costs the others their grades: a file that is not a notebook, a
notebook of no course notebook, a kernel that dies or a grading failure is a note in its
learner's row and the run goes on. The tables are written while grading, so the grades
decided so far survive even a grader that is killed. Regrading some learners
(``learners``) replaces their rows in the tables of an earlier run in ``out``
(``grades.json``) and keeps everyone else's.

Every kernel runs in bubblewrap (see :mod:`sandbox`): it cannot see the folder, the
course or another kernel. If bubblewrap cannot confine kernels here the run refuses,
unless ``trusted`` is asked for; either way the first line of grades.md says how the
learners' code ran. Submissions are collected without following symbolic links (a link
to the course's solution is not anyone's work). Learner text (folder names, messages)
reaches the terminal, the tables and the feedback files inert (:mod:`inert`).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from prenorm_course.exercises import inert
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.check import (
    DEFAULT_TIMEOUT,
    NOT_A_NOTEBOOK,
    NOT_DONE,
    NOT_RUN,
    PASSED,
    CheckResult,
    GradingError,
    NotANotebook,
    check_notebook,
    parse_learner,
)
from prenorm_course.exercises.limits import LIMITS, GradingLimits
from prenorm_course.exercises.markers import NotebookError, find_exercises
from prenorm_course.exercises.paths import exercise_name, repo_root, solution_notebooks
from prenorm_course.exercises.sandbox import CourseFiles, confinement
from prenorm_course.exercises.tables import COPY_RULE, ClassTable, Copy, read_collection

__all__ = ["COPY_RULE", "ClassFolder", "grade_folder", "learner_notebooks", "read_submission", "walk_class"]

COLLECTION = "collection.json"


@dataclass
class ClassFolder:
    """What ``walk_class`` found: each learner's notebooks, the links not followed, and what was left unsearched."""

    notebooks: dict[str, list[Path]] = field(default_factory=dict)  # learner -> notebooks, sorted
    notes: dict[str, list[str]] = field(default_factory=dict)  # learner -> what the walk left out, and links

    def note(self, learner: str, text: str) -> None:
        self.notes.setdefault(learner, []).append(text)


def _learner_of(relative: Path) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def walk_class(folder: Path, limits: GradingLimits = LIMITS) -> ClassFolder:
    """The learners' notebooks in ``folder``, found without recursion and within the folder limits.

    Hidden entries (``.ipynb_checkpoints``, ``.git``) are skipped; symbolic links are neither
    followed nor graded (each is named in its learner's notes). Each learner's own folder is
    searched to ``folder_depth`` levels below the class folder and over at most
    ``learner_entries`` entries; a learner's notebooks past ``learner_notebooks`` are not graded.
    """
    found = ClassFolder()
    with os.scandir(folder) as top:
        entries = sorted(top, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith(".") or (entry.name == COLLECTION and not entry.is_dir(follow_symlinks=False)):
            continue
        relative = Path(entry.name)
        if entry.is_symlink():
            if entry.name.endswith(".ipynb") or entry.is_dir():
                found.note(_learner_of(relative), f"{entry.name}: a symbolic link, not graded")
        elif entry.is_dir(follow_symlinks=False):
            _walk_learner(folder, relative, found, limits)
        elif entry.name.endswith(".ipynb"):
            found.notebooks.setdefault(relative.stem, []).append(folder / relative)
    for learner, paths in found.notebooks.items():
        paths.sort()
        if len(paths) > limits.learner_notebooks:
            skipped = paths[limits.learner_notebooks:]
            found.note(learner, f"{len(skipped)} more notebooks not graded (the first {limits.learner_notebooks}, "
                                f"sorted, were): {', '.join(p.relative_to(folder).as_posix() for p in skipped[:3])}"
                                + (", ..." if len(skipped) > 3 else ""))
            del paths[limits.learner_notebooks:]
    return found


def _walk_learner(folder: Path, start: Path, found: ClassFolder, limits: GradingLimits) -> None:
    """One learner's folder, breadth first with an explicit queue: no recursion, bounded depth and entries."""
    learner = start.parts[0]
    queue, seen, too_deep = [start], 0, []
    while queue:
        relative = queue.pop(0)
        try:
            with os.scandir(folder / relative) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            found.note(learner, f"{relative.as_posix()}: cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            seen += 1
            if seen > limits.learner_entries:
                found.note(learner, f"more than {limits.learner_entries} files and folders: the rest were not "
                                    f"searched (from {relative.as_posix()} on)")
                return
            if entry.name.startswith("."):
                continue
            child = relative / entry.name
            if entry.is_symlink():
                if entry.name.endswith(".ipynb") or entry.is_dir():
                    found.note(learner, f"{child.as_posix()}: a symbolic link, not graded")
            elif entry.is_dir(follow_symlinks=False):
                if len(child.parts) > limits.folder_depth:
                    too_deep.append(child)
                else:
                    queue.append(child)
            elif entry.name.endswith(".ipynb"):
                found.notebooks.setdefault(learner, []).append(folder / child)
    if too_deep:
        found.note(learner, f"folders more than {limits.folder_depth} levels down were not searched: "
                            f"{too_deep[0].as_posix()[:200]}" + (f" and {len(too_deep) - 1} more" if len(too_deep) > 1
                                                                else ""))


def learner_notebooks(folder: Path, limits: GradingLimits = LIMITS) -> list[tuple[str, Path]]:
    """``(learner, notebook)`` pairs found in ``folder`` (``walk_class``), sorted by path."""
    found = walk_class(folder, limits)
    return sorted(((learner, path) for learner, paths in found.notebooks.items() for path in paths),
                  key=lambda item: item[1])


def read_submission(path: Path, limits: GradingLimits = LIMITS) -> bytes:
    """The bytes of a learner's file, its type and size checked before reading (``NotANotebook`` says why not).

    Opened without following a link and without blocking (a named pipe would wait for a
    writer forever), then ``fstat`` on the open file: only a regular file of at most
    ``notebook_bytes`` is read, and never more than that many bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise NotANotebook(f"the file cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            kind = "a named pipe" if stat.S_ISFIFO(info.st_mode) else "a device, socket or folder"
            raise NotANotebook(f"it is {kind}, not a file")
        if info.st_size > limits.notebook_bytes:
            raise NotANotebook(f"the file is larger than {limits.notebook_bytes // 2**20} MB "
                               f"({info.st_size / 2**20:.0f} MB); it was not read")
        data = f.read(limits.notebook_bytes + 1)
    if len(data) > limits.notebook_bytes:  # it grew while being read
        raise NotANotebook(f"the file is larger than {limits.notebook_bytes // 2**20} MB; it was not read")
    return data


def _within_budget(found: ClassFolder, limits: GradingLimits) -> dict[Path, str]:
    """Files not to read because their learner's files together pass ``learner_bytes`` (sizes from ``lstat``)."""
    over: dict[Path, str] = {}
    for paths in found.notebooks.values():
        total = 0
        for path in paths:
            try:
                size = path.lstat().st_size
            except OSError:
                continue
            if size > limits.notebook_bytes:  # never read at all: it has its own reason
                continue
            total += size
            if total > limits.learner_bytes:
                over[path] = (f"not read: this learner's files pass {limits.learner_bytes // 2**20} MB in all "
                              "(a larger file may have come first: files are taken in sorted order)")
    return over


def course_exercises(root: Path) -> dict[str, list[str]]:
    """Each course notebook's exercise ids, in order, by its exercise name (for the tables' maxima and an
    unreadable file's row)."""
    found = {}
    for path in solution_notebooks(root):
        try:
            found[exercise_name(path)] = [e.id for e in find_exercises(read_notebook(path), path.name)]
        except (NotebookError, OSError, ValueError):
            found[exercise_name(path)] = []
    return found


def copy_of(where: str, result: CheckResult) -> Copy:
    """One graded file as the tables keep it."""
    return Copy(
        where=where, notebook=exercise_name(result.solution),
        statuses={s.exercise.id: s.status.value for s in result.exercises},
        lines={s.exercise.id: s.line() for s in result.exercises},
        details=[f"Exercise {s.exercise.id}: {s.detail}" for s in result.exercises
                 if s.status not in (PASSED, NOT_DONE, NOT_RUN)],
        notes=[f"{where}: {note}" for note in result.notes if note.startswith(("recognised", "the notebook's time"))],
        feedback=[f"a cell that did not match the course run: {problem}" for problem in result.other_cells]
        + list(result.notes))


def grade_folder(
    folder: Path,
    out_dir: Path | None = None,
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int = 2,
    progress: Callable[[str], None] = print,
    trusted: bool = False,
    learners: Iterable[str] | None = None,
    limits: GradingLimits = LIMITS,
) -> dict[str, dict[str, str]]:
    """Check every learner notebook (or only ``learners``'); write the tables; return learner -> exercise -> status."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"FOLDER must be a folder of learner notebooks, got {folder}")
    root = repo_root(root)
    out = Path(out_dir).resolve() if out_dir else folder
    say: Callable[[str], None] = lambda text: progress(inert.one_line(text))
    found = walk_class(folder, limits)
    chosen = None if learners is None else set(learners)
    if chosen is not None:
        found.notebooks = {k: v for k, v in found.notebooks.items() if k in chosen}
        found.notes = {k: v for k, v in found.notes.items() if k in chosen}
        if not found.notebooks:
            raise FileNotFoundError(f"no .ipynb files of {', '.join(sorted(chosen))} in {folder}")
    elif not found.notebooks:
        raise FileNotFoundError(f"no .ipynb files in {folder}")
    confined = confinement(trusted, limits)
    say(f"learner code runs {confined.how}")
    collection, why = read_collection(folder)
    if why:
        say(why)
    exercises = course_exercises(root)
    table = ClassTable(exercises, confined.how, collection)
    if chosen is not None:
        why = table.load(out)
        if why:
            say(why)
        table.forget(chosen)
    for learner, notes in found.notes.items():
        for note in notes:
            table.note(learner, note)
    course = CourseFiles.take(root)
    over_budget = _within_budget(found, limits)
    lock = threading.Lock()

    def record(learner: str, copy: Copy | None, note: str = "") -> None:
        """Keep one file's outcome, and write the tables again unless that would take a large share of the time."""
        with lock:
            if note:
                table.note(learner, note)
            if copy is not None:
                table.record(learner, copy)
            if table.due():
                table.write(out)

    def grade_one(item: tuple[str, Path]) -> None:
        learner, path = item
        where = path.relative_to(folder).as_posix()
        try:
            if path in over_budget:
                raise NotANotebook(over_budget[path])
            learner_nb = parse_learner(read_submission(path, limits), limits)
            result = check_notebook(learner_nb, path.name, root, timeout, course=course, confined=confined,
                                    limits=limits)
        except NotANotebook as exc:
            say(f"{learner}: {where}: {exc}")
            marked = dict.fromkeys(exercises.get(path.name, []), NOT_A_NOTEBOOK.value)
            record(learner, Copy(where, path.name, marked, notes=[f"{where}: {exc}"], feedback=[str(exc)]))
        except (NotebookError, GradingError) as exc:
            say(f"{learner}: {where}: {exc}")
            record(learner, None, f"{where}: {exc}")
        except Exception as exc:  # a failure of the grader on one file must not cost the others their grades
            say(f"{learner}: {where}: grading failed: {type(exc).__name__}: {exc}")
            record(learner, None, f"{where}: grading failed: {type(exc).__name__}: {exc}")
        else:
            say(f"{learner}: {where}: {sum(s.status == PASSED for s in result.exercises)}"
                f"/{len(result.exercises)} passed ({result.seconds:.0f} s)")
            record(learner, copy_of(where, result))

    items = [(learner, path) for learner, paths in sorted(found.notebooks.items()) for path in paths]
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        list(pool.map(grade_one, items))
    with lock:
        table.write(out)
    return table.statuses()
