"""The hub's folder: everything a learner's server runs, readable by every learner.

``HUB/venv`` is the course's pinned environment (``requirements.txt`` without the
editable checkout, then the library from the checkout, as ``make wheel-check`` installs
it), made with an interpreter every learner can run (a checkout's own ``.venv`` may
live in root's home, which learners cannot enter). ``HUB/node`` holds
``configurable-http-proxy`` from the npm registry (``npm install --prefix``, nothing
global). ``HUB/class.git`` is a bare repository holding what learners receive
(:mod:`.distribution`: exercise notebooks and figures, never a solution) as its branch
``main``: the repository the nbgitpuller link names (``file://``). ``HUB/glue`` holds the
hub's spawner (:mod:`.spawner`). ``HUB/state`` (mode 0700) holds the hub's database, cookie
secret, the teacher's API token and the hub's log.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from prenorm_course.gradescope.autograder_zip import pinned_requirements
from prenorm_course.hub import accounts, distribution
from prenorm_course.hub.config import GLUE

PROXY_PACKAGE = "configurable-http-proxy@5.3.0"
BRANCH = distribution.BRANCH  # the learners' branch in the hub's repository
REPOSITORY = "class.git"  # the learners' repository in the hub folder
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
    bare = hub / REPOSITORY
    distribution.remove_full_course_repository(hub, log)
    distribution.build(root, bare, log)
    subprocess.run(["chmod", "-R", "a+rX", str(bare)], check=True)
    # Learners' git refuses a repository another user owns unless system configuration says it is safe:
    # their servers get this file as git's system configuration (GIT_CONFIG_SYSTEM, see config.py).
    (hub / "gitconfig").write_text(f"[safe]\n\tdirectory = {bare}\n")
    glue = hub / GLUE
    glue.mkdir(exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("spawner.py"), glue / "prenorm_hub_spawner.py")
    for group in (accounts.LEARNERS_GROUP, accounts.TEACHERS_GROUP):  # the groups the hub admits must exist
        accounts.ensure_group(group)
    state = hub / "state"
    state.mkdir(exist_ok=True)
    state.chmod(0o700)
    token = state / "teacher_token"
    if not token.exists():
        token.write_text(secrets.token_hex(32) + "\n")
        token.chmod(0o600)

