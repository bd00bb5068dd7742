"""``make handout``: the notebooks' code in the CS336 handout's layout, checked by the course's interface tests.

Through the front door (make, from the repository root): the export of the solution notebooks
passes every interface test; a wrong module in a notebook makes them fail; an exercise not done
stops the export with its name; the lint names what the handout's rules forbid.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from prenorm_course.exercises.paths import solution_path
from prenorm_course.handout import SOURCES, forbidden_calls

ROOT = Path(__file__).resolve().parents[2]


def make_handout(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "handout", f"FROM={source}", f"OUT={out}"], cwd=ROOT,
                          capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_the_solution_notebooks_export_passes_the_interface_tests(tmp_path):
    done = make_handout(ROOT / "notebooks", tmp_path / "handout")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "16 passed" in done.stdout
    assert "nn.functional.silu" in done.stdout  # 06's SwiGLU may use torch's SiLU; the handout's rules may not
    assert "cp " in done.stdout and "uv run pytest tests/test_model.py" in done.stdout
    module = (tmp_path / "handout" / "cs336_basics" / "prenorm_model.py").read_text()
    for name in ("def my_rms_norm", "class MyRMSNorm", "def my_silu", "def stable_softmax", "def attention",
                 "class MyTransformerLM", "class MyCachedAttention", "RMSNorm = MyRMSNorm"):
        assert name in module
    assert "### BEGIN SOLUTION" not in module


@pytest.mark.slow
def test_a_wrong_module_fails_the_interface_tests(tmp_path):
    """The same export with 6.5's causal mask dropped: the attention, block and LM tests fail, the rest pass."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name in SOURCES:
        shutil.copy(solution_path(ROOT, name), notebooks / name)
    path = notebooks / "06_your_transformer.ipynb"
    text = path.read_text()
    assert text.count(".triu(1)") == 1
    path.write_text(text.replace(".triu(1)", ".triu(10**6)"))  # masks nothing: every token sees the future
    done = make_handout(notebooks, tmp_path / "handout")
    assert done.returncode != 0
    assert "5 failed, 11 passed" in done.stdout, done.stdout
    for test in ("test_multihead_self_attention_without_rope", "test_multihead_self_attention_with_rope",
                 "test_transformer_block", "test_transformer_lm"):
        assert f"FAILED tests/test_prenorm_interface.py::{test}" in done.stdout


def test_an_exercise_not_done_stops_the_export_with_its_name(tmp_path):
    done = make_handout(ROOT / "notebooks" / "exercises", tmp_path / "handout")  # as shipped: nothing done
    assert done.returncode != 0
    assert "make handout: exercise 1.1, 1.2 in" in done.stderr and "is not done yet" in done.stderr
    assert not (tmp_path / "handout").exists()


def test_the_lint_names_what_the_handout_forbids_and_lets_the_rest_be():
    source = "\n".join([
        "import torch", "from torch import nn", "from torch.nn import functional as F",
        "class A(nn.Module):", "    def __init__(self):", "        super().__init__()",
        "        self.w = nn.Parameter(torch.empty(2, 2))", "        nn.init.trunc_normal_(self.w)",
        "        self.layers = nn.ModuleList([])", "        self.lin = nn.Linear(2, 2)",
        "    def forward(self, x):", "        y = F.silu(x) + torch.nn.functional.gelu(x)",
        "        return torch.softmax(y, -1) + y.softmax(-1)",
    ])
    found = forbidden_calls(source)
    assert sorted(line.split(": ", 1)[1].split(" (")[0] for line in found) == [
        "F.silu", "nn.Linear", "torch.nn.functional.gelu", "torch.softmax", "y.softmax"]
