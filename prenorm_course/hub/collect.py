"""Collect the learners' notebooks for the grader: ``FOLDER/<learner>/<notebook>``.

Run as the teacher (root) after the class: each learner's copy of the course is
``~/<COURSE_FOLDER>/`` (where the nbgitpuller link put it). Files are copied as bytes,
without following symbolic links (a link to someone else's file is not the learner's
work), and ``make grade DIR=FOLDER`` grades them in its sandbox.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from prenorm_course.hub.accounts import check_name
from prenorm_course.hub.config import COURSE_FOLDER


def collect(out: Path, learners: list[str], notebooks: list[str]) -> list[str]:
    """Copy each learner's exercise notebooks named ``notebooks`` into ``out``; return what was missing."""
    missing = []
    for learner in learners:
        home = Path(pwd.getpwnam(check_name(learner)).pw_dir)
        for name in notebooks:
            source = home / COURSE_FOLDER / "notebooks" / "exercises" / name
            target = out / learner / name
            try:
                fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError as exc:
                missing.append(f"{learner}: {name}: {exc.strerror}")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(fd, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return missing
