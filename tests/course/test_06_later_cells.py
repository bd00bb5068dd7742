"""A model that passes notebook 06's checks runs every later cell (issue 37, item 3).

Notebook 06 with another learner's answers in its exercise cells (tests/course/another_learner_06.py:
other attribute names, no ``context_length``, einsum, complex RoPE) runs top to bottom in a
fresh kernel, as Run All does: every check passes, no cell raises, and the later cells — training,
sampling, the Llama comparison, the FLOP figure, generation with the cache — print their checks
as True. The first failure this catches: the sampling cell read ``model.context_length``, an
attribute no exercise asks for (AttributeError on such a model).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from another_learner_06 import ANSWERS
from nbclient import NotebookClient

from prenorm_course.exercises.markers import exercise_header
from prenorm_course.exercises.paths import solution_path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = solution_path(ROOT, "06_your_transformer.ipynb")


def with_answers(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    replaced = set()
    for cell in nb.cells:
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is not None:
            cell.source = ANSWERS[header[0]]
            replaced.add(header[0])
    assert replaced == set(ANSWERS), replaced ^ set(ANSWERS)
    return nb


@pytest.mark.slow
def test_another_learners_passing_model_runs_every_later_cell(tmp_path):
    nb = with_answers(nbformat.read(NOTEBOOK, as_version=4))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = {cell.id: "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
               for cell in nb.cells if cell.cell_type == "code"}
    errors = [cell.id for cell in nb.cells if cell.cell_type == "code"
              and any(o.get("output_type") == "error" for o in cell.get("outputs", []))]
    assert not errors, errors
    passes = [text for text in printed.values() if text.startswith("Exercise 6.")]
    assert len(passes) == 9 and all(" passed: " in text for text in passes), passes
    for cell_id in ("curves", "llama", "cache-same-tokens", "cache-work"):
        checks = [line for line in printed[cell_id].splitlines() if line.startswith("check:")]
        assert checks and all(line.endswith("True") for line in checks), (cell_id, printed[cell_id])
    assert len(printed["samples"].splitlines()) == 3
    assert printed["cache-bytes"].count("equal") == 3 and "DIFFER" not in printed["cache-bytes"]
    assert "4.513 TFLOPs (torch's FlopCounterMode: 4.513)" in printed["accounting-gpt2"]
