"""Where a learner's kernel runs: a throw-away folder inside a bubblewrap sandbox.

Every kernel gets a fresh folder holding a copy of what a notebook needs -- the course
library ``prenorm_lib`` with its experiment records -- taken as bytes once,
before any learner code ran (``CourseFiles``), so a submission that rewrites its copy
changes nothing for the next one. A graded kernel's copy lacks the answers to its
notebook's exercises (``CourseFiles.for_grading``, :mod:`withheld`).

Confinement is bubblewrap's (``bwrap``), not ours. Each kernel runs in new network, pid,
IPC, UTS and mount namespaces (``--unshare-net --unshare-pid ...``), dies with the
grader (``--die-with-parent``), and sees only: the system's ``/usr`` (read-only), the
interpreter and its virtual environment (read-only, without the course tree around
them), a private ``/tmp`` and ``/dev/shm`` (size-limited memory folders), its own
``/proc`` and a minimal ``/dev``, and its folder. It cannot see the course's notebooks,
the grader, the submissions or another kernel; it has no network (not even the host's
loopback); when the kernel stops, bubblewrap's pid namespace ends and every process the
learner started ends with it.

Its folder, too, is a memory folder of ``folder_bytes`` made by bubblewrap at the
folder's path (home, ``TMPDIR`` and working folder are in it), with the grader's files
bound into it read-only: the course copy and the connection file. So what the kernel
can write is a total -- ``writable_bytes``, the three memory folders together -- as
root and as a normal user alike, and none of it reaches the disk (a per-file limit
alone let many 256 MiB files fill it). The kernel makes its Unix sockets in that memory
folder; the grader reaches them through ``/proc/PID/root`` of the sandbox's first
process (``inside_pid``, which bubblewrap reports on ``--info-fd``).

As root the learner's code runs as a fresh unprivileged user (``setpriv`` inside the
sandbox, every capability dropped, ``no_new_privs``); as anyone else bubblewrap makes a
user namespace and the kernel runs as that user. In both, a seccomp filter
(``kernel_seccomp``, made with libseccomp) refuses every new user namespace inside
the sandbox (``unshare``/``clone`` with ``CLONE_NEWUSER``, ``setns``; ``clone3`` says
"not implemented", so the C library falls back to ``clone``) and every new session
(``setsid``: the scheduler gives each session its own share of the CPU, so a learner's
processes stay one share against the kernel graded beside them), and the sandbox's own
``/`` is read-only: what the kernel writes goes to its folder or its size-limited
memory folders. Its folder may lie under any ``TMPDIR``: the folders above it are made
reachable inside the sandbox.

Limits on the whole sandbox: where a cgroup can be made (root, cgroup v1 or v2), one
per kernel caps the memory of all its processes together (``memory_bytes``, memory
folders included) and their number (``max_processes``), and (cgroup v1's cpu controller,
v2's when the system enables it) gives it one share of the CPU. Without one, each process gets
``prlimit``'s limits (address space, CPU time, file size, open files), and the kernel's
watchdog (:mod:`kernel`) stops the sandbox when its processes together hold more than
``memory_bytes`` (their resident memory, read every ``watch_seconds``). The number of
processes is a total in any case: as root that of the kernel's own user, as a normal
user (``RLIMIT_NPROC`` counts every process of the real user) ``max_processes`` more
than the user runs when the kernel starts.

No silent fallback: if bubblewrap cannot start a kernel here, ``confinement()`` raises
unless the teacher asked for ``trusted`` mode, which runs the kernel as a plain child
process and is printed as such in every report.

One more mode, for a container made for one submission where bubblewrap cannot start
(Gradescope's, without ``CAP_SYS_ADMIN``): ``container_confinement(hidden)`` runs the
kernel as root's fresh unprivileged user (``setpriv``, as above, with the same limits)
but without namespaces, after making each ``hidden`` folder (the grader's own files)
root's alone, and proves before any learner code runs that this user can read none of
them.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import prenorm_lib
from prenorm_course.exercises.limits import LIMITS, GradingLimits
from prenorm_course.exercises.packages import site_binds
from prenorm_course.exercises.paths import exercise_name, solution_notebooks
from prenorm_course.exercises.withheld import withheld_files


class Mode(StrEnum):
    """How a kernel runs: in bubblewrap, unconfined (asked for), or as an unprivileged user in a one-use container."""

    CONFINED = "bubblewrap"
    TRUSTED = "trusted"
    CONTAINER = "container"


CONFINED, TRUSTED, CONTAINER = Mode.CONFINED, Mode.TRUSTED, Mode.CONTAINER
CONNECTION_FILE = "kernel.json"  # written by the grader into the kernel's folder, bound in read-only
INFO_FILE = "bwrap-info.json"  # bubblewrap's --info-fd: the pid of the sandbox's first process
KERNEL_UID_BASE = 0x70000000  # as root: fresh user ids, far from any real account
CGROUP_ROOTS = (Path("/sys/fs/cgroup"),)  # v2 (unified) or v1 (memory/ and pids/ below it)
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED")
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", ".ipynb_checkpoints", "_site", "node_modules",
                "test-artifacts", ".pytest_cache", ".mypy_cache", ".ruff_cache", "prenorm_lib.egg-info"}


@dataclass
class CourseFiles:
    """The bytes a kernel needs from the course, read once before any learner code runs."""

    files: dict[str, bytes] = field(default_factory=dict)
    graded: dict[str, CourseFiles] = field(default_factory=dict)  # notebook -> its graded copy, made by take
    together: tuple[str, ...] = ()  # notebooks whose answers every graded copy lacks as well (container mode)

    @classmethod
    def take(cls, root: Path, together: tuple[str, ...] = ()) -> CourseFiles:
        """The library as the grader runs it, and each notebook's graded copy; ``together``: see the field."""
        package = Path(prenorm_lib.__file__).resolve().parent  # the library the grader itself runs
        files: dict[str, bytes] = {}
        for path in sorted(package.rglob("*")):  # the library, its corpora and its experiment records
            if path.is_file() and not (set(path.relative_to(package).parts) & SKIPPED_DIRS) \
                    and path.suffix != ".pyc":
                files[f"prenorm_lib/{path.relative_to(package).as_posix()}"] = path.read_bytes()
        course = cls(files, together=tuple(together))
        for path in solution_notebooks(root):  # made here, once, before grading threads start
            course.for_grading(exercise_name(path))
        return course

    def for_grading(self, notebook: str) -> CourseFiles:
        """These files with the answers to ``notebook``'s exercises stubbed out (see :mod:`withheld`), and to
        those of ``together``."""
        if notebook not in self.graded:
            self.graded[notebook] = CourseFiles(withheld_files(self.files, notebook, self.together))
        return self.graded[notebook]

    def write(self, folder: Path) -> None:
        for relative, data in self.files.items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _seed_font_cache(folder: Path) -> None:
    """Give the kernel matplotlib's font list, so it does not rebuild it (a warning after 5 s, and time)."""
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is None:
        return
    for path in Path(matplotlib.get_cachedir()).glob("fontlist-*.json"):
        shutil.copyfile(path, folder / path.name)


def _root() -> bool:
    return sys.platform == "linux" and os.geteuid() == 0


class ConfinementUnavailable(RuntimeError):
    """bubblewrap cannot confine a kernel here, and trusted mode was not asked for."""


@dataclass(frozen=True)
class Confinement:
    """How kernels run in this grading run: ``mode`` and in words, for reports."""

    mode: Mode
    how: str


def _cgroup_base() -> tuple[str, list[Path]] | None:
    """("v2", [dir]) or ("v1", [memory dir, pids dir(, cpu dir)]) where this process may make cgroups; else None.

    A kernel in a cpu cgroup of its own gets one share of the CPU however many sessions its processes make.
    """
    if not _root():
        return None
    for top in CGROUP_ROOTS:
        controllers = top / "cgroup.controllers"
        if controllers.is_file():
            if {"memory", "pids"} <= set(controllers.read_text().split()) and os.access(top, os.W_OK):
                return "v2", [top]
            continue
        bases = [top / "memory", top / "pids"]
        if all(b.is_dir() and os.access(b, os.W_OK) for b in bases):
            cpu = top / "cpu"
            return "v1", bases + ([cpu] if cpu.is_dir() and os.access(cpu, os.W_OK) else [])
    return None


@dataclass
class Cgroup:
    """One kernel's cgroup(s): all its processes together get ``memory_bytes`` and ``max_processes``."""

    version: str
    dirs: list[Path]

    @classmethod
    def make(cls, name: str, limits: GradingLimits = LIMITS) -> Cgroup | None:
        base = _cgroup_base()
        if base is None:
            return None
        version, tops = base
        dirs = [top / name for top in tops]
        try:
            for folder in dirs:
                folder.mkdir()
            if version == "v2":
                (dirs[0] / "memory.max").write_text(str(limits.memory_bytes))
                with contextlib.suppress(OSError):
                    (dirs[0] / "memory.swap.max").write_text("0")
                (dirs[0] / "pids.max").write_text(str(limits.max_processes))
            else:
                (dirs[0] / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                with contextlib.suppress(OSError):
                    (dirs[0] / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
                (dirs[1] / "pids.max").write_text(str(limits.max_processes))
        except OSError:
            cls(version, dirs).remove()
            return None
        return cls(version, dirs)

    def procs(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs():
            with contextlib.suppress(OSError, ValueError):
                found |= {int(line) for line in path.read_text().split()}
        return found

    def peak_kb(self) -> int:
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text()) // 1024
        except (OSError, ValueError):
            return 0

    def oom_killed(self) -> bool:
        """The kernel's memory ran out (the cgroup's limit was reached and a process was killed)."""
        try:
            if self.version == "v2":
                events = dict(line.split() for line in (self.dirs[0] / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) > 0
            return int((self.dirs[0] / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        """Kill what is left in it and remove it (a cgroup can go only once its last process is gone)."""
        left = list(self.dirs)
        for _ in range(250):  # up to 5 s
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for folder in list(left):
                with contextlib.suppress(FileNotFoundError):
                    try:
                        folder.rmdir()
                    except OSError:
                        continue
                left.remove(folder)
            if not left:
                return
            time.sleep(0.02)


def kernel_env(workdir: Path) -> dict[str, str]:
    """The kernel's whole environment: a short list passed on, everything else in ``workdir``."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    home = workdir / "home"
    env.update({
        "HOME": str(home), "TMPDIR": str(workdir / "tmp"), "PYTHONPATH": str(workdir / "course"),
        "MPLCONFIGDIR": str(home / ".matplotlib"), "IPYTHONDIR": str(home / ".ipython"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"), "JUPYTER_DATA_DIR": str(home / ".jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "tmp"), "PYTHONDONTWRITEBYTECODE": "1",
        "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1", "USER": "learner",
        "LOGNAME": "learner",
    })
    return env


def interpreter_paths() -> list[Path]:
    """What the kernel's Python must read: the interpreter, its installation and the virtual environment.

    Entries of ``sys.path`` outside these (the course root under ``python -m``, an editable
    install's source folder) are *not* shown to the kernel: it imports the copy of the
    library in its own folder.
    """
    tops = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    tops.add(Path(os.path.realpath(sys.executable)).parent.parent)
    # The kernel is started as sys.executable, unresolved: a venv reached through a symbolic
    # link (a checkout's linked .venv) must also be visible under that name.
    tops.add(Path(os.path.abspath(sys.executable)).parent.parent)
    kept: list[Path] = []
    for top in sorted(tops, key=lambda t: len(t.parts)):
        if top == Path("/usr") or Path("/usr") in top.parents:
            continue  # /usr is shown whole
        if not any(k == top or k in top.parents for k in kept):
            kept.append(top)
    return kept


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/etc"]  # as root bubblewrap would make it 0700: unreadable to the kernel
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "alternatives", "nsswitch.conf"):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def tasks_of_user(uid: int) -> int:
    """How many processes and threads the real user ``uid`` runs now (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError, IndexError):
            lines = status.read_text().splitlines()
            if int(next(x for x in lines if x.startswith("Uid:")).split()[1]) == uid:
                count += int(next(x for x in lines if x.startswith("Threads:")).split()[1])
    return count


def _limits(cgroup: Cgroup | None, uid: int | None, mode: Mode, limits: GradingLimits) -> list[str]:
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    args = [prlimit, f"--cpu={limits.cpu_seconds}", f"--fsize={limits.file_bytes}", "--nofile=1024", "--core=0",
            f"--as={limits.memory_bytes}"]
    if cgroup is None and uid is not None:  # the kernel's own user: the count of its processes is the sandbox's
        args.append(f"--nproc={limits.max_processes}")
    elif cgroup is None and mode == CONFINED and not _root():  # a normal user: a total over the real user
        args.append(f"--nproc={tasks_of_user(os.getuid()) + limits.max_processes}")
    return [*args, "--"]


SECCOMP_FD = 3  # the filter's file descriptor for bubblewrap (opened by the shell that starts it)
INFO_FD = 4  # where bubblewrap writes the sandbox's first pid (INFO_FILE, opened by that shell)
CLONE_NEWUSER = 0x10000000


@functools.cache
def kernel_seccomp() -> bytes:
    """A seccomp program (BPF, for this machine's architecture) that refuses new user namespaces and sessions.

    ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` and every ``setns`` fail with EPERM;
    ``clone3`` (whose flags a filter cannot read) fails with ENOSYS, on which the C
    library falls back to ``clone``. ``setsid`` fails with EPERM: every process of the
    sandbox stays in the session bubblewrap made, so the scheduler's autogroups (one CPU
    share per session) give the whole kernel one share, and a learner's processes cannot
    take shares of their own from the kernel graded beside it. Everything else is allowed. libseccomp compiles it
    (through ``pyseccomp``); it adds the architecture check, so a system call through
    another ABI (i386, x32) is refused too.
    """
    try:
        import pyseccomp as seccomp

        rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    except (ImportError, OSError, RuntimeError) as exc:
        raise ConfinementUnavailable(f"libseccomp cannot be used here ({exc}); apt-get install libseccomp2, "
                                     "and pip install -r requirements.txt") from None
    new_user = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "unshare", new_user)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", new_user)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "setns")
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "setsid")
    with tempfile.TemporaryFile() as f:
        rules.export_bpf(f)
        f.seek(0)
        return f.read()


def bwrap_command(stage: Path, uid: int | None, kernel_command: list[str], limits: GradingLimits = LIMITS) -> list[str]:
    """bubblewrap around ``kernel_command``: namespaces, a read-only system, memory folders the only writable places.

    ``stage`` is shown as a fresh memory folder of ``folder_bytes``, into which the
    course copy, the matplotlib font list and the connection file are bound read-only:
    the kernel cannot write to the disk at all.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ConfinementUnavailable("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "learner",
            # jupyter_client tells the kernel its parent's pid; in the pid namespace its parent is pid 1,
            # which ipykernel reads as "the parent died" and exits. bubblewrap ends it with the grader instead.
            "--unsetenv", "JPY_PARENT_PID"]
    if uid is None:  # not root: a user namespace gives bubblewrap the right to make the others
        args.append("--unshare-user")
    args += _system_binds()
    # The private memory folders first: an interpreter or virtual environment that lives under
    # /tmp (a CI checkout, a test's copy) is bound on top of the new /tmp, not hidden by it.
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm"]
    made: set[Path] = {Path("/tmp"), Path("/dev"), Path("/dev/shm")}
    for path in interpreter_paths():
        for parent in reversed(path.parents[:-1]):  # as root bubblewrap would make them 0700: unreachable
            if parent not in made:
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        args += ["--ro-bind", str(path), str(path)]
    args += site_binds()  # of the installed packages, only those the kernel needs (not transformers' answers)
    for parent in reversed(stage.parents[:-1]):  # a TMPDIR other than /tmp: its folders must be reachable
        if parent not in made:
            args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
    # As root the memory folder is root's: world-writable, so that the kernel's user can work in it.
    args += ["--perms", "1777", "--size", str(limits.folder_bytes), "--tmpfs", str(stage)]
    for sub, mode in (("home", "0777"), ("home/.matplotlib", "0777"), ("tmp", "1777")):
        args += ["--perms", mode, "--dir", str(stage / sub)]
    for font_list in sorted((stage / "home" / ".matplotlib").glob("fontlist-*.json")):
        args += ["--ro-bind", str(font_list), str(font_list)]
    args += ["--ro-bind", str(stage / "course"), str(stage / "course"),
             "--ro-bind-try", str(stage / CONNECTION_FILE), str(stage / CONNECTION_FILE),
             "--chdir", str(stage), "--remount-ro", "/", "--seccomp", str(SECCOMP_FD), "--info-fd", str(INFO_FD)]
    args.append("--")
    if uid is not None:  # root: bubblewrap sets the sandbox up, then the learner's code runs as ``uid``
        args += as_user(uid)
    return [*args, *kernel_command]


def as_user(uid: int) -> list[str]:
    """``setpriv``: what follows runs as ``uid`` (its own group, no other), with no capability, ever."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]


@functools.cache
def _probe() -> str:
    """"" if bubblewrap can start the kernel's Python here, else why not."""
    sandbox = Sandbox.create(CONFINED, CourseFiles())
    try:
        command = sandbox.command([sys.executable, "-c", "import ipykernel, zmq"])
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=kernel_env(sandbox.workdir))
    except ConfinementUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap did not run: {exc}"
    finally:
        sandbox.remove()
    if proc.returncode == 0:
        return ""
    return "bubblewrap could not start Python: " + ((proc.stderr.strip().splitlines() or ["failed"])[-1])


def confinement(trusted: bool = False, limits: GradingLimits = LIMITS) -> Confinement:
    """How kernels will run: in bubblewrap, or (only when asked for) trusted, with no confinement.

    Raises ConfinementUnavailable if bubblewrap does not work here and ``trusted`` is false.
    """
    if trusted:
        return Confinement(TRUSTED, "trusted: NOT confined -- learner code ran with the grader's own rights "
                                    "(--trusted was given)")
    problem = _probe()
    if problem:
        raise ConfinementUnavailable(f"cannot confine learner code: {problem}. Install bubblewrap (and allow user "
                                     "namespaces, or run as root), or pass --trusted to run learner code "
                                     "unconfined (for your own notebooks only)")
    who = "a fresh unprivileged user" if _root() else "the grader's user in a user namespace"
    base = _cgroup_base()
    bounds = (f"a {base[0]} cgroup per kernel: {limits.memory_bytes // 2**30} GiB of memory and "
              f"{limits.max_processes} processes in all" if base else
              f"no cgroup here: {limits.memory_bytes // 2**30} GiB of memory in all (the grader's watchdog) and of "
              "address space per process, "
              + (f"{limits.max_processes} processes (its own user)" if _root() else
                 f"{limits.max_processes} processes more than the user runs (a total)"))
    return Confinement(CONFINED, f"bubblewrap: no network, own pid/IPC/mount namespaces, read-only system and /, "
                                 f"no user namespaces inside, as {who}; {bounds}; writes only to memory folders "
                                 f"of {limits.writable_bytes // 2**20} MiB in all (its folder "
                                 f"{limits.folder_bytes // 2**20} MiB, /tmp and /dev/shm {limits.tmp_bytes // 2**20} "
                                 "MiB each)")


def container_confinement(hidden: list[Path], limits: GradingLimits = LIMITS) -> Confinement:
    """Kernels as a fresh unprivileged user, without bubblewrap: for a container made for one submission.

    Needs root (to change users). Each folder in ``hidden`` becomes root's alone (mode
    0700); then a process started as the kernels will be must fail to list or read any of
    them, or this raises ConfinementUnavailable.
    """
    if not _root():
        raise ConfinementUnavailable("without bubblewrap, learner code can run apart from the grader's files only "
                                     "as root's fresh unprivileged user, and the grader is not root here")
    for folder in hidden:
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o700)
    sandbox = Sandbox.create(CONTAINER, CourseFiles())
    probe = "import os, sys\nseen = []\nfor top in sys.argv[1:]:\n    try:\n        os.listdir(top)\n" \
            "        seen.append(top)\n    except OSError:\n        pass\nprint(seen)"
    try:
        proc = subprocess.run(sandbox.command([sys.executable, "-c", probe, *map(str, hidden)]), capture_output=True,
                              text=True, timeout=120, env=kernel_env(sandbox.workdir), cwd=sandbox.workdir)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfinementUnavailable(f"cannot start Python as an unprivileged user: {exc}") from None
    finally:
        sandbox.remove()
    if proc.returncode != 0 or proc.stdout.strip() != "[]":
        raise ConfinementUnavailable("Python as an unprivileged user: "
                                     + (f"it could read {proc.stdout.strip()}" if proc.returncode == 0 else
                                        (proc.stderr.strip().splitlines() or ["failed"])[-1]))
    base = _cgroup_base()
    bounds = (f"a {base[0]} cgroup per kernel: {limits.memory_bytes // 2**30} GiB of memory and "
              f"{limits.max_processes} processes" if base else
              f"{limits.memory_bytes // 2**30} GiB of memory in all (the grader's watchdog), "
              f"{limits.max_processes} processes")
    return Confinement(CONTAINER, f"as a fresh unprivileged user, who cannot read the grader's files "
                                  f"({', '.join(map(str, hidden))}); {bounds}")


_used_uids: set[int] = set()


def fresh_uid() -> int:
    """An unused user id for one kernel (as root): random among 2**24, none of whose processes is running."""
    running = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError, IndexError):
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
            running.add(int(line.split()[1]))
    while True:
        uid = KERNEL_UID_BASE + secrets.randbelow(2**24)
        if uid not in running and uid not in _used_uids:
            _used_uids.add(uid)
            return uid


@dataclass
class Sandbox:
    """One kernel's folder, its user (as root) and its cgroup; ``command`` wraps a kernel command."""

    mode: Mode
    stage: Path
    uid: int | None
    cgroup: Cgroup | None = None
    limits: GradingLimits = LIMITS

    @property
    def workdir(self) -> Path:
        return self.stage

    @classmethod
    def create(cls, mode: Mode, course: CourseFiles, limits: GradingLimits = LIMITS) -> Sandbox:
        stage = Path(tempfile.mkdtemp(prefix="prenorm-kernel-"))
        os.chmod(stage, 0o700)
        course.write(stage / "course")
        for sub in ("course/notebooks", "home/.matplotlib", "tmp"):
            (stage / sub).mkdir(parents=True, exist_ok=True)
        _seed_font_cache(stage / "home" / ".matplotlib")
        confined_root = mode in (CONFINED, CONTAINER) and _root()
        sandbox = cls(Mode(mode), stage, fresh_uid() if confined_root else None, limits=limits)
        if confined_root:
            sandbox.cgroup = Cgroup.make(f"prenorm-{stage.name}", limits)
        sandbox.own()
        return sandbox

    def own(self) -> None:
        """As root: the folder becomes the kernel user's own (it works in it; nothing else is writable)."""
        if self.uid is None:
            return
        for folder, dirs, files in os.walk(self.stage):
            os.chown(folder, self.uid, self.uid)
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), self.uid, self.uid)

    def command(self, kernel_command: list[str]) -> list[str]:
        limits = _limits(self.cgroup, self.uid, self.mode, self.limits)
        if self.mode == TRUSTED:
            return [*limits, *kernel_command]
        if self.mode == CONTAINER:
            return self._in_cgroup([*limits, *as_user(self.uid), *kernel_command])
        seccomp = self.stage / "kernel-seccomp.bpf"  # read when the kernel starts, before any learner code
        seccomp.write_bytes(kernel_seccomp())
        opened = f'f=$1 i=$2; shift 2; exec "$@" {SECCOMP_FD}<"$f" {INFO_FD}>"$i"'
        command = [*limits, "/bin/sh", "-c", opened, "sh", str(seccomp), str(self.stage / INFO_FILE),
                   *bwrap_command(self.stage, self.uid, kernel_command, self.limits)]
        return self._in_cgroup(command)

    def _in_cgroup(self, command: list[str]) -> list[str]:
        """``command``, entering the cgroup(s) first, before anything else starts."""
        if self.cgroup is None:
            return command
        procs = [str(p) for p in self.cgroup.procs()]
        enter = 'for p; do [ "$p" = -- ] && break; echo $$ > "$p" || exit 125; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", enter, "sh", *procs, "--", *command]

    def inside_pid(self) -> int | None:
        """The sandbox's first process (bubblewrap's, in its namespaces), once bubblewrap has said it; else None."""
        with contextlib.suppress(OSError, ValueError, TypeError):
            return int(json.loads((self.stage / INFO_FILE).read_text())["child-pid"])
        return None

    def peak_memory_kb(self, pid: int | None) -> int:
        """The most memory the kernel held: its cgroup's peak, else the largest peak of its processes."""
        if self.cgroup is not None:
            peak = self.cgroup.peak_kb()
            if peak:
                return peak
        return max((_hwm_kb(p) for p in _descendants(pid)), default=0) if pid else 0

    def remove(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.mode == CONTAINER and self.uid is not None:  # no namespaces: the user's traces are everywhere
            remove_leftovers(self.uid)
        shutil.rmtree(self.stage, ignore_errors=True)


# The folders every user may write to in a container (and /tmp's own world-writable folders, to LEFTOVER_DEPTH)
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/run/shm")
LEFTOVER_DEPTH = 3


def remove_leftovers(uid: int, shared: tuple[str, ...] = SHARED_FOLDERS) -> list[str]:
    """Stop every process of the kernel user ``uid`` and remove everything it left in the shared folders.

    Without bubblewrap's namespaces (container mode) the kernel's user shares ``/tmp`` and
    ``/dev/shm`` with the kernels graded after it, and its processes can outlive it (a daemon
    that left the kernel's process tree). Each kernel has a fresh user, so whatever belongs to
    ``uid`` is this kernel's: its processes are killed (by user, not by tree), then every entry
    it owns in a shared folder, or in a world-writable folder within them (to
    ``LEFTOVER_DEPTH`` levels), is removed without recursion. The next kernel finds nothing of
    it. Returns what was removed. ``uid`` must be a kernel's (``KERNEL_UID_BASE`` or above), never an account's.
    """
    if uid < KERNEL_UID_BASE:
        raise ValueError(f"user {uid} is not a kernel's user (those start at {KERNEL_UID_BASE}): its processes and "
                         "files are not the grader's to remove")
    for _ in range(250):  # up to 5 s: a process may fork while being killed
        pids = _pids_of_user(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    removed = []
    queue = [(Path(top), 0) for top in dict.fromkeys((*shared, tempfile.gettempdir())) if Path(top).is_dir()]
    while queue:
        folder, depth = queue.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid == uid:
                _remove_tree(Path(entry.path))
                removed.append(entry.path)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 and depth < LEFTOVER_DEPTH:
                queue.append((Path(entry.path), depth + 1))
    return removed


def _pids_of_user(uid: int) -> list[int]:
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, StopIteration, ValueError, IndexError):
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
            if uid in {int(n) for n in line.split()[1:]}:
                pids.append(int(status.parent.name))
    return pids


def _remove_tree(path: Path) -> None:
    """Remove ``path`` (a file or a folder tree of any depth) without recursion and without following links."""
    stack = [(path, False)]
    while stack:
        current, emptied = stack.pop()
        try:
            if not current.is_dir() or current.is_symlink():
                current.unlink()
            elif emptied:
                current.rmdir()
            else:
                os.chmod(current, 0o700)  # a folder its user made unreadable or unwritable
                stack.append((current, True))
                with os.scandir(current) as listing:
                    stack += [(Path(entry.path), False) for entry in listing]
        except OSError:
            continue


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for path in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(path.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(path.parent.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _hwm_kb(pid: int) -> int:
    return _status_kb(pid, "VmHWM:")


def resident_kb(pid: int) -> int:
    """The memory all processes of a sandbox hold now (their resident sizes added), from its first process."""
    return sum(_status_kb(p, "VmRSS:") for p in _descendants(pid))
