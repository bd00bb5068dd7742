"""After class: the learners' notebooks to the grader, and the grader's feedback back to the learners.

``collect`` runs as the teacher (root): each learner's copy of the course is
``~/<COURSE_FOLDER>/`` (where the nbgitpuller link put it). Files are copied as bytes,
without following symbolic links (a link to someone else's file is not the learner's
work), keeping their modification time -- the learner's last save, which JupyterLab's save
writes --, and ``FOLDER/collection.json`` records, per collected file, when it was last
saved and whether that is after the deadline ``--due``::

    {"collected_at": "2026-05-04T18:00:03+00:00", "due": "2026-05-04T17:00:00+00:00" or null,
     "files": {"alice/01_rmsnorm.ipynb": {"last_saved": "2026-05-04T16:59:10+00:00", "late": false}}}

A second collection into the same folder adds to ``files`` (the newest copy of a file wins).
``make grade DIR=FOLDER`` grades them in its sandbox and reads this file for its "last
saved" and "late" columns.

``return_feedback`` hands the grader's per-learner feedback (``OUT/feedback/<learner>/``)
back into each learner's ``~/<COURSE_FOLDER>/feedback/``, as nbgrader's feedback step does.
Each file is written by a process running as that learner (``setpriv``), so a learner's
own symbolic links in their home lead nowhere they could not write themselves.
"""

from __future__ import annotations

import datetime as dt
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from prenorm_course.hub.accounts import LEARNERS_GROUP, check_name
from prenorm_course.hub.config import COURSE_FOLDER

COLLECTION = "collection.json"
FEEDBACK = "feedback"


def learners_in_group() -> list[str]:
    """Every account in the learners' group (what ``hub learners add`` made), sorted."""
    try:
        group = grp.getgrnam(LEARNERS_GROUP)
    except KeyError:
        return []
    members = set(group.gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == group.gr_gid}
    return sorted(members)


def parse_due(text: str | None) -> dt.datetime | None:
    """The deadline: ISO-8601, e.g. 2026-05-04T17:00 (the server's local time) or with an offset."""
    if text is None:
        return None
    try:
        due = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--due {text!r}: expected a date and time in ISO-8601, e.g. 2026-05-04T17:00 "
                         "or 2026-05-04T17:00+02:00") from None
    return due if due.tzinfo else due.astimezone()


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="seconds")


def collect(out: Path, learners: list[str], notebooks: list[str], due: dt.datetime | None = None,
            now: dt.datetime | None = None) -> list[str]:
    """Copy each learner's exercise notebooks named ``notebooks`` into ``out``; return what was missing."""
    missing, files = [], {}
    for learner in learners:
        home = Path(pwd.getpwnam(check_name(learner)).pw_dir)
        for name in notebooks:
            source = home / COURSE_FOLDER / "notebooks" / "exercises" / name
            target = out / learner / name
            try:
                fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError as exc:
                missing.append(f"{learner}: {name}: {exc.strerror}")
                continue
            with os.fdopen(fd, "rb") as src:
                info = os.fstat(src.fileno())
                if not stat.S_ISREG(info.st_mode):
                    missing.append(f"{learner}: {name}: not a regular file")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
            saved = dt.datetime.fromtimestamp(info.st_mtime, dt.UTC)
            files[f"{learner}/{name}"] = {"last_saved": _iso(saved), "late": due is not None and saved > due}
    record = out / COLLECTION
    earlier = json.loads(record.read_text()) if record.is_file() else {}
    out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"collected_at": _iso(now or dt.datetime.now(dt.UTC)),
                                  "due": _iso(due) if due else None,
                                  "files": {**earlier.get("files", {}), **files}}, indent=1, sort_keys=False) + "\n")
    return missing


def return_feedback(out: Path, learners: list[str] | None = None) -> dict[str, list[str]]:
    """Copy ``out/feedback/<learner>/*`` into each learner's ``~/prenorm/feedback/``; learner -> files returned."""
    folder = out / FEEDBACK
    if not folder.is_dir():
        raise FileNotFoundError(f"no {folder}: grade with --out {out} first (make grade DIR=... OUT={out})")
    chosen = learners or sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    returned: dict[str, list[str]] = {}
    for learner in chosen:
        entry = pwd.getpwnam(check_name(learner))
        target = Path(entry.pw_dir) / COURSE_FOLDER / FEEDBACK
        names = []
        for path in sorted((folder / learner).glob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
                            "sh", "-c", 'mkdir -p "$1" && cat > "$1/$2"', "sh", str(target), path.name],
                           input=path.read_bytes(), check=True, capture_output=True)
            names.append(path.name)
        returned[learner] = names
    return returned
