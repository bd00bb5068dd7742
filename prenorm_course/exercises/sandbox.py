"""Where a learner's kernel runs: a throw-away folder, limits, and (as root) its own user.

Every kernel gets a fresh folder holding a copy of what a notebook needs -- the course
library ``prenorm_lib`` and the experiment records ``results/`` -- taken as bytes once,
before any learner code ran (``CourseFiles``), so a submission that rewrites its copy
changes nothing for the next one. The kernel imports that copy (``PYTHONPATH``), runs
with the folder as its home and working folder, a short list of environment
variables, and resource limits (CPU time, memory, file size, open files).

Isolation, chosen by ``isolation()``:

* ``strict`` -- root on Linux (CI, a grading server, a VM). The kernel runs as a fresh
  unprivileged user in a private mount namespace (see :mod:`jail`): it cannot write to
  the course, the Python installation or another submission, cannot read the other
  submissions, and everything it writes lives in a size-limited memory folder that
  disappears with it. Its leftover processes are killed by user id.
* ``user`` -- root where namespaces are refused (an unprivileged container): the same
  fresh unprivileged user, in its own folder (mode 700); it can still read what any
  user may read and write to the shared ``/tmp``, but nothing of the course or of
  another submission. Needs a Python installation that any user may run.
* ``plain`` -- anyone else (a teacher's laptop, macOS). The kernel has the grader's own
  file permissions: it *could* write wherever the teacher can. ``TreeGuard`` therefore
  keeps the course tree, the library and the submissions, byte for byte, compares after
  each notebook, puts back every changed byte and names the submissions that ran
  meanwhile. Verdicts are unaffected either way: they are computed in the grader, whose
  checkers were imported before any learner code ran, and each kernel gets a pristine
  copy of the library. For untrusted submissions, grade as root (in a VM or container).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import prenorm_lib

JAIL = Path(__file__).with_name("jail.py")
STRICT, USER, PLAIN = "strict", "user", "plain"
ISOLATION_ENV = "PRENORM_ISOLATION"  # "strict", "user", "plain" or unset (the strongest that works)
MEMORY_BYTES = 6 * 2**30  # address space of a kernel
CPU_SECONDS = 900  # CPU time of a kernel over its whole life
FILE_BYTES = 256 * 2**20  # largest file a kernel may write
TMP_BYTES = 512 * 2**20  # strict: its memory folders
KERNEL_UID_BASE = 0x70000000  # strict: fresh user ids, far from any real account
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED")
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", ".ipynb_checkpoints", "_site", "node_modules",
                "test-artifacts", ".pytest_cache", ".mypy_cache", ".ruff_cache", "prenorm_lib.egg-info"}


@dataclass
class CourseFiles:
    """The bytes a kernel needs from the course, read once before any learner code runs."""

    files: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path) -> CourseFiles:
        package = Path(prenorm_lib.__file__).resolve().parent  # the library the grader itself runs
        files: dict[str, bytes] = {}
        for base, top in ((package, "prenorm_lib"), (root / "results", "results")):
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                if path.is_file() and not (set(path.relative_to(base).parts) & SKIPPED_DIRS) \
                        and path.suffix != ".pyc":
                    files[f"{top}/{path.relative_to(base).as_posix()}"] = path.read_bytes()
        # The agent that answers the grader from inside the kernel, and the wire format it speaks:
        # the only course tools a kernel sees (as empty packages around them, so nothing else loads).
        tools = Path(__file__).resolve().parent
        files["prenorm_course/__init__.py"] = b""
        files["prenorm_course/exercises/__init__.py"] = b""
        for name in ("agent.py", "wire.py"):
            files[f"prenorm_course/exercises/{name}"] = (tools / name).read_bytes()
        return cls(files)

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


def _root_on_linux() -> bool:
    return sys.platform == "linux" and hasattr(os, "geteuid") and os.geteuid() == 0


@functools.cache
def _probe(mode: str) -> str:
    """"" if a jailed Python can start here in ``mode``, else why not."""
    sandbox = Sandbox.create(mode, CourseFiles())
    command = [sys.executable, "-c", "import ipykernel, zmq"]
    try:
        proc = subprocess.run(sandbox.command(command, hide=[]), capture_output=True, text=True, timeout=120,
                              env=kernel_env(sandbox.workdir))
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        sandbox.remove()
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


def isolation() -> tuple[str, str]:
    """(mode, why): the strongest mode that works here; ``PRENORM_ISOLATION`` asks for one."""
    wanted = os.environ.get(ISOLATION_ENV, "").strip().lower()
    if wanted == PLAIN:
        return PLAIN, f"{ISOLATION_ENV}=plain"
    reasons = []
    for mode, why in ((STRICT, "each kernel runs as its own unprivileged user in a private mount namespace"),
                      (USER, "each kernel runs as its own unprivileged user")):
        if wanted and wanted != mode:
            continue
        problem = _probe(mode) if _root_on_linux() else "not root on Linux"
        if not problem:
            return mode, why
        reasons.append(f"{mode}: {problem}")
    if wanted:
        raise RuntimeError(f"{wanted} isolation is not available here ({'; '.join(reasons)})")
    return PLAIN, "; ".join(reasons)


_uids = itertools.count()
_uid_lock = threading.Lock()


def next_uid() -> int:
    """A fresh user id for one kernel (strict mode), unique within this grading run."""
    with _uid_lock:
        return KERNEL_UID_BASE + (os.getpid() % 4096) * 4096 + next(_uids) % 4096


def kernel_env(workdir: Path) -> dict[str, str]:
    """The kernel's whole environment: a short list passed on, everything else in ``workdir``."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    home = workdir / "home"
    env.update({
        "HOME": str(home), "TMPDIR": str(workdir / "tmp"), "PYTHONPATH": str(workdir / "course"),
        "MPLCONFIGDIR": str(home / ".matplotlib"), "IPYTHONDIR": str(home / ".ipython"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"), "JUPYTER_DATA_DIR": str(home / ".jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "tmp"), "PYTHONDONTWRITEBYTECODE": "1",
        "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    })
    return env


def _needed_paths() -> list[str]:
    """What the kernel's Python must reach: the interpreter, its prefixes and import path."""
    paths = {sys.executable, os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths |= {p for p in sys.path if p and os.path.exists(p)}
    return sorted(paths)


def jail_spec(mode: str, stage: Path, workdir: Path, uid: int, hide: list[Path]) -> dict:
    limits = {"RLIMIT_CPU": CPU_SECONDS, "RLIMIT_AS": MEMORY_BYTES, "RLIMIT_FSIZE": FILE_BYTES,
              "RLIMIT_NOFILE": 1024, "RLIMIT_CORE": 0}
    needed = [Path(p).resolve() for p in _needed_paths()]
    safe_hide = [str(h) for h in hide if not any(n == h.resolve() or h.resolve() in n.parents for n in needed)]
    return {
        "mode": mode, "stage": str(stage), "workdir": str(workdir), "cwd": str(workdir / "course" / "notebooks"),
        "uid": uid, "expose": [str(p) for p in needed], "hide": safe_hide, "tmp_bytes": TMP_BYTES,
        "nproc": 256, "limits": limits,
    }


def jail_command(spec: dict) -> list[str]:
    return [sys.executable, "-I", "-S", str(JAIL), json.dumps(spec), "--"]


@dataclass
class Sandbox:
    """One kernel's folder: staged here, used in place (plain) or copied into its namespace (strict)."""

    mode: str
    stage: Path
    workdir: Path
    uid: int | None

    @classmethod
    def create(cls, mode: str, course: CourseFiles) -> Sandbox:
        stage = Path(tempfile.mkdtemp(prefix="prenorm-kernel-"))
        os.chmod(stage, 0o700)
        course.write(stage / "course")
        for sub in ("course/notebooks", "home/.matplotlib", "tmp"):
            (stage / sub).mkdir(parents=True, exist_ok=True)
        _seed_font_cache(stage / "home" / ".matplotlib")
        if mode == STRICT:  # copied into the kernel's own memory file system by the jail
            sandbox = cls(mode, stage, Path("/tmp") / f"prenorm-{secrets.token_hex(4)}", next_uid())
        else:
            sandbox = cls(mode, stage, stage, next_uid() if mode == USER else None)
        sandbox.own()
        return sandbox

    def own(self) -> None:
        """User mode: the staging folder becomes the kernel user's own (it works in it)."""
        if self.mode != USER:
            return
        for folder, dirs, files in os.walk(self.stage):
            os.chown(folder, self.uid, self.uid)
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), self.uid, self.uid)

    def command(self, kernel_command: list[str], hide: list[Path]) -> list[str]:
        spec = jail_spec(self.mode, self.stage, self.workdir, self.uid or 0, hide)
        return [*jail_command(spec), *kernel_command]

    def kill_leftovers(self) -> None:
        """Strict mode: end every process still running under this kernel's user id."""
        if self.uid is None:
            return
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                uid_line = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(uid_line.split()[1]) == self.uid:
                with contextlib.suppress(OSError):
                    os.kill(int(status.parent.name), signal.SIGKILL)

    def remove(self) -> None:
        self.kill_leftovers()
        shutil.rmtree(self.stage, ignore_errors=True)


def _walk(top: Path):
    if top.is_file():
        yield top
        return
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            yield Path(folder) / name


class TreeGuard:
    """Plain mode: the course tree and the submissions, byte for byte, to compare and restore."""

    def __init__(self, tops: list[Path]):
        self.tops = [Path(t).resolve() for t in tops]
        self.saved = self._read()

    def _read(self) -> dict[Path, bytes]:
        found: dict[Path, bytes] = {}
        for top in self.tops:
            for path in _walk(top):
                try:
                    found[path] = path.read_bytes()
                except OSError:
                    continue
        return found

    def restore(self) -> list[str]:
        """Put back what changed since the guard was made; the paths that had changed."""
        now = self._read()
        changed = []
        for path, data in self.saved.items():
            if now.get(path) != data:
                changed.append(str(path))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        for path in set(now) - set(self.saved):
            changed.append(str(path))
            path.unlink(missing_ok=True)
        return sorted(changed)
