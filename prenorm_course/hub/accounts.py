"""Learners as Unix accounts (``useradd``/``userdel``): one home each, readable by its learner only."""

from __future__ import annotations

import pwd
import re
import subprocess
from pathlib import Path

NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def check_name(name: str) -> str:
    """``name`` if it can be both a Unix account and a hub user; else a ValueError that says why."""
    if not NAME.fullmatch(name):
        raise ValueError(f"learner name {name!r}: expected 1-32 characters, lowercase letters, digits, '_' or '-', "
                         "starting with a letter or '_' (it becomes a Unix account)")
    return name


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def add(name: str) -> Path:
    """Make the account (if missing) with a home of mode 0700; return the home."""
    check_name(name)
    if not exists(name):
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name], check=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    home.chmod(0o700)  # useradd's default mode differs between distributions; no learner reads another's work
    return home


def remove(name: str) -> None:
    """Remove the account and its home (the learner's processes must have stopped)."""
    check_name(name)
    if exists(name):
        subprocess.run(["userdel", "--remove", name], check=True, capture_output=True)
