"""Grade a folder of learner notebooks into a learner x exercise table.

Layout and learner names:

* ``FOLDER/<learner>/<any>.ipynb`` -- one subfolder per learner (any depth
  below it); the learner is the subfolder's name;
* ``FOLDER/<learner>.ipynb`` -- a flat file; the learner is the file's stem.

Which course notebook a file belongs to is taken from its content (cell ids and
exercise headers), so ``alice.ipynb`` works and a notebook saved under another
notebook's name is still graded as what it is. Every file is read into memory before
any learner code runs; each notebook is checked in its own sandboxed kernel, ``jobs``
at a time, and the verdicts are computed in this process (see :mod:`check`).

One bad submission never costs the others their grades: a file that is not a
notebook, a notebook of no course notebook, a kernel that dies or a grading failure
is written into the table's ``notes`` and the run goes on. Each file's type and size
are checked before it is read (``read_submission``): a named pipe, a device or a file
over the size limit is a row with its reason, never a blocked or exhausted grader.
The tables -- ``grades.md`` (with the hint, error and timeout messages listed below
it) and ``grades.csv`` -- are written again after every file, so the grades decided so
far survive even a grader that is killed.

Two copies of one course notebook from one learner (``alice/01.ipynb`` and
``alice/retry/01.ipynb``) are both graded; the row counts the copy with the most
passed exercises, a tie going to the path that sorts first (``COPY_RULE``), and the
notes name the file counted and the file not counted.

Every kernel runs in bubblewrap (see :mod:`sandbox`): it cannot see the folder, the
course or another kernel, so nothing needs putting back. If bubblewrap cannot confine
kernels here the run refuses, unless ``trusted`` is asked for; either way the first
line of grades.md says how the learners' code ran. Submissions are collected without
following symbolic links (a link to the course's solution is not anyone's work).
"""

from __future__ import annotations

import csv
import os
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.check import (
    DEFAULT_TIMEOUT,
    NOT_A_NOTEBOOK,
    NOT_DONE,
    NOT_RUN,
    PASSED,
    GradingError,
    NotANotebook,
    Status,
    check_notebook,
    parse_learner,
)
from prenorm_course.exercises.limits import LIMITS, GradingLimits
from prenorm_course.exercises.markers import NotebookError, find_exercises, id_key
from prenorm_course.exercises.paths import repo_root, solution_dir
from prenorm_course.exercises.sandbox import CourseFiles, confinement

COPY_RULE = "the copy with the most passed exercises counts, a tie going to the path that sorts first"


def learner_notebooks(folder: Path) -> list[tuple[str, Path]]:
    """``(learner, notebook)`` pairs found in ``folder``, sorted (checkpoints and hidden files skipped).

    Symbolic links are neither followed into nor read: a submission is a file in the folder.
    """
    found = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(top, d))]
        for name in files:
            path = Path(top) / name
            if not name.endswith(".ipynb") or name.startswith(".") or path.is_symlink():
                continue
            relative = path.relative_to(folder)
            learner = relative.parts[0] if len(relative.parts) > 1 else path.stem
            found.append((learner, path))
    return sorted(found, key=lambda item: item[1])


def symlinked_notebooks(folder: Path) -> list[Path]:
    """Symbolic links to notebooks in ``folder`` (not graded; named in the report)."""
    found = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(top) / n for n in dirs + files if os.path.islink(os.path.join(top, n))]
    return sorted(found)


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


def _exercises_named_by(name: str, root: Path) -> list[str]:
    """The exercise ids of the course notebook called ``name`` (for marking an unreadable file)."""
    path = solution_dir(root) / name
    if not path.is_file():
        return []
    try:
        return [e.id for e in find_exercises(read_notebook(path), name)]
    except (NotebookError, OSError, ValueError):
        return []


def grade_folder(
    folder: Path,
    out_dir: Path | None = None,
    root: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int = 2,
    progress: Callable[[str], None] = print,
    trusted: bool = False,
) -> dict[str, dict[str, str]]:
    """Check every learner notebook; write grades.md/grades.csv; return learner -> exercise -> status."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"FOLDER must be a folder of learner notebooks, got {folder}")
    root = repo_root(root)
    out = Path(out_dir).resolve() if out_dir else folder
    submissions: list[tuple[str, Path, bytes | NotANotebook]] = []
    for learner, path in learner_notebooks(folder):
        try:
            submissions.append((learner, path, read_submission(path)))
        except NotANotebook as exc:
            submissions.append((learner, path, exc))
    links = symlinked_notebooks(folder)
    if not submissions:
        raise FileNotFoundError(f"no .ipynb files in {folder}")
    confined = confinement(trusted)
    progress(f"learner code runs {confined.how}")
    course = CourseFiles.take(root)
    lock = threading.Lock()
    copies: dict[tuple[str, str], list[Copy]] = {}  # (learner, course notebook) -> each file graded as it
    notes: dict[str, list[str]] = {}
    for link in links:
        relative = link.relative_to(folder)
        learner = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        notes.setdefault(learner, []).append(f"{relative.as_posix()}: a symbolic link, not graded")

    def record(learner: str, copy: Copy | None, note: list[str]) -> None:
        """Keep one file's outcome and write the tables again: what is decided is on disk at once."""
        with lock:
            notes.setdefault(learner, []).extend(note)
            if copy is not None:
                copies.setdefault((learner, copy.notebook), []).append(copy)
            table, details, all_notes = counted_copies(copies, notes)
            write_tables(table, details, out, all_notes, confined.how)

    def grade_one(item: tuple[str, Path, bytes | NotANotebook]) -> None:
        learner, path, data = item
        where = path.relative_to(folder).as_posix()
        try:
            if isinstance(data, NotANotebook):
                raise data
            result = check_notebook(parse_learner(data), path.name, root, timeout, course=course,
                                    confined=confined)
        except NotANotebook as exc:
            progress(f"{learner}: {where}: {exc}")
            marked = dict.fromkeys(_exercises_named_by(path.name, root), NOT_A_NOTEBOOK)
            record(learner, Copy(where, path.name, marked, [], [f"{where}: {exc}"]), [])
        except (NotebookError, GradingError) as exc:
            progress(f"{learner}: {where}: {exc}")
            record(learner, None, [f"{where}: {exc}"])
        except Exception as exc:  # a failure of the grader on one file must not cost the others their grades
            progress(f"{learner}: {where}: grading failed: {type(exc).__name__}: {exc}")
            record(learner, None, [f"{where}: grading failed: {type(exc).__name__}: {exc}"])
        else:
            progress(f"{learner}: {where}: {sum(s.status == PASSED for s in result.exercises)}"
                     f"/{len(result.exercises)} passed ({result.seconds:.0f} s)")
            statuses = {s.exercise.id: s.status for s in result.exercises}
            detail = [f"Exercise {s.exercise.id}: {s.detail}" for s in result.exercises
                      if s.status not in (PASSED, NOT_DONE, NOT_RUN)]
            recognised = [f"{where}: {note}" for note in result.notes if note.startswith("recognised")]
            record(learner, Copy(where, result.solution.name, statuses, detail, recognised), [])

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        list(pool.map(grade_one, submissions))
    with lock:
        table, details, all_notes = counted_copies(copies, notes)
        write_tables(table, details, out, all_notes, confined.how)
    return table



@dataclass
class Copy:
    """One file's outcome: where it is, which course notebook it was graded as, its statuses and notes."""

    where: str
    notebook: str
    statuses: dict[str, str]
    details: list[str]
    notes: list[str]

    @property
    def passes(self) -> int:
        return sum(status == PASSED for status in self.statuses.values())


def counted_copies(copies: dict[tuple[str, str], list[Copy]], notes: dict[str, list[str]]
                   ) -> tuple[dict[str, dict[str, str]], dict[str, list[str]], dict[str, list[str]]]:
    """The table, details and notes from the copies kept so far; of two copies ``COPY_RULE`` picks one."""
    table: dict[str, dict[str, str]] = {learner: {} for learner in notes}
    details: dict[str, list[str]] = {}
    all_notes = {learner: list(lines) for learner, lines in notes.items()}
    for (learner, notebook), found in sorted(copies.items()):
        ranked = sorted(found, key=lambda c: (-c.passes, c.where))
        chosen = ranked[0]
        table.setdefault(learner, {}).update(chosen.statuses)
        details.setdefault(learner, []).extend(chosen.details)
        kept = all_notes.setdefault(learner, [])
        kept.extend(chosen.notes)
        if len(ranked) > 1:
            others = ", ".join(f"{c.where} ({c.passes} passed)" for c in ranked[1:])
            kept.append(f"{len(ranked)} copies of {notebook}: {chosen.where} ({chosen.passes} passed) counted, "
                        f"not {others} — {COPY_RULE}")
    return table, details, all_notes


def _columns(table: dict[str, dict[str, str]]) -> list[str]:
    ids = {e for row in table.values() for e in row}
    return sorted(ids, key=id_key)


def md_text(text: str) -> str:
    """Learner text made inert in a Markdown table or list: one line, no table bars, no HTML."""
    text = " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def csv_text(text: str) -> str:
    """Learner text for a CSV cell: one line, and never a spreadsheet formula."""
    text = " ".join(str(text).split())
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def write_tables(table: dict[str, dict[str, str]], details: dict[str, list[str]], out_dir: Path,
                 notes: dict[str, list[str]] | None = None, how: str = "") -> None:
    """grades.csv (learner, one column per exercise, passed, notes) and grades.md (the same, plus hints).

    Learner names, notes and hints are the learners' text: escaped (``md_text``, ``csv_text``).
    ``how`` (how the learners' code ran) is the first line of grades.md.
    """
    notes = notes or {}
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = _columns(table)
    rows = []
    for learner in sorted(table):
        cells = [table[learner].get(e, Status.MISSING) for e in columns]
        rows.append([learner, *cells, f"{cells.count(PASSED)}/{len(columns)}", "; ".join(notes.get(learner, []))])
    header = ["learner", *columns, "passed", "notes"]
    with open(out_dir / "grades.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([[csv_text(cell) for cell in row] for row in rows])
    md = [f"Learner code ran {md_text(how)}.", ""] if how else []
    md += ["| " + " | ".join(header[:-1]) + " |", "|" + "---|" * (len(header) - 1)]
    md += ["| " + " | ".join(md_text(cell) for cell in row[:-1]) + " |" for row in rows]
    lines = [(learner, line) for learner in sorted(table) for line in notes.get(learner, []) + details.get(learner, [])]
    if lines:
        md += ["", "## Details", ""] + [f"- **{md_text(learner)}** — {md_text(line)}" for learner, line in lines]
    (out_dir / "grades.md").write_text("\n".join(md) + "\n", encoding="utf-8")
