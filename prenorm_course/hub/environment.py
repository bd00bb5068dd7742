"""The hub's folder: everything a learner's server runs, readable by every learner.

``HUB/venv`` is the course's pinned environment (``requirements.txt`` without the
editable checkout, then the library from the checkout, as ``make wheel-check`` installs
it), made with an interpreter every learner can run (a checkout's own ``.venv`` may
live in root's home, which learners cannot enter). ``HUB/node`` holds
``configurable-http-proxy`` from the npm registry (``npm install --prefix``, nothing
global). ``HUB/course.git`` is a bare repository holding the checkout's commit
as its branch ``main``: the repository the nbgitpuller link names (``file://``; the same
link works with the course's public git URL). ``HUB/state`` (mode 0700) holds the hub's database, cookie secret and the
teacher's API token.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from prenorm_course.gradescope.autograder_zip import pinned_requirements

PROXY_PACKAGE = "configurable-http-proxy@5.3.0"
BRANCH = "main"  # the course's branch in the hub's repository, whatever the checkout's is
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def shared_python() -> Path:
    """A Python >= 3.11 outside any home folder, so every learner can run the venv made from it."""
    for name in ("python3.11", "python3.12", "python3.13", "python3"):
        found = shutil.which(name, path=SYSTEM_PATH)
        new_enough = "import sys; sys.exit(sys.version_info < (3, 11))"
        if found and subprocess.run([found, "-c", new_enough]).returncode == 0:
            return Path(found)
    raise FileNotFoundError(f"no python3.11 (or newer) in {SYSTEM_PATH}; Debian: apt-get install python3 python3-venv")


def check_reachable(path: Path) -> None:
    """Every learner must reach ``path``: each folder above it must be searchable by others."""
    for folder in [path, *path.parents]:
        if folder.exists() and not os.stat(folder).st_mode & 0o001:
            raise PermissionError(f"the hub folder {path} is inside {folder}, which other users cannot enter "
                                  f"(mode {os.stat(folder).st_mode & 0o777:o}); choose one such as /srv/prenorm-hub")


def _run(command: list[str], **kwargs) -> None:
    subprocess.run(command, check=True, **kwargs)


def prepare(root: Path, hub: Path, python: Path | None = None, log=print) -> None:
    """Make (or bring up to date) the hub folder ``hub`` from the course checkout ``root``."""
    hub = hub.resolve()
    hub.mkdir(parents=True, exist_ok=True)
    hub.chmod(0o755)
    check_reachable(hub)
    venv = hub / "venv"
    if not (venv / "bin" / "python").exists():
        log(f"making the single-user environment {venv}")
        _run([str(python or shared_python()), "-m", "venv", str(venv)])
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(pinned_requirements(root))
        log("installing the course's pinned requirements and the library")
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)])
        built = not (root / "build").exists()
        _run([str(venv / "bin" / "python"), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp, str(root)])
        if built:
            shutil.rmtree(root / "build", ignore_errors=True)
        wheel = next(Path(tmp).glob("prenorm_lib-*.whl"))
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
              str(wheel)])
    if not (hub / "node" / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        log(f"installing {PROXY_PACKAGE} from the npm registry")
        _run(["npm", "install", "--prefix", str(hub / "node"), "--no-audit", "--no-fund", "--silent", PROXY_PACKAGE])
    bare = hub / "course.git"
    if not bare.exists():
        _run(["git", "init", "--quiet", "--bare", str(bare)])
        _run(["git", "-C", str(bare), "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}"])
    # The checkout's commit as the course's one branch (not a fetch of every branch of the checkout); a
    # later prepare adds the teacher's newest commits, which learners get with their next click on the link.
    _run(["git", "-C", str(root), "push", "--quiet", str(bare), f"HEAD:refs/heads/{BRANCH}"])
    # Learners' git refuses a repository another user owns unless system configuration says it is safe:
    # their servers get this file as git's system configuration (GIT_CONFIG_SYSTEM, see config.py).
    (hub / "gitconfig").write_text(f"[safe]\n\tdirectory = {bare}\n")
    state = hub / "state"
    state.mkdir(exist_ok=True)
    state.chmod(0o700)
    token = state / "teacher_token"
    if not token.exists():
        token.write_text(secrets.token_hex(32) + "\n")
        token.chmod(0o600)

