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
is written into the table's ``notes`` and the run goes on. The tables are written
in any case: ``grades.md`` (with the hint, error and timeout messages listed below
it) and ``grades.csv``.

Without root (plain isolation) the course tree and the submissions are fingerprinted
before grading and restored after each notebook; a submission that changed anything
is named in the notes (see :mod:`sandbox`).
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import prenorm_lib
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.check import (
    DEFAULT_TIMEOUT,
    NOT_A_NOTEBOOK,
    NOT_DONE,
    NOT_RUN,
    PASSED,
    GradingError,
    NotANotebook,
    check_notebook,
    parse_learner,
)
from prenorm_course.exercises.markers import NotebookError, find_exercises, id_key
from prenorm_course.exercises.paths import repo_root, solution_dir
from prenorm_course.exercises.sandbox import PLAIN, CourseFiles, TreeGuard, isolation

MISSING = "missing"


def learner_notebooks(folder: Path) -> list[tuple[str, Path]]:
    """``(learner, notebook)`` pairs found in ``folder``, sorted (checkpoints and hidden files skipped)."""
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        learner = relative.parts[0] if len(relative.parts) > 1 else path.stem
        found.append((learner, path))
    return found


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
) -> dict[str, dict[str, str]]:
    """Check every learner notebook; write grades.md/grades.csv; return learner -> exercise -> status."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"FOLDER must be a folder of learner notebooks, got {folder}")
    root = repo_root(root)
    out = Path(out_dir).resolve() if out_dir else folder
    submissions = []
    for learner, path in learner_notebooks(folder):
        try:
            submissions.append((learner, path, path.read_bytes()))
        except OSError as exc:
            submissions.append((learner, path, exc))
    if not submissions:
        raise FileNotFoundError(f"no .ipynb files in {folder}")
    mode, why = isolation()
    progress(f"kernel isolation: {mode} ({why})")
    course = CourseFiles.take(root)
    package = Path(prenorm_lib.__file__).resolve().parent  # the library, wherever it is installed from
    guard = TreeGuard([root, folder, package]) if mode == PLAIN else None
    lock = threading.Lock()
    running: dict[str, str] = {}  # learner -> file, while its kernel runs
    table: dict[str, dict[str, str]] = {}
    details: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}

    def record(learner: str, statuses: dict[str, str], detail: list[str], note: list[str]) -> None:
        with lock:
            table.setdefault(learner, {}).update(statuses)
            details.setdefault(learner, []).extend(detail)
            notes.setdefault(learner, []).extend(note)

    def grade_one(item: tuple[str, Path, bytes | OSError]) -> None:
        learner, path, data = item
        where = path.relative_to(folder).as_posix()
        with lock:
            running[learner] = where
        try:
            if isinstance(data, OSError):
                raise NotANotebook(f"the file cannot be read ({data.strerror})")
            result = check_notebook(parse_learner(data), path.name, root, timeout, course=course, mode=mode,
                                    hide=[folder, out])
        except NotANotebook as exc:
            progress(f"{learner}: {where}: {exc}")
            marked = dict.fromkeys(_exercises_named_by(path.name, root), NOT_A_NOTEBOOK)
            record(learner, marked, [], [f"{where}: {exc}"])
        except (NotebookError, GradingError) as exc:
            progress(f"{learner}: {where}: {exc}")
            record(learner, {}, [], [f"{where}: {exc}"])
        except Exception as exc:  # a failure of the grader on one file must not cost the others their grades
            progress(f"{learner}: {where}: grading failed: {type(exc).__name__}: {exc}")
            record(learner, {}, [], [f"{where}: grading failed: {type(exc).__name__}: {exc}"])
        else:
            progress(f"{learner}: {where}: {sum(s.status == PASSED for s in result.exercises)}"
                     f"/{len(result.exercises)} passed ({result.seconds:.0f} s)")
            statuses = {s.exercise.id: s.status for s in result.exercises}
            detail = [f"Exercise {s.exercise.id}: {s.detail}" for s in result.exercises
                      if s.status not in (PASSED, NOT_DONE, NOT_RUN)]
            recognised = [f"{where}: {note}" for note in result.notes if note.startswith("recognised")]
            record(learner, statuses, detail, recognised)
        finally:
            with lock:
                suspects = dict(running)
                running.pop(learner, None)
                changed = guard.restore() if guard is not None else []
            if changed:
                shown = ", ".join(changed[:5]) + (", ..." if len(changed) > 5 else "")
                also = f" — running at the time: {', '.join(sorted(suspects))}" if len(suspects) > 1 else ""
                for suspect, suspect_file in suspects.items():
                    message = f"files outside the kernel's folder changed while this ran (put back): {shown}{also}"
                    progress(f"{suspect}: {suspect_file}: {message}")
                    record(suspect, {}, [], [f"{suspect_file}: {message}"])

    try:
        with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            list(pool.map(grade_one, submissions))
    finally:
        write_tables(table, details, out, notes)
    return table


def _columns(table: dict[str, dict[str, str]]) -> list[str]:
    ids = {e for row in table.values() for e in row}
    return sorted(ids, key=id_key)


def write_tables(table: dict[str, dict[str, str]], details: dict[str, list[str]], out_dir: Path,
                 notes: dict[str, list[str]] | None = None) -> None:
    """grades.csv (learner, one column per exercise, passed, notes) and grades.md (the same, plus hints)."""
    notes = notes or {}
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = _columns(table)
    rows = []
    for learner in sorted(table):
        cells = [table[learner].get(e, MISSING) for e in columns]
        rows.append([learner, *cells, f"{cells.count(PASSED)}/{len(columns)}", "; ".join(notes.get(learner, []))])
    header = ["learner", *columns, "passed", "notes"]
    with open(out_dir / "grades.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    md = ["| " + " | ".join(header[:-1]) + " |", "|" + "---|" * (len(header) - 1)]
    md += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row[:-1]) + " |" for row in rows]
    lines = [(learner, line) for learner in sorted(table) for line in notes.get(learner, []) + details.get(learner, [])]
    if lines:
        md += ["", "## Details", ""] + [f"- **{learner}** — {line}" for learner, line in lines]
    (out_dir / "grades.md").write_text("\n".join(md) + "\n", encoding="utf-8")
