"""The hub's spawner: JupyterHub's ``LocalProcessSpawner`` with each learner in a cgroup of their own.

JupyterHub's ``Spawner.mem_limit`` and ``Spawner.cpu_limit`` are only advice for a local
process (it passes them on as ``MEM_LIMIT``/``CPU_LIMIT``). The Littlest JupyterHub
enforces them with ``jupyterhub-systemdspawner``, which needs systemd as the machine's
init; where systemd is not running (a container, this project's test machines) nothing on
PyPI enforces them for local processes. This subclass does what systemd would: before a
learner's server starts it makes the cgroup ``prenorm-hub/<user>`` (cgroup v2, or v1's
``memory`` and ``cpu`` hierarchies), caps its memory (no swap beyond it) and its CPU
(a CFS quota of ``cpu_limit`` cores), and the server's process enters it before it drops
to the learner's user, so every kernel the learner starts is counted there too. A learner
whose processes together pass the memory limit meets the kernel's OOM killer inside their
own cgroup: their largest process (a kernel) dies, everyone else's servers go on.

Where no cgroup can be made (not root, no writable cgroup file system) the server starts
without limits and the hub's log says so on every start: never silently.

This file is copied into the hub's folder by ``prepare`` and imported by
``jupyterhub_config.py`` in the hub's own environment: it needs only JupyterHub and the
standard library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "prenorm-hub"
PERIOD_US = 100_000


def cgroup_layout(root: Path = CGROUP_ROOT) -> tuple[str, dict[str, Path]] | None:
    """("v2", {"memory": dir, "cpu": same dir}) or ("v1", {"memory": ..., "cpu": ...}) for PARENT; else None."""
    if (root / "cgroup.controllers").is_file():
        if {"memory", "cpu"} <= set((root / "cgroup.controllers").read_text().split()) and os.access(root, os.W_OK):
            return "v2", {"memory": root / PARENT, "cpu": root / PARENT}
        return None
    memory, cpu = root / "memory", root / "cpu"
    if memory.is_dir() and cpu.is_dir() and os.access(memory, os.W_OK) and os.access(cpu, os.W_OK):
        return "v1", {"memory": memory / PARENT, "cpu": cpu / PARENT}
    return None


class LearnerCgroup:
    """One learner's cgroup(s) under PARENT, with a memory and a CPU limit."""

    def __init__(self, version: str, parents: dict[str, Path], user: str):
        self.version = version
        self.dirs = {kind: parent / user for kind, parent in parents.items()}

    @classmethod
    def make(cls, user: str, mem_bytes: int | None, cpus: float | None, root: Path = CGROUP_ROOT):
        layout = cgroup_layout(root)
        if layout is None:
            return None
        version, parents = layout
        group = cls(version, parents, user)
        if version == "v2":
            with contextlib.suppress(OSError):  # enabled already, or the system's own setting
                (root / "cgroup.subtree_control").write_text("+memory +cpu")
            parents["memory"].mkdir(exist_ok=True)
            (parents["memory"] / "cgroup.subtree_control").write_text("+memory +cpu")
        for folder in set(group.dirs.values()):
            folder.parent.mkdir(exist_ok=True)
            folder.mkdir(exist_ok=True)
        memory, cpu = group.dirs["memory"], group.dirs["cpu"]
        if version == "v2":
            (memory / "memory.max").write_text(str(mem_bytes) if mem_bytes else "max")
            with contextlib.suppress(OSError):
                (memory / "memory.swap.max").write_text("0")
            (cpu / "cpu.max").write_text(f"{int(cpus * PERIOD_US)} {PERIOD_US}" if cpus else f"max {PERIOD_US}")
        else:
            (memory / "memory.limit_in_bytes").write_text(str(mem_bytes) if mem_bytes else "-1")
            with contextlib.suppress(OSError):  # only where the kernel accounts swap
                (memory / "memory.memsw.limit_in_bytes").write_text(str(mem_bytes) if mem_bytes else "-1")
            (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(int(cpus * PERIOD_US)) if cpus else "-1")
        return group

    def procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files():
            with contextlib.suppress(OSError, ValueError):
                found |= {int(x) for x in path.read_text().split()}
        return found

    def oom_kills(self) -> int:
        memory = self.dirs["memory"]
        with contextlib.suppress(OSError, ValueError, StopIteration):
            if self.version == "v2":
                events = dict(line.split() for line in (memory / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0))
            control = (memory / "memory.oom_control").read_text().splitlines()
            return int(next(line.split()[1] for line in control if line.startswith("oom_kill ")))
        return 0

    def remove(self, seconds: float = 5.0) -> bool:
        """Kill what is left in it and remove it; False if it could not go in ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            left = [f for f in dict.fromkeys(self.dirs.values()) if f.exists()]
            for folder in left:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if not [f for f in left if f.exists()]:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def cgroup_of(user: str, root: Path = CGROUP_ROOT) -> LearnerCgroup | None:
    """The learner's cgroup as the hub made it, or None (no cgroups here, or none made)."""
    layout = cgroup_layout(root)
    if layout is None:
        return None
    group = LearnerCgroup(*layout, user)
    return group if group.dirs["memory"].is_dir() else None


class CgroupSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose ``mem_limit`` and ``cpu_limit`` are enforced by a cgroup per learner."""

    cgroup: LearnerCgroup | None = None

    async def start(self):
        try:
            self.cgroup = LearnerCgroup.make(self.user.name, self.mem_limit, self.cpu_limit)
        except OSError as exc:
            self.cgroup = None
            self.log.warning("%s: no cgroup could be made (%s): the server starts WITHOUT memory or CPU limits",
                             self.user.name, exc)
        if self.cgroup is None and (self.mem_limit or self.cpu_limit):
            self.log.warning("%s: cgroups cannot be made here (not root, or no writable cgroup file system): "
                             "the server starts WITHOUT its memory and CPU limits", self.user.name)
        elif self.cgroup is not None:
            self.log.info("%s: cgroup %s with memory %s bytes and %s CPUs", self.user.name,
                          self.cgroup.dirs["memory"], self.mem_limit, self.cpu_limit)
        return await super().start()

    def make_preexec_fn(self, name):
        drop_user = super().make_preexec_fn(name)
        procs = [str(p) for p in self.cgroup.procs_files()] if self.cgroup else []

        def preexec():
            for path in procs:  # as root, before the user is dropped: the server and all it starts are counted
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
            drop_user()

        return preexec

    async def stop(self, now=False):
        await super().stop(now=now)
        group = self.cgroup or cgroup_of(self.user.name)
        if group is not None and not group.remove():
            self.log.warning("%s: its cgroup could not be removed (processes still in it)", self.user.name)
        self.cgroup = None
