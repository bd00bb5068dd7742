"""The notebook-timing benchmark: it times each cell in a fresh kernel and flags a notebook over budget."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from prenorm_course import notebook_times
from prenorm_course.exercises.paths import solution_name


@pytest.fixture
def slow_notebook(tmp_path: Path) -> Path:
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A notebook with one slow cell"),
        nbformat.v4.new_code_cell("import time"),
        nbformat.v4.new_code_cell("time.sleep(0.5)"),
        nbformat.v4.new_code_cell("print('done')"),
    ])
    path = tmp_path / "01_slow.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.mark.slow
def test_the_slow_cell_is_found_and_the_budget_decides(slow_notebook: Path, capsys):
    timed = notebook_times.time_notebook(slow_notebook)
    assert timed.slowest[0][1] == 2 and 0.5 <= timed.slowest[0][0] < 5
    assert timed.run_all >= 0.5 and timed.kernel_start > 0
    assert notebook_times.main([str(slow_notebook), "--budget", "0.2", "--strict"]) == 1
    assert "OVER" in capsys.readouterr().out
    assert notebook_times.main([str(slow_notebook), "--budget", "60", "--strict"]) == 0
    out = capsys.readouterr().out
    assert "within" in out and "OVER" not in out and "[2] 0.5" in out


def test_a_missing_notebook_is_named(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as raised:
        notebook_times.main([str(tmp_path / "99_missing.ipynb")])
    assert raised.value.code == 2
    assert "99_missing.ipynb" in capsys.readouterr().err


@pytest.mark.slow
def test_timing_every_notebook_writes_the_measurements(slow_notebook: Path, tmp_path: Path, monkeypatch, capsys):
    """`make notebook-times` (no notebook named) times notebooks/ and writes its section; naming one does not."""
    from prenorm_course import measurements

    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    solution = root / "notebooks" / solution_name(slow_notebook.name)  # make notebook-times times the solutions
    slow_notebook.rename(solution)
    monkeypatch.chdir(root)
    assert notebook_times.main([]) == 0
    section = measurements.read_sections((root / measurements.DOCUMENT).read_text())["notebook-times"]
    assert "*Written by `make notebook-times` on " in section and "| 01_slow_solutions.ipynb | " in section, section
    before = (root / measurements.DOCUMENT).read_text()
    assert notebook_times.main([str(solution)]) == 0
    assert (root / measurements.DOCUMENT).read_text() == before
    assert "docs/measurements.md keeps the run of them all" in capsys.readouterr().out
