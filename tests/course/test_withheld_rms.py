"""Notebook 01's graded kernel has neither answer, and 1.2 (which builds on 1.1) blames the right exercise.

1.2's ``forward`` calls the learner's own ``my_rms_norm``, so the graded kernel of 01 can
withhold 1.1's answer too: ``functional.rms_norm`` and ``prms_norm`` (RMSNorm over the first
p of the channels) beside ``RMSNorm``. Every route the tests of :mod:`test_withheld` use
for 04 -- a renamed import, the file loaded again, ``exec`` of its text, a subclass -- finds
the stub here too. A right module on a wrong kernel gets a 1.2 hint that sends the learner
to 1.1, in the notebook (local) and through the grader's wire alike.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn
from withheld_routes import ATTEMPT

from prenorm_course.exercises import check, withheld
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.kernel import OK, Kernel
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER
from prenorm_lib.checks import Hint
from prenorm_lib.checks import rmsnorm as checker
from prenorm_lib.checks.remote import loopback

NOTEBOOK = "01_rmsnorm.ipynb"
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")


def test_01_withholds_both_kernels_and_the_module():
    assert set(withheld.withheld_for(NOTEBOOK)) >= {
        "prenorm_lib.functional:rms_norm", "prenorm_lib.functional:prms_norm", "prenorm_lib.norm:RMSNorm"}


CHEATS = '''
import importlib.util, torch
import prenorm_lib, prenorm_lib.functional as functional
from prenorm_lib.functional import rms_norm as renamed, prms_norm as renamed_partial
from prenorm_lib.norm import RMSNorm
x, w = torch.randn(2, 8), torch.ones(8)
''' + ATTEMPT + '''
attempt("renamed", lambda: renamed(x, w))
attempt("renamed prms", lambda: renamed_partial(x, w, p=1.0))
attempt("attribute", lambda: functional.rms_norm(x, w, 1e-5, upcast=False))
spec = importlib.util.spec_from_file_location("again", functional.__file__)
again = importlib.util.module_from_spec(spec)
spec.loader.exec_module(again)
attempt("loaded again", lambda: again.rms_norm(x, w))
attempt("loaded again prms", lambda: again.prms_norm(x, w, p=1.0))
namespace = {"__name__": "copied"}
exec(open(functional.__file__).read(), namespace)
attempt("exec", lambda: namespace["rms_norm"](x, w))
attempt("exec prms", lambda: namespace["prms_norm"](x, w, p=1.0))
class Mine(RMSNorm):
    pass
attempt("subclass", lambda: Mine(8))
attempt("block", lambda: prenorm_lib.TransformerBlock(8, 2, 16, 16))
print(sorted(found.items()))
from prenorm_lib.checks import rmsnorm
print(sorted(name for name in vars(rmsnorm)
             if callable(vars(rmsnorm)[name]) and getattr(vars(rmsnorm)[name], "__module__", "") == rmsnorm.__name__))
'''


@linux_only
def test_in_the_graded_kernel_of_01_every_route_to_the_kernel_finds_the_stub():
    course = CourseFiles.take(repo_root()).for_grading(NOTEBOOK)
    with Kernel(Sandbox.create(CONFINED, course)) as kernel:
        run = kernel.run_cell(CHEATS, 60)
    assert run.status == OK, run
    printed = "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip().splitlines()
    routes = ["renamed", "renamed prms", "attribute", "loaded again", "loaded again prms", "exec", "exec prms",
              "subclass", "block"]
    assert printed[0] == str(sorted(dict.fromkeys(routes, "withheld").items()))
    # the checker modules are not there at all (their references, their mistakes): a stub that says so
    assert printed[1] == str(["__getattr__"])


# --- 1.2 on the learner's own kernel ---------------------------------------------------------

RIGHT_KERNEL = """
def my_rms_norm(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
"""
KERNELS = {  # name -> the learner's 1.1 with one mistake
    "no gain": """
def my_rms_norm(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
""",
    "eps fixed": """
def my_rms_norm(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(x.dtype)
""",
    "no eps": """
def my_rms_norm(x, weight, eps=1e-5):
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True)) * weight.float()).to(x.dtype)
""",
    "layernorm": """
def my_rms_norm(x, weight, eps=1e-5):
    c = x.float() - x.float().mean(-1, keepdim=True)
    return (c / torch.sqrt(c.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
""",
    "crashes": """
def my_rms_norm(x, weight, eps=1e-5):
    return x / rms  # noqa: F821
""",
}
NOT_DONE_KERNEL = """
def my_rms_norm(x, weight, eps=1e-5):
    raise NotImplementedError("Exercise 1.1: rms_norm kernel")
"""


def module_source(forward: str = "my_rms_norm(x, self.weight, self.eps)") -> str:
    return f"""
class MyRMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        return {forward}
"""


@pytest.fixture(params=["local", "wire"])
def learner(request):
    """``MyRMSNorm`` as a notebook defines it (1.1's and 1.2's cells run in one namespace), as the checker
    gets it: the class itself, or through the grader's wire from that namespace (``remote.loopback``)."""

    def make(kernel: str, module: str | None = None) -> object:
        namespace = {"torch": torch, "nn": nn}
        exec(kernel, namespace)
        exec(module or module_source(), namespace)
        if request.param == "local":
            return namespace["MyRMSNorm"]
        return loopback(namespace).lookup("MyRMSNorm")

    return make


def test_a_right_module_on_a_right_kernel_passes(learner, capsys):
    checker.rms_norm_module(learner(RIGHT_KERNEL))
    assert capsys.readouterr().out.startswith("Exercise 1.2 passed: ")


@pytest.mark.parametrize("mistake", sorted(KERNELS))
def test_a_right_module_on_a_wrong_kernel_is_sent_to_1_1(mistake, learner):
    """Without the kernel's check, "no gain" read "forward ignores self.weight" and the eps mistakes
    "the module ignores eps": the module was blamed for the kernel's mistake."""
    with pytest.raises(Hint, match=r"^Exercise 1\.2: ") as info:
        checker.rms_norm_module.core(learner(KERNELS[mistake]))
    assert "1.1" in str(info.value) and "make 1.1 pass first" in str(info.value)
    assert "ignores" not in str(info.value)


def test_forward_that_gives_the_kernels_output_is_told_the_mistake_is_in_1_1(learner):
    with pytest.raises(Hint, match=r"forward gives what your `my_rms_norm` gives, and that is not RMSNorm"):
        checker.rms_norm_module.core(learner(KERNELS["layernorm"]))


def test_a_module_on_an_unfinished_kernel_is_sent_to_1_1(learner):
    with pytest.raises(Hint, match=r"^Exercise 1\.2: .*(Exercise 1\.1 is not done yet|NotImplementedError: "
                                   r"Exercise 1\.1)"):
        checker.rms_norm_module.core(learner(NOT_DONE_KERNEL))


@pytest.mark.parametrize(("forward", "expected"), [
    ("my_rms_norm(x, torch.ones_like(self.weight), self.eps)", "forward ignores self.weight"),
    ("my_rms_norm(x, self.weight)", "the module ignores eps"),
])
def test_a_wrong_module_on_a_right_kernel_still_gets_its_own_hint(forward, expected, learner):
    with pytest.raises(Hint, match=r"^Exercise 1\.2: ") as info:
        checker.rms_norm_module.core(learner(RIGHT_KERNEL, module_source(forward)))
    assert expected in str(info.value) and "1.1" not in str(info.value)


def test_a_wrong_module_on_a_wrong_kernel_is_sent_to_1_1_first(learner):
    """Neither can be judged while the kernel is wrong: the learner fixes 1.1, then sees the module's own hint."""
    module = module_source("(x / x.abs().max()) * self.weight")  # does not even call the kernel
    with pytest.raises(Hint, match=r"your `my_rms_norm` \(Exercise 1\.1\) is not RMSNorm on .*, so forward "
                                   r"cannot be judged yet"):
        checker.rms_norm_module.core(learner(KERNELS["no gain"], module))


# --- the whole notebook in the graded kernel ---------------------------------------------------


def graded(cell_sources: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``check`` of the course solution of 01 with the exercise cells ``cell_sources`` (by exercise id) put in."""
    root = repo_root()
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / NOTEBOOK),
                   read_notebook(solution_path(root, NOTEBOOK)))
    for exercise_id, source in cell_sources.items():
        cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(f"# Exercise {exercise_id}"))
        cell.source = f"{cell.source.splitlines()[0]}\n{source}"  # the exercise's own header line
    result = check.check_notebook(nb, NOTEBOOK, root, 60)
    assert not result.other_cells, result.other_cells
    return {s.exercise.id: (s.status, s.detail) for s in result.exercises}


ALIAS = "import prenorm_lib.functional as functional\nmy_rms_norm = functional.rms_norm\n"
EXEC_COPY = ("import prenorm_lib.functional as _f\n_ns = {}\nexec(open(_f.__file__).read(), _ns)\n"
             "def my_rms_norm(x, weight, eps=1e-5):\n    return _ns['rms' + '_norm'](x, weight, eps)\n")


@pytest.mark.slow
@linux_only
@pytest.mark.parametrize("cheat", [ALIAS, EXEC_COPY], ids=["alias", "exec copy"])
def test_the_librarys_kernel_as_1_1_fails_check_and_1_2_points_at_1_1(cheat):
    statuses = graded({"1.1": cheat})
    assert statuses["1.1"][0] == check.HINT, statuses
    assert statuses["1.2"][0] == check.HINT and "Exercise 1.1" in statuses["1.2"][1], statuses
    assert statuses["1.3"][0] == check.PASSED, statuses
    if cheat == EXEC_COPY:  # no lint catches it: only the stub does
        assert MARKER in statuses["1.1"][1], statuses


@pytest.mark.slow
@linux_only
def test_with_only_the_module_withheld_the_exec_copy_passed_1_1(monkeypatch):
    """The entry 01 had before: the library's kernel, run from its own file's text, earned 1.1."""
    monkeypatch.setitem(withheld.WITHHELD, NOTEBOOK, ("prenorm_lib.norm:RMSNorm",))
    statuses = graded({"1.1": EXEC_COPY})
    assert statuses["1.1"] == (check.PASSED, "passed"), statuses


@pytest.mark.slow
@linux_only
def test_graded_a_wrong_kernel_under_a_right_module_is_one_mistake_in_1_1():
    statuses = graded({"1.1": KERNELS["no gain"].strip()})
    assert statuses["1.1"][0] == check.HINT and "ignores `weight`" in statuses["1.1"][1], statuses
    assert statuses["1.2"][0] == check.HINT and "make 1.1 pass first" in statuses["1.2"][1], statuses
    assert "ignores self.weight" not in statuses["1.2"][1], statuses
    assert statuses["1.3"][0] == check.PASSED, statuses
