"""Where the course files live, independent of the current directory.

The course root is the checkout that holds ``notebooks/`` (these tools are run from a
checkout, never installed): ``--root``, else ``PRENORM_ROOT``, else the current folder, and
every function takes an explicit ``root`` so tests can point at a temp folder.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "PRENORM_ROOT"
SOLUTION_GLOB = "[0-9][0-9]_*.ipynb"


def repo_root(root: str | os.PathLike | None = None) -> Path:
    """The course root: ``root`` if given (``--root``), else ``$PRENORM_ROOT``, else the current folder."""
    if root is None:
        root = os.environ.get(ROOT_ENV) or Path.cwd()
    path = Path(root).resolve()
    if not (path / "notebooks").is_dir():
        raise FileNotFoundError(
            f"no notebooks/ folder under the course root {path}; run from the course checkout "
            f"(make does), pass --root, or set {ROOT_ENV} to the folder that holds notebooks/"
        )
    return path


def solution_dir(root: Path) -> Path:
    return root / "notebooks"


def exercise_dir(root: Path) -> Path:
    return root / "notebooks" / "exercises"


def solution_notebooks(root: Path) -> list[Path]:
    """The solution notebooks ``notebooks/NN_*.ipynb``, in course order."""
    return sorted(solution_dir(root).glob(SOLUTION_GLOB))


def sanitize_file(root: Path) -> Path | None:
    """The nbval sanitize rules, or None when the course has none."""
    path = root / "tests" / "nbval_sanitize.cfg"
    return path if path.is_file() else None
