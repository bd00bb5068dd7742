"""Verdicts rest on values the grader checks, not on what the learner's kernel reports (issue 31, item 2).

Whether RMSNorm's gain is an ``nn.Parameter`` was read from facts the kernel sends (type
names, parameter shapes); a kernel that patches its own fact-gathering reported a plain
tensor as a Parameter, and Exercise 1.2 passed. Now the module takes one gradient step
where it lives, and its output afterwards must match the step the grader computes.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_lib import functional
from prenorm_lib.checks import rmsnorm
from prenorm_lib.checks.core import Hint, expect_trains

# 1.2's forward calls the learner's 1.1 kernel by its name; here the library's stands in for it
my_rms_norm = functional.rms_norm

FORGED_PARAMETER = '''# Exercise 1.2: RMSNorm module
import prenorm_lib.checks.probes as _core
_real_facts = _core.facts_of
def _forged(obj, attributes=()):
    facts = _real_facts(obj, attributes)
    weight = facts["attributes"].get("weight")
    if weight is not None:
        weight["types"] = ["torch.nn.parameter.Parameter", *weight["types"]]
        facts["parameters"] = [["weight", list(weight["tensor"].shape)]]
    return facts
_core.facts_of = _forged
class MyRMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(d_model, device=device, dtype=dtype, requires_grad=device != "meta")
    def forward(self, x):
        return my_rms_norm(x, self.weight, self.eps)  # 1.1's kernel, as 1.2 asks
'''


class Frozen(nn.Module):
    """A gain the optimiser does not see (a buffer), used by forward: right values, wrong module."""

    def __init__(self, d_model: int):
        super().__init__()
        self.register_buffer("weight", torch.ones(d_model))

    def forward(self, x):
        return functional.rms_norm(x, self.weight)


class Trainable(Frozen):
    def __init__(self, d_model: int):
        nn.Module.__init__(self)
        self.weight = nn.Parameter(torch.ones(d_model))


@pytest.mark.parametrize(("cls", "passes"), [(Trainable, True), (Frozen, False)])
def test_a_gradient_step_tells_a_parameter_from_a_tensor(cls, passes):
    module, x = cls(6), torch.randn(3, 6)
    gain = torch.rand(6) + 0.5
    with torch.no_grad():
        module.weight.copy_(gain)
    step = lambda: expect_trains("1.2", module, module, lambda x, weight: functional.rms_norm(x, weight),
                                 {"weight": gain}, x, "after one gradient step the output is wrong")
    if passes:
        step()
    else:
        with pytest.raises(Hint, match="after one gradient step the output is wrong"):
            step()


def test_inline_the_checker_still_passes_a_module_whose_gain_is_a_parameter():
    class Mine(nn.Module):
        def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

        def forward(self, x):
            return my_rms_norm(x, self.weight, self.eps)

    rmsnorm.rms_norm_module.core(Mine)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_a_kernel_that_reports_a_plain_tensor_as_a_parameter_does_not_pass_1_2():
    root = repo_root()
    name = "01_rmsnorm.ipynb"
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / name), read_notebook(solution_path(root, name)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 1.2"))
    cell.source = FORGED_PARAMETER
    result = check.check_notebook(nb, name, root, 60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["1.2"][0] == check.HINT and "after one gradient step" in statuses["1.2"][1], statuses
    assert statuses["1.1"][0] == check.PASSED, statuses
