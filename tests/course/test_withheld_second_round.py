"""A second round of cheats, each run through ``check`` in a real graded kernel: none may pass.

A red-team pass after the answers were withheld from ``prenorm_lib`` found them elsewhere:
in Hugging Face's ``transformers`` (in the course's environment for the tests; the kernel
now sees only the packages it needs, :mod:`prenorm_course.exercises.packages`), in a
library helper that computes the same thing by another road (LayerNorm of ``[x, −x]`` is
RMSNorm of ``x``; the figures' ``swish`` with β = 1 is SiLU), and in torch's softmax module,
which the lint's pattern missed. Each passed ``check`` before this round.
"""

from __future__ import annotations

import sys

import pytest

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")]


def graded(notebook: str, cell_sources: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``check`` of the course solution of ``notebook`` with the exercise cells ``cell_sources`` put in."""
    root = repo_root()
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / notebook),
                   read_notebook(solution_path(root, notebook)))
    for exercise_id, source in cell_sources.items():
        cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(f"# Exercise {exercise_id}"))
        cell.source = f"{cell.source.splitlines()[0]}\n{source}"
    result = check.check_notebook(nb, notebook, root, 60)
    return {s.exercise.id: (s.status, s.detail) for s in result.exercises}


LAYER_NORM_OF_X_AND_MINUS_X = (
    "import torch\nfrom prenorm_lib import functional\n"
    "def my_rms_norm(x, weight, eps=1e-5):\n"
    "    d = x.shape[-1]\n"
    "    return functional.layer_norm(torch.cat([x, -x], -1), torch.cat([weight, weight]), eps=eps)[..., :d]\n")
LLAMA_RMS_NORM = (
    "from transformers.models.llama.modeling_llama import LlamaRMSNorm\n"
    "class MyRMSNorm(LlamaRMSNorm):\n"
    "    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):\n"
    "        super().__init__(d_model, eps=eps)\n"
    "        self.to(device=device, dtype=dtype)\n")


def test_01_layer_norm_of_x_and_minus_x_and_llamas_rms_norm_do_not_pass():
    statuses = graded("01_rmsnorm.ipynb", {"1.1": LAYER_NORM_OF_X_AND_MINUS_X, "1.2": LLAMA_RMS_NORM})
    assert statuses["1.1"][0] == check.HINT and MARKER in statuses["1.1"][1], statuses
    assert statuses["1.2"][0] != check.PASSED and "transformers" in statuses["1.2"][1], statuses
    assert statuses["1.3"][0] == check.PASSED, statuses


def test_02_the_figures_swish_and_transformers_silu_do_not_pass():
    statuses = graded("02_swiglu_silu_relu.ipynb", {
        "2.1": "from prenorm_lib.lab.figures.ffn import swish\ndef my_silu(x):\n    return swish(x, 1.0)\n",
        "2.2": ("from transformers.activations import ACT2FN\ndef my_swiglu(x, w1, w2, w3):\n"
                "    return (ACT2FN['silu'](x @ w1.T) * (x @ w3.T)) @ w2.T\n"),
    })
    assert statuses["2.1"][0] == check.HINT and MARKER in statuses["2.1"][1], statuses
    assert statuses["2.2"][0] != check.PASSED and "transformers" in statuses["2.2"][1], statuses
    assert statuses["2.3"][0] == check.PASSED, statuses


def test_04_torchs_softmax_module_is_refused_and_transformers_attention_is_out_of_reach():
    statuses = graded("04_attention.ipynb", {
        "4.1": "import torch\nfrom torch import nn\ndef stable_softmax(x, dim):\n    return nn.Softmax(dim)(x)\n",
        "4.3": ("from transformers.integrations.sdpa_attention import sdpa_attention_forward\n"
                "def attention(Q, K, V, mask=None):\n    raise RuntimeError('not reached')\n"),
    })
    assert statuses["4.1"][0] == check.HINT and "Softmax" in statuses["4.1"][1], statuses
    assert statuses["4.3"][0] != check.PASSED and "transformers" in statuses["4.3"][1], statuses
    assert statuses["4.4"][0] == check.PASSED, statuses


PATCHED_STEP = '''import torch
from torch import nn
import prenorm_lib.checks.probes as _core
class MyRMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(d_model, device=device, dtype=dtype).requires_grad_()  # not an nn.Parameter
    def forward(self, x):
        return my_rms_norm(x, self.weight, self.eps)
_facts, _step = _core.facts_of, _core.gradient_step
def _lying_facts(obj, attributes=()):
    facts = _facts(obj, attributes)
    if isinstance(obj, MyRMSNorm) and facts["attributes"].get("weight") is not None:
        facts["attributes"]["weight"]["types"] = ["torch.nn.parameter.Parameter", "torch.Tensor"]
        facts["parameters"] = [["weight", list(obj.weight.shape)]]
    return facts
def _lying_step(module, x, direction, lr):
    if not isinstance(module, MyRMSNorm):
        return _step(module, x, direction, lr)
    w = module.weight.detach().clone().requires_grad_(True)
    keep, module.weight = module.weight, w
    (module(x) * direction).sum().backward()
    module.weight = (keep - lr * w.grad).detach().requires_grad_()
_core.facts_of, _core.gradient_step = _lying_facts, _lying_step
'''


def test_a_cell_that_patches_the_graders_probes_can_forge_the_gradient_step():
    """The limit README states: the step runs in the learner's kernel, so a cell that replaces the grader's
    probes passes 1.2 with a weight no optimiser would see. It forges Parameter-ness only: forward's values
    are still the learner's own (here, the course's 1.1). If this ever fails, README's sentence is stale."""
    statuses = graded("01_rmsnorm.ipynb", {"1.2": PATCHED_STEP})
    assert statuses["1.2"] == (check.PASSED, "passed"), statuses
