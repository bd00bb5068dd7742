"""Learners and teachers as Unix accounts (``useradd``/``userdel``): one home each, readable by its owner only.

Each account joins one Unix group: ``prenorm-learners`` or ``prenorm-teachers``. The hub
admits exactly these two groups (PAM's ``allowed_groups``) and makes the teachers its admins
(``admin_groups``), so an account made here can log in through the hub's form with its Unix
password and nothing else is needed; the hub makes its own user at the first login.
"""

from __future__ import annotations

import grp
import pwd
import re
import subprocess
from pathlib import Path

NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
LEARNERS_GROUP = "prenorm-learners"
TEACHERS_GROUP = "prenorm-teachers"


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


def in_group(name: str, group: str) -> bool:
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return False
    return name in entry.gr_mem or pwd.getpwnam(name).pw_gid == entry.gr_gid


def ensure_group(group: str) -> None:
    try:
        grp.getgrnam(group)
    except KeyError:
        subprocess.run(["groupadd", "--system", group], check=True, capture_output=True)


def add(name: str, group: str = LEARNERS_GROUP) -> Path:
    """Make the account (if missing) in ``group``, with a home of mode 0700; return the home."""
    check_name(name)
    ensure_group(group)
    if not exists(name):
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group",
                        "--groups", group, name], check=True)
    elif not in_group(name, group):
        subprocess.run(["usermod", "--append", "--groups", group, name], check=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    home.chmod(0o700)  # useradd's default mode differs between distributions; no learner reads another's work
    return home


def remove(name: str) -> None:
    """Remove the account and its home (the learner's processes must have stopped)."""
    check_name(name)
    if exists(name):
        subprocess.run(["userdel", "--remove", name], check=True, capture_output=True)


def processes(name: str) -> list[int]:
    """The pids of the processes running as ``name``."""
    uid = pwd.getpwnam(name).pw_uid
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if int(line.split()[1]) == uid:
            found.append(int(status.parent.name))
    return found


def pss_mb(name: str) -> float:
    """Proportional set size of all of ``name``'s processes, MB: shared pages (torch's libraries) counted once."""
    import psutil

    total = 0
    for pid in processes(name):
        try:
            total += psutil.Process(pid).memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20
