"""Write the Gradescope autograder zip: Gradescope's layout around the course's own files.

The zip holds what ``run_autograder`` needs and nothing of the checkout's state: the
pinned requirements of grading (``requirements.txt``'s pins of ``GRADER_PACKAGES`` only), the library
``prenorm_lib`` with its data, the grader (``prenorm_course.exercises``) and this
package, the solution and exercise notebooks, the nbval sanitize rules, and
``gradescope.json``: which notebooks the assignment grades. Entries are sorted and
dated 1980-01-01, so the same course gives the same bytes.

The solution notebooks are the grader's, not the learner's: a submission runs inside
the course notebook (its other cells, their course-run outputs that cells are compared
with), and the checks come from the exercise notebook's metadata. So the answers stay in the zip, and what
keeps them from learner code is that it cannot read ``/autograder/source``: in
bubblewrap it is not in the sandbox; in the container mode the kernel runs as an
unprivileged user and the folder is root's alone (:mod:`.results`). For the same
reason the library is not installed into the venv (where that user could read it):
the grader runs from ``/autograder/source``, and the kernel imports its withheld copy.
Nor is anything else installed that grading does not need: without bubblewrap nothing in
the venv can be hidden from the kernel, and ``transformers`` (the tests' reference) holds
answers to most exercises.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from prenorm_course.exercises.packages import GRADER_PACKAGES, normalised
from prenorm_course.exercises.paths import exercise_name, exercise_notebooks, solution_notebooks

CONFIG_NAME = "gradescope.json"
VENV = "/autograder/venv"
SKIPPED = {"__pycache__", ".ipynb_checkpoints"}

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Its newest base image is
# Ubuntu 22.04, whose python3 is 3.10; the course's pins (numpy 2.4, scipy 1.17) need Python 3.11 or newer.
set -euo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
new_enough() {{ "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }}
PYTHON=${{PYTHON:-}}
if [ -z "$PYTHON" ] && command -v python3 >/dev/null 2>&1 && new_enough python3; then
  PYTHON=$(command -v python3)
fi
packages=()
# Learner kernels run in bubblewrap; where the container does not let it start, run_autograder says so.
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
if [ -z "$PYTHON" ]; then
  # The image's python3 is older (Ubuntu 22.04: 3.10): the distribution's own python3.11 and its venv module.
  echo "python3 is $(python3 --version 2>&1 || echo missing); installing python3.11 and python3.11-venv with apt"
  packages+=(python3.11 python3.11-venv)
  PYTHON=/usr/bin/python3.11
elif ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
  # Debian and Ubuntu ship the venv module apart from the interpreter.
  packages+=("python3.$("$PYTHON" -c 'import sys; print(sys.version_info.minor)')-venv")
fi
if [ ${{#packages[@]}} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends --no-upgrade "${{packages[@]}}" >/dev/null
fi
if ! new_enough "$PYTHON"; then
  echo "$PYTHON is $("$PYTHON" --version 2>&1): the course needs Python 3.11 or newer" >&2; exit 1
fi
echo "grading runs on $("$PYTHON" --version 2>&1) ($PYTHON)"
"$PYTHON" -m venv {VENV}
# torch first, as PyTorch's CPU-only wheel (2.13.0+cpu, about 200 MB) from PyTorch's own index: PyPI's Linux
# wheel of the same version is the CUDA build, several GB. Where that index cannot be reached, pip says so
# and takes torch from its other sources: a CPU wheel where its configuration points to one, else PyPI's CUDA build.
{VENV}/bin/python -m pip install --quiet --retries 1 --no-deps --index-url {TORCH_CPU_INDEX} \\
  "$(grep '^torch==' requirements.txt)" \\
  || echo "PyTorch's CPU index {TORCH_CPU_INDEX} could not be reached: torch comes from pip's other sources"
{VENV}/bin/python -m pip install --quiet -r requirements.txt
{VENV}/bin/python -c 'import torch; print("torch", torch.__version__, "(CUDA)" if torch.version.cuda else "(CPU)")'
# The course's library is not installed here: learner code may read this venv, and the grader runs
# from /autograder/source (root's alone while grading), its kernels import their withheld copy.
chmod 0700 /autograder/source
"""

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this once per submission, as root, in /autograder; it writes results/results.json.
cd /autograder/source
exec {VENV}/bin/python -m prenorm_course.gradescope run --root /autograder/source \\
  --submission /autograder/submission --results /autograder/results/results.json
"""


def _course_files(root: Path) -> list[Path]:
    """The course files the autograder needs, relative to ``root``."""
    files = [Path("tests/nbval_sanitize.cfg")]
    for package in ("prenorm_lib", "prenorm_course/exercises", "prenorm_course/gradescope"):
        files += [p.relative_to(root) for p in (root / package).rglob("*")
                  if p.is_file() and p.suffix != ".pyc" and not (set(p.relative_to(root).parts) & SKIPPED)]
    files.append(Path("prenorm_course/__init__.py"))
    files += [p.relative_to(root) for p in solution_notebooks(root)]
    files += [p.relative_to(root) for p in exercise_notebooks(root)]
    return sorted(set(files))


def assignment_notebooks(root: Path, prefixes: list[str] | None) -> list[str]:
    """The course notebooks the assignment grades, by exercise name: all, or those whose number is in
    ``prefixes`` ("01")."""
    names = [exercise_name(p) for p in solution_notebooks(root)]
    if not prefixes:
        return names
    chosen = []
    for prefix in prefixes:
        found = [n for n in names if n.split("_", 1)[0] == prefix]
        if not found:
            raise ValueError(f"notebook {prefix!r}: expected the two-digit number of a course notebook, "
                             f"one of {[n.split('_', 1)[0] for n in names]}")
        chosen += found
    return sorted(set(chosen))


def pinned_requirements(root: Path) -> str:
    """requirements.txt without the editable install of the checkout (the hub's environment: everything)."""
    lines = (root / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("-e ")) + "\n"


def grading_requirements(root: Path) -> str:
    """requirements.txt's pins of what grading needs (``GRADER_PACKAGES``); the rest (the tests' reference
    ``transformers``, JupyterLab, the test tools, the editable install of the checkout) stays out."""
    wanted = {normalised(name) for name in GRADER_PACKAGES}
    lines = (root / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pins = [line for line in lines if "==" in line and not line.startswith("#")
            and normalised(line.split("==")[0].strip()) in wanted]
    return "\n".join(pins) + "\n"


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    archive.writestr(info, data)


def build_zip(root: Path, out: Path, prefixes: list[str] | None = None) -> list[str]:
    """Write the autograder zip to ``out``; return the notebooks the assignment grades."""
    notebooks = assignment_notebooks(root, prefixes)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = json.dumps({"notebooks": notebooks}, indent=1) + "\n"
    with zipfile.ZipFile(out, "w") as archive:
        _add(archive, "setup.sh", SETUP_SH.encode(), executable=True)
        _add(archive, "run_autograder", RUN_AUTOGRADER.encode(), executable=True)
        _add(archive, CONFIG_NAME, config.encode())
        _add(archive, "requirements.txt", grading_requirements(root).encode())
        for relative in _course_files(root):
            _add(archive, relative.as_posix(), (root / relative).read_bytes())
    return notebooks
