"""binder/: the course image for Binder and Zero to JupyterHub, as far as this machine can check it.

No image is built here (no container engine can pull a base image, and PyTorch's CPU
wheel index is not reachable). What is checked: binder/ pins exactly what
requirements.txt pins, torch comes from the CPU-only index, the library is installed by
postBuild, and repo2docker itself reads the folder into the Dockerfile it would build
(``--no-build``). repo2docker lives in a throw-away venv of its own (it must not change
the course's pins): CI installs it and names it in PRENORM_REPO2DOCKER, and sets
PRENORM_REQUIRE_REPO2DOCKER=1 so that its absence there is a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from prenorm_course.exercises.paths import repo_root

CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def pins(path: Path) -> dict[str, str]:
    """Package name -> version specifier, for every requirement line (no comments, options or -e)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        found[requirement.name.lower()] = str(requirement.specifier)
    return found


def test_binder_pins_exactly_what_requirements_txt_pins():
    root = repo_root()
    course, binder = pins(root / "requirements.txt"), pins(root / "binder" / "requirements.txt")
    assert binder == course
    assert all(spec.startswith("==") and "," not in spec for spec in binder.values()), binder


def test_torch_comes_from_the_cpu_index_and_postbuild_installs_the_library():
    binder = repo_root() / "binder"
    assert CPU_INDEX in (binder / "requirements.txt").read_text().splitlines()
    assert "-e ." not in (binder / "requirements.txt").read_text().splitlines()  # postBuild installs it
    assert os.access(binder / "postBuild", os.X_OK)
    assert "pip install --no-deps --no-cache-dir ." in (binder / "postBuild").read_text()
    assert (binder / "runtime.txt").read_text().strip() == "python-3.11"  # pyproject: requires-python >= 3.11


def test_repo2docker_reads_the_folder_into_a_dockerfile():
    command = os.environ.get("PRENORM_REPO2DOCKER")
    if not command:
        reason = "PRENORM_REPO2DOCKER names no jupyter-repo2docker (CI installs one in a throw-away venv)"
        if os.environ.get("PRENORM_REQUIRE_REPO2DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    run = subprocess.run([command, "--no-build", "--debug", str(repo_root())], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    dockerfile = run.stdout + run.stderr
    assert "Building conda environment for python=3.11" in dockerfile
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in dockerfile
    assert "RUN ./binder/postBuild" in dockerfile
