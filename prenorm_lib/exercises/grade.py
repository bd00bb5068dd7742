"""Grade a folder of learner notebooks into a learner x exercise table.

Layout and learner names:

* ``FOLDER/<learner>/<any>.ipynb`` -- one subfolder per learner (any depth
  below it); the learner is the subfolder's name;
* ``FOLDER/<learner>.ipynb`` -- a flat file; the learner is the file's stem.

Which course notebook a file belongs to is taken from its file name when that
is a course notebook's name, else from the cell ids it shares with one (so
``alice.ipynb`` works). Each notebook is checked in its own kernel, ``jobs``
at a time. The table goes to ``grades.md`` (with the hint, error and timeout
messages listed below it) and ``grades.csv``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prenorm_lib.exercises.check import NOT_DONE, NOT_RUN, PASSED, check_path
from prenorm_lib.exercises.markers import id_key
from prenorm_lib.exercises.paths import repo_root

MISSING = "missing"


def learner_notebooks(folder: Path) -> list[tuple[str, Path]]:
    """``(learner, notebook)`` pairs found in ``folder``, sorted (checkpoints skipped)."""
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        learner = relative.parts[0] if len(relative.parts) > 1 else path.stem
        found.append((learner, path))
    return found


def grade_folder(
    folder: Path,
    out_dir: Path | None = None,
    root: Path | None = None,
    timeout: float = 60.0,
    jobs: int = 2,
    progress: Callable[[str], None] = print,
) -> dict[str, dict[str, str]]:
    """Check every learner notebook; write grades.md/grades.csv; return learner -> exercise -> status."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"FOLDER must be a folder of learner notebooks, got {folder}")
    root = repo_root(root)
    submissions = learner_notebooks(folder)
    if not submissions:
        raise FileNotFoundError(f"no .ipynb files in {folder}")

    def grade_one(item: tuple[str, Path]) -> tuple[str, dict[str, str], list[str]]:
        learner, path = item
        try:
            result = check_path(path, root, timeout)
        except (ValueError, OSError) as exc:  # an unreadable or foreign notebook
            progress(f"{learner}: {path.name}: {exc}")
            return learner, {}, [f"{path.name}: {exc}"]
        progress(f"{learner}: {path.name}: {sum(s.status == PASSED for s in result.exercises)}"
                 f"/{len(result.exercises)} passed")
        statuses = {s.exercise.id: s.status for s in result.exercises}
        details = [f"Exercise {s.exercise.id}: {s.detail}" for s in result.exercises
                   if s.status not in (PASSED, NOT_DONE, NOT_RUN)]
        return learner, statuses, details

    table: dict[str, dict[str, str]] = {}
    details: dict[str, list[str]] = {}
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        for learner, statuses, notes in pool.map(grade_one, submissions):
            table.setdefault(learner, {}).update(statuses)
            details.setdefault(learner, []).extend(notes)
    write_tables(table, details, Path(out_dir) if out_dir else folder)
    return table


def _columns(table: dict[str, dict[str, str]]) -> list[str]:
    ids = {e for row in table.values() for e in row}
    return sorted(ids, key=id_key)


def write_tables(table: dict[str, dict[str, str]], details: dict[str, list[str]], out_dir: Path) -> None:
    """grades.csv (learner, one column per exercise, passed) and grades.md (the same, plus hints)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = _columns(table)
    rows = []
    for learner in sorted(table):
        cells = [table[learner].get(e, MISSING) for e in columns]
        rows.append([learner, *cells, f"{cells.count(PASSED)}/{len(columns)}"])
    header = ["learner", *columns, "passed"]
    with open(out_dir / "grades.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [(learner, line) for learner in sorted(details) for line in details[learner]]
    if notes:
        md += ["", "## Details", ""] + [f"- **{learner}** — {line}" for learner, line in notes]
    (out_dir / "grades.md").write_text("\n".join(md) + "\n", encoding="utf-8")
