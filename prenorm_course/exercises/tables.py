"""The class's grades: what ``grade`` decided, kept per learner and written as the teacher's tables.

``ClassTable`` holds every file's outcome (a ``Copy``) and the notes of each learner, and writes

* ``grades.csv`` -- one row per learner: a status column per exercise, then per notebook its
  points (one per passed exercise), maximum and percentage, and, when the class folder holds
  the ``collection.json`` that the hub's ``collect --due`` writes, when the learner last saved it
  and whether that was late; then the totals and the notes. Numbers are numbers (an LMS
  imports them); learner text is a CSV cell that no spreadsheet reads as a formula;
* ``grades.md`` -- the same, readable: the status table, one row per learner and notebook
  (points, file counted, last saved, late), and the details (hints, errors, notes), learner
  text inert (:mod:`inert`);
* ``feedback/<learner>/<notebook stem>-feedback.md`` -- for each learner and notebook graded,
  what ``check`` would have told them: each exercise's line, the cells that did not match the
  course run, the notes; learner text inert. The hub's ``feedback`` command copies
  ``feedback/<learner>/`` into that learner's home;
* ``grades.json`` -- the outcomes themselves, so that regrading some learners
  (``grade FOLDER --learner alice``) replaces their rows and keeps everyone else's.

Of two copies of one course notebook from one learner the one with the most passed
exercises counts, a tie going to the path that sorts first (``COPY_RULE``); the notes name
both. While grading, the tables are written again after a file's outcome unless the last
write was so recent that writing would take more than a twentieth of the time (``due``):
each write is linear in the class, and a class of files decided at once (3000 empty files)
costs a few writes, not 3000.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prenorm_course.exercises import inert
from prenorm_course.exercises.check import Status
from prenorm_course.exercises.markers import id_key

COPY_RULE = "the copy with the most passed exercises counts, a tie going to the path that sorts first"
STATE_FILE = "grades.json"
STATE_VERSION = 1
FEEDBACK_DIR = "feedback"
WRITE_SHARE = 20  # a rewrite waits until this many times its own duration has passed since the last one


@dataclass
class Copy:
    """One learner file's outcome: where it is, which course notebook it was graded as, and what ``check`` said."""

    where: str  # relative to the class folder
    notebook: str  # the course notebook's file name
    statuses: dict[str, str]  # exercise id -> Status value
    lines: dict[str, str] = field(default_factory=dict)  # exercise id -> the learner's line ("Exercise 1.1 (…): …")
    details: list[str] = field(default_factory=list)  # for the teacher: hints, errors, timeouts
    notes: list[str] = field(default_factory=list)  # for the teacher: recognised as, time limit reached
    feedback: list[str] = field(default_factory=list)  # for the learner: cells that differ, notes

    @property
    def passes(self) -> int:
        return sum(status == Status.PASSED for status in self.statuses.values())


@dataclass(frozen=True)
class Saved:
    """When a learner last saved a collected file, and whether that was after the due time (``collection.json``)."""

    last_saved: str
    late: bool


def read_collection(folder: Path) -> tuple[dict[str, Saved] | None, str]:
    """``FOLDER/collection.json`` as the hub's ``collect --due`` writes it: ``(files, "")``, ``(None, "")`` if
    there is none, ``(None, why)`` if it is not in that form (then no late columns, and the teacher is told)."""
    path = folder / "collection.json"
    if not path.is_file() or path.is_symlink():
        return None, ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"]
        if not isinstance(files, dict) or not all(isinstance(k, str) for k in files):
            raise TypeError("files is not an object of file names")
        found = {}
        for name, entry in files.items():
            if not isinstance(entry.get("last_saved"), str) or not isinstance(entry.get("late"), bool):
                raise TypeError(f"{name}: last_saved must be text and late true or false")
            found[name] = Saved(entry["last_saved"], entry["late"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"collection.json is not as `collect --due` writes it ({exc}); no last-saved or late columns"
    return found, ""


@dataclass
class LearnerGrades:
    notes: list[str] = field(default_factory=list)
    copies: dict[str, list[Copy]] = field(default_factory=dict)  # course notebook -> each file graded as it

    def counted(self) -> dict[str, tuple[Copy, list[Copy]]]:
        """Per notebook: the copy that counts and the others (``COPY_RULE``)."""
        chosen = {}
        for notebook, found in sorted(self.copies.items()):
            ranked = sorted(found, key=lambda c: (-c.passes, c.where))
            chosen[notebook] = (ranked[0], ranked[1:])
        return chosen

    def all_notes(self) -> list[str]:
        lines = list(self.notes)
        for notebook, (copy, others) in self.counted().items():
            lines += copy.notes
            if others:
                rest = ", ".join(f"{c.where} ({c.passes} passed)" for c in others)
                lines.append(f"{len(others) + 1} copies of {notebook}: {copy.where} ({copy.passes} passed) counted, "
                             f"not {rest} — {COPY_RULE}")
        return lines


class ClassTable:
    """The grades of a class as ``grade`` decides them; ``write`` puts the tables (and feedback) on disk."""

    def __init__(self, exercises: Mapping[str, list[str]], how: str, collection: dict[str, Saved] | None = None):
        self.exercises = dict(exercises)  # course notebook -> its exercise ids, in order
        self.how = how
        self.collection = collection
        self.learners: dict[str, LearnerGrades] = {}
        self._rows: dict[str, tuple[tuple, tuple]] = {}  # learner -> ((columns, notebooks), rendered rows)
        self._dirty: set[str] = set()  # learners whose feedback files are not written yet
        self._last_write = -1e9
        self._write_seconds = 0.0

    # --- what is decided ---------------------------------------------------------------------------------

    def note(self, learner: str, text: str) -> None:
        self.learners.setdefault(learner, LearnerGrades()).notes.append(text)
        self._changed(learner)

    def record(self, learner: str, copy: Copy) -> None:
        self.learners.setdefault(learner, LearnerGrades()).copies.setdefault(copy.notebook, []).append(copy)
        self._changed(learner)

    def _changed(self, learner: str) -> None:
        self._rows.pop(learner, None)
        self._dirty.add(learner)

    def forget(self, learners: set[str]) -> None:
        """Drop these learners' rows (they are about to be graded again)."""
        for learner in learners:
            self.learners.pop(learner, None)
            self._rows.pop(learner, None)

    def statuses(self) -> dict[str, dict[str, str]]:
        """learner -> exercise id -> status of the counted copies (what ``grade_folder`` returns)."""
        return {learner: {e: s for copy, _ in grades.counted().values() for e, s in copy.statuses.items()}
                for learner, grades in self.learners.items()}

    # --- the columns -------------------------------------------------------------------------------------

    def notebooks(self) -> list[str]:
        """The course notebooks anyone handed in, in course order."""
        return sorted({notebook for grades in self.learners.values() for notebook in grades.copies})

    def columns(self) -> list[str]:
        ids = {e for notebook in self.notebooks() for e in self.exercises.get(notebook, [])}
        ids |= {e for grades in self.learners.values() for found in grades.copies.values() for c in found
                for e in c.statuses}
        return sorted(ids, key=id_key)

    def _row(self, learner: str, columns: list[str], notebooks: list[str]) -> tuple:
        """(csv row, md row, details, per-notebook md rows) of one learner, rendered once until it changes."""
        cached = self._rows.get(learner)
        if cached is not None and cached[0] == (columns, notebooks):
            return cached[1]
        grades = self.learners[learner]
        counted = grades.counted()
        statuses = {e: s for copy, _ in counted.values() for e, s in copy.statuses.items()}
        csv_row: list = [learner, *(statuses.get(e, Status.MISSING.value) for e in columns)]
        per_notebook = []
        total = total_max = 0
        for notebook in notebooks:
            copy = counted.get(notebook, (None, []))[0]
            maximum = len(self.exercises.get(notebook, [])) or (len(copy.statuses) if copy else 0)
            points = copy.passes if copy else 0
            total, total_max = total + points, total_max + maximum
            csv_row += [points, maximum, _percent(points, maximum)]
            saved = self.collection.get(copy.where) if self.collection is not None and copy else None
            if self.collection is not None:
                csv_row += [saved.last_saved if saved else "", ("yes" if saved.late else "no") if saved else ""]
            if copy is not None:
                per_notebook.append([learner, notebook, f"{points}", f"{maximum}", f"{_percent(points, maximum):g} %",
                                     copy.where, *([saved.last_saved if saved else "not in collection.json",
                                                    ("late" if saved.late else "on time") if saved else ""]
                                                   if self.collection is not None else [])])
        notes = grades.all_notes()
        csv_row += [total, total_max, _percent(total, total_max), "; ".join(notes)]
        md_row = [learner, *csv_row[1:1 + len(columns)], f"{total}/{total_max}"]
        details = notes + [line for copy, _ in counted.values() for line in copy.details]
        rows = (csv_row, md_row, details, per_notebook)
        self._rows[learner] = ((columns, notebooks), rows)
        return rows

    # --- on disk -----------------------------------------------------------------------------------------

    def due(self) -> bool:
        """Whether a rewrite now keeps writing under a twentieth of the time (always true for the first)."""
        return time.monotonic() - self._last_write >= WRITE_SHARE * self._write_seconds

    def write(self, out: Path, feedback: bool = True) -> None:
        """grades.csv, grades.md, grades.json (and each learner's feedback files) in ``out``."""
        start = time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        columns, notebooks = self.columns(), self.notebooks()
        learners = sorted(self.learners)
        rows = [self._row(learner, columns, notebooks) for learner in learners]
        stems = [Path(n).stem for n in notebooks]
        late = ["last saved", "late"] if self.collection is not None else []
        header = ["learner", *columns,
                  *(f"{stem} {what}" for stem in stems for what in ("points", "max", "percent", *late)),
                  "points", "max", "percent", "notes"]
        _atomic(out / "grades.csv", _csv([header, *(row[0] for row in rows)]))
        md = [f"Learner code ran {inert.markdown(self.how)}.", ""] if self.how else []
        md += ["| " + " | ".join(["learner", *columns, "points"]) + " |", "|" + "---|" * (len(columns) + 2)]
        md += ["| " + " | ".join(inert.markdown(cell) for cell in row[1]) + " |" for row in rows]
        per_notebook = [line for row in rows for line in row[3]]
        if per_notebook:
            md += ["", "## Per notebook", "",
                   "| " + " | ".join(["learner", "notebook", "points", "max", "percent", "file counted",
                                      *(["last saved", "late"] if late else [])]) + " |",
                   "|" + "---|" * (6 + len(late))]
            md += ["| " + " | ".join(inert.markdown(cell) for cell in line) + " |" for line in per_notebook]
        details = [(learner, line) for learner, row in zip(learners, rows, strict=True) for line in row[2]]
        if details:
            md += ["", "## Details", ""] + [f"- **{inert.markdown(learner)}** — {inert.markdown(line)}"
                                            for learner, line in details]
        _atomic(out / "grades.md", "\n".join(md) + "\n")
        _atomic(out / STATE_FILE, json.dumps(self.state(), ensure_ascii=False, indent=1) + "\n")
        if feedback:
            self.write_feedback(out / FEEDBACK_DIR, sorted(self._dirty & set(self.learners)))
            self._dirty.clear()
        self._last_write = time.monotonic()
        self._write_seconds = self._last_write - start

    def write_feedback(self, folder: Path, learners: list[str]) -> None:
        """``feedback/<learner>/<notebook stem>-feedback.md`` for each notebook of these learners."""
        for learner in learners:
            if learner in ("", ".", "..") or Path(learner).name != learner:  # never a path outside ``folder``
                continue
            shutil.rmtree(folder / learner, ignore_errors=True)  # a notebook no longer graded leaves no old file
            for notebook, (copy, _) in self.learners[learner].counted().items():
                target = folder / learner / f"{Path(notebook).stem}-feedback.md"
                target.parent.mkdir(parents=True, exist_ok=True)
                _atomic(target, feedback_text(notebook, copy, self.exercises.get(notebook, [])))

    # --- kept between runs -------------------------------------------------------------------------------

    def state(self) -> dict:
        return {"version": STATE_VERSION, "learners": {
            learner: {"notes": grades.notes, "copies": [asdict(c) for found in grades.copies.values() for c in found]}
            for learner, grades in sorted(self.learners.items())}}

    def load(self, out: Path) -> str:
        """The learners of an earlier run's ``grades.json`` in ``out``; "" if loaded, else why not."""
        path = out / STATE_FILE
        if not path.is_file():
            return f"no {STATE_FILE} in {out} from an earlier run: the table holds the learners graded now"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"version {data.get('version')!r}")
            for learner, entry in data["learners"].items():
                grades = self.learners.setdefault(learner, LearnerGrades(notes=list(entry["notes"])))
                for copy in entry["copies"]:
                    found = Copy(**copy)
                    grades.copies.setdefault(found.notebook, []).append(found)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.learners.clear()
            return f"{STATE_FILE} in {out} could not be read ({exc}): the table holds the learners graded now"
        return ""


def feedback_text(notebook: str, copy: Copy, exercises: list[str]) -> str:
    """What a learner reads about one graded notebook: each exercise's line, then the cells and notes."""
    done = copy.passes
    lines = [f"# Feedback on {inert.markdown(notebook)}", "",
             f"Your file {inert.markdown(copy.where)}: {done} of {len(exercises) or len(copy.statuses)} exercises "
             "passed.", ""]
    for exercise in exercises or sorted(copy.statuses, key=id_key):
        line = copy.lines.get(exercise) or f"Exercise {exercise}: {copy.statuses.get(exercise, Status.MISSING.value)}"
        lines.append(f"- {inert.markdown(line)}")
    if copy.feedback:
        lines += ["", "## Also", ""] + [f"- {inert.markdown(line)}" for line in copy.feedback]
    return "\n".join(lines) + "\n"


def _percent(points: int, maximum: int) -> float:
    return round(100 * points / maximum, 1) if maximum else 0.0


def _csv(rows: list[list]) -> str:
    import io

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    for row in rows:
        writer.writerow([cell if isinstance(cell, int | float) else inert.csv_cell(cell) for cell in row])
    return text.getvalue()


def _atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a grader killed mid-write leaves the last complete table)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
