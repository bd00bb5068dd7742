"""Where the course files live, independent of the current directory.

A solution notebook is ``notebooks/NN_<name>_solutions.ipynb``; its exercise version, the file a
learner has, is ``notebooks/exercises/NN_<name>.ipynb``. The exercise name is the notebook's name
everywhere else too (the exercise catalogue, the withheld answers, grade reports, hub and Gradescope
files): this module is the one place that maps one to the other (``exercise_name``, ``solution_path``).

The course root is the checkout that holds ``notebooks/`` (these tools are run from a
checkout, never installed): ``--root``, else ``PRENORM_ROOT``, else the current folder, and
every function takes an explicit ``root`` so tests can point at a temp folder.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "PRENORM_ROOT"
SOLUTION_SUFFIX = "_solutions"  # notebooks/01_rmsnorm_solutions.ipynb: the tab in JupyterLab says which one it is
SOLUTION_GLOB = f"[0-9][0-9]_*{SOLUTION_SUFFIX}.ipynb"
EXERCISE_GLOB = "[0-9][0-9]_*.ipynb"
SOLUTION_TITLE_MARK = " — solutions"  # ends a solution notebook's title heading; the exercise build strips it


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
    """The solution notebooks ``notebooks/NN_*_solutions.ipynb``, in course order."""
    return sorted(solution_dir(root).glob(SOLUTION_GLOB))


def exercise_notebooks(root: Path) -> list[Path]:
    """The exercise notebooks ``notebooks/exercises/NN_*.ipynb``, in course order."""
    return sorted(exercise_dir(root).glob(EXERCISE_GLOB))


def is_solution_name(name: str) -> bool:
    return Path(name).stem.endswith(SOLUTION_SUFFIX)


def exercise_name(solution: str | os.PathLike) -> str:
    """The exercise notebook's file name for a solution notebook: ``01_rmsnorm.ipynb`` for
    ``notebooks/01_rmsnorm_solutions.ipynb``; an exercise name is returned as it is."""
    path = Path(solution)
    stem = path.stem[:-len(SOLUTION_SUFFIX)] if is_solution_name(path.name) else path.stem
    return stem + path.suffix


def solution_name(exercise: str | os.PathLike) -> str:
    """The solution notebook's file name for an exercise name: ``01_rmsnorm_solutions.ipynb`` for
    ``01_rmsnorm.ipynb``; a solution name is returned as it is."""
    path = Path(exercise)
    return path.name if is_solution_name(path.name) else f"{path.stem}{SOLUTION_SUFFIX}{path.suffix}"


def solution_path(root: Path, name: str | os.PathLike) -> Path:
    """The solution notebook of the notebook ``name`` (an exercise or a solution name)."""
    return solution_dir(root) / solution_name(Path(name).name)


def exercise_path(root: Path, name: str | os.PathLike) -> Path:
    """The exercise notebook of the notebook ``name`` (a solution or an exercise name)."""
    return exercise_dir(root) / exercise_name(Path(name).name)


def sanitize_file(root: Path) -> Path | None:
    """The nbval sanitize rules, or None when the course has none."""
    path = root / "tests" / "nbval_sanitize.cfg"
    return path if path.is_file() else None
