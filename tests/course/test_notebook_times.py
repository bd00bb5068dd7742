"""The notebook-timing benchmark: it times each cell in a fresh kernel and flags a notebook over budget."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from prenorm_course import notebook_times


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
