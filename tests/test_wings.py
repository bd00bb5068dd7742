"""The package's three wings stay in order, and the course's tools stay outside it.

The model imports neither neighbour; the lab does not import the checkers; nothing in
``prenorm_lib`` imports ``prenorm_course`` (the teacher tools are not installed with it).

Read from the source (every ``import`` and ``from … import`` anywhere in a file, functions
included), so a late import inside a function counts too. The check is shown to fire on
a file made wrong on purpose.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import prenorm_lib

PACKAGE = Path(prenorm_lib.__file__).resolve().parent
WINGS = ("lab", "checks")


def wing_of(path: Path) -> str:
    """"model", "lab" or "checks" for a file of the package."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] in WINGS else "model"


def imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}
    return modules


FORBIDDEN = {
    "model": ("prenorm_lib.lab", "prenorm_lib.checks", "prenorm_course"),
    "lab": ("prenorm_lib.checks", "prenorm_course"),
    "checks": ("prenorm_course",),
}


def boundary_violations(path: Path, source: str, wing: str) -> list[str]:
    return sorted(
        f"{path.name} ({wing}) imports {module}"
        for module in imported_modules(source)
        if any(module == banned or module.startswith(banned + ".") for banned in FORBIDDEN[wing])
    )


SOURCES = sorted(PACKAGE.rglob("*.py"))
# The package's own __init__ re-exports the lab's setup() lazily (PEP 562 ``__getattr__``);
# test_importing_the_model_loads_neither_neighbour proves that laziness instead.
CHECKED = [path for path in SOURCES if path != PACKAGE / "__init__.py"]


@pytest.mark.parametrize("path", CHECKED, ids=[str(p.relative_to(PACKAGE)) for p in CHECKED])
def test_imports_respect_the_wings(path):
    assert boundary_violations(path, path.read_text(encoding="utf-8"), wing_of(path)) == []


def test_every_wing_has_files():
    assert {wing_of(p) for p in SOURCES} == {"model", "lab", "checks"}
    model = {p.stem for p in SOURCES if wing_of(p) == "model"}
    assert {"functional", "layers", "norm", "ffn", "rope", "attention", "block", "model", "validation"} <= model


def test_importing_the_model_loads_neither_neighbour():
    """``import prenorm_lib`` (the model) pulls in no lab or course module, nor matplotlib."""
    code = ("import sys, prenorm_lib; from prenorm_lib import TransformerLM; "
            "print(sorted(m for m in sys.modules if m.startswith(('prenorm_lib.lab', 'prenorm_course', "
            "'prenorm_lib.checks', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_setup_is_still_one_call_away():
    from prenorm_lib.lab import reproducible

    assert prenorm_lib.setup is reproducible.setup
    assert prenorm_lib.seed_everything is reproducible.seed_everything
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        prenorm_lib.nothing  # noqa: B018


@pytest.mark.parametrize(
    ("wing", "source", "expected"),
    [
        ("model", "from prenorm_lib.lab.train import train", ["x.py (model) imports prenorm_lib.lab.train",
                                                             "x.py (model) imports prenorm_lib.lab.train.train"]),
        ("model", "def f():\n    import prenorm_course.site", ["x.py (model) imports prenorm_course.site"]),
        ("model", "from prenorm_lib import lab", ["x.py (model) imports prenorm_lib.lab"]),
        ("lab", "from prenorm_lib.checks import block", ["x.py (lab) imports prenorm_lib.checks",
                                                               "x.py (lab) imports prenorm_lib.checks.block"]),
        ("lab", "from prenorm_lib import functional\nfrom prenorm_lib.lab import data", []),
        ("checks", "from prenorm_lib.lab import train\nfrom prenorm_lib import model", []),
        ("checks", "from prenorm_course.exercises import grade", ["x.py (checks) imports prenorm_course.exercises",
                                                              "x.py (checks) imports prenorm_course.exercises.grade"]),
    ],
)
def test_the_check_fires_on_a_crossing_import(wing, source, expected):
    assert boundary_violations(Path("x.py"), source, wing) == expected
