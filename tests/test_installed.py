"""The library works installed (a wheel, ``pip install .``), from any folder, without the checkout.

What an installed library cannot have: files the wheel leaves out (records, corpora), a
course root derived from where its source sits (``Path(__file__).parents[N]``), notebooks
that import the teacher tools (``prenorm_course`` is not installed with it). ``make
wheel-check`` builds and installs the wheel for real; these tests keep the reasons it can
fail from coming back, in milliseconds. Each check is shown to fire on something made
wrong on purpose.
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import nbformat
import pytest

import prenorm_lib
from prenorm_lib.lab import experiments

PACKAGE = Path(prenorm_lib.__file__).resolve().parent
ROOT = PACKAGE.parent  # the checkout these tests run from
SKIPPED = {"__pycache__"}

# The first cell of every notebook: one import, whose comment says what to install. Where
# prenorm_lib is not installed (a fresh Colab, a kernel of another environment), IPython's
# short traceback shows that very line, fix included; where it is, the reader sees one plain
# import, not a try/except block that exists only for the other case.
FIRST_CELL = ("import prenorm_lib  # the course's library; if it is missing: %pip install "
              "prenorm_lib-0.1.0-py3-none-any.whl (built by `make wheel`), then restart the kernel")


def package_data_globs() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["setuptools"]["package-data"]["prenorm_lib"]


def unshipped(package: Path, globs: list[str]) -> list[str]:
    """Files of the package that are neither Python modules nor matched by a package-data glob."""
    left_out = []
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if path.is_dir() or set(relative.parts) & SKIPPED or path.suffix in (".py", ".pyc"):
            continue
        if not any(fnmatch.fnmatch(relative.as_posix(), glob) for glob in globs):
            left_out.append(relative.as_posix())
    return left_out


def test_every_data_file_of_the_package_ships_in_the_wheel():
    assert unshipped(PACKAGE, package_data_globs()) == []


def test_a_data_file_left_out_of_package_data_is_found(tmp_path):
    (tmp_path / "lab" / "experiments" / "results").mkdir(parents=True)
    (tmp_path / "lab" / "experiments" / "results" / "new.json").write_text("{}")
    (tmp_path / "lab" / "figures.png").write_bytes(b"")
    assert unshipped(tmp_path, package_data_globs()) == ["lab/figures.png"]


def test_every_record_lives_inside_the_package():
    assert experiments.RESULTS_DIR.is_relative_to(PACKAGE)
    for name in experiments.available():
        assert experiments.record_path(name).is_file(), name
    assert not (ROOT / "results").exists(), "records belong in prenorm_lib/lab/experiments/results/"


def climbs_out(source: str, parts: int) -> list[int]:
    """Lines of a module ``parts`` path parts below the package (``lab/plotting.py``: 2) that take
    ``Path(__file__)….parents[N]`` with N >= ``parts``: a folder above the package, found from where it sits."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
                and isinstance(node.slice, ast.Constant) and node.slice.value >= parts
                and any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node.value))):
            lines.append(node.lineno)
    return lines


def test_the_library_finds_nothing_by_climbing_out_of_its_folder():
    """A root derived from ``__file__`` works in a checkout and nowhere else (site-packages has no course)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = len(path.relative_to(PACKAGE).parts)
        found[path.relative_to(PACKAGE).as_posix()] = climbs_out(path.read_text(encoding="utf-8"), parts)
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_a_climbing_path_is_found():
    """What main had: lab/experiments/__init__.py took parents[3] / "results", lab/plotting.py parents[2]."""
    source = "from pathlib import Path\nRESULTS_DIR = Path(__file__).resolve().parents[3] / 'results'\n"
    assert climbs_out(source, parts=3) == [2]
    assert climbs_out(source.replace("[3]", "[2]"), parts=3) == []  # prenorm_lib itself: inside the package
    assert climbs_out("x = record.parents[5]\n", parts=3) == []  # not where a file sits


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("**/[0-9][0-9]_*.ipynb"))


def test_no_notebook_imports_the_teacher_tools():
    """prenorm_course is not installed with the wheel: a notebook that imports it fails for every learner."""
    for path in notebooks():
        code = [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
        assert not any("prenorm_course" in source for source in code), path.name


@pytest.mark.slow
def test_the_first_cell_shows_what_to_install_where_the_library_is_missing(tmp_path):
    """Run in a real kernel with a module name that does not exist: the error shows the line with the fix."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    missing = FIRST_CELL.replace("import prenorm_lib ", "import prenorm_lib_not_here ")
    assert missing != FIRST_CELL
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(missing)])
    with pytest.raises(CellExecutionError):
        NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    (error,) = notebook.cells[0].outputs
    assert error.output_type == "error" and error.ename == "ModuleNotFoundError"
    shown = "\n".join(error.traceback)
    assert "%pip install prenorm_lib-0.1.0-py3-none-any.whl" in shown and "restart the kernel" in shown
    assert len(error.traceback) <= 4, error.traceback  # one frame: the line itself, not a stack
    installed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FIRST_CELL)])
    NotebookClient(installed, timeout=120, kernel_name="python3").execute()
    assert installed.cells[0].outputs == []  # installed: the cell prints nothing (nbval compares no output)


@pytest.mark.parametrize("path", notebooks(), ids=lambda path: path.name)
def test_every_notebook_starts_with_the_install_check(path):
    cells = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    assert cells[0].source == FIRST_CELL


def kernelspec_mismatches(paths: list[Path], installed: dict) -> list[str]:
    """Notebooks whose stored kernelspec differs from the installed kernel's (JupyterLab then rewrites it)."""
    wanted = {"display_name": installed["display_name"], "language": installed["language"]}
    return [path.name for path in paths
            if {k: nbformat.read(path, as_version=4).metadata.get("kernelspec", {}).get(k) for k in wanted} != wanted]


def test_every_notebook_names_the_kernel_jupyterlab_starts():
    """Otherwise JupyterLab rewrites the kernelspec when the kernel starts, and every notebook
    opens as "modified" (closing it asks to save changes nobody made)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    installed = {"display_name": spec.display_name, "language": spec.language}
    assert kernelspec_mismatches(notebooks(), installed) == []
    assert kernelspec_mismatches(notebooks()[:1], {**installed, "display_name": "Python 3"}), "the check cannot fail"
