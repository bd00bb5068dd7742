"""The graded kernel cannot reach the answers: the library copy it imports lacks them (issue 31, item 1).

The cheats that passed before -- the library's implementation under another name, its file
loaded again under a new module name, its text run through ``exec``, its layer inside a
learner's class -- run here in a real sandboxed kernel whose library is the graded copy of
notebook 04, and each finds only the stub that says the piece is withheld while grading;
the checker modules there hold only their probes, not the checkers' reference copies.
"""

from __future__ import annotations

import sys

import nbformat
import pytest
from withheld_routes import ATTEMPT

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.kernel import ERROR, OK, CellRun, Kernel
from prenorm_course.exercises.leaks import LIBRARY_ANSWERS
from prenorm_course.exercises.markers import Exercise
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER, WITHHELD, withheld_files, withheld_source

SOURCE = '''"""A module."""

import torch


@torch.no_grad()
def answer(x):
    return x * 2


class Layer:
    def forward(self, x):
        return answer(x)

    def other(self):
        return 1
'''


def test_a_withheld_function_class_or_method_is_a_stub_that_says_so():
    namespace: dict = {}
    exec(withheld_source(SOURCE, "lib.mod", ["answer", "Layer.forward"], "04_x.ipynb"), namespace)
    with pytest.raises(ImportError, match=r"^lib\.mod\.answer is withheld while grading 04_x\.ipynb"):
        namespace["answer"](1)
    with pytest.raises(ImportError, match=r"lib\.mod\.Layer\.forward is withheld while grading"):
        namespace["Layer"]().forward(1)
    assert namespace["Layer"]().other() == 1  # the rest of the class is kept
    exec(withheld_source(SOURCE, "lib.mod", ["Layer"], "04_x.ipynb"), namespace)
    with pytest.raises(ImportError, match=r"lib\.mod\.Layer is withheld while grading"):
        namespace["Layer"]()


def test_a_name_the_library_does_not_define_is_an_error_not_a_silent_pass(monkeypatch):
    with pytest.raises(ValueError, match=r"lib\.mod defines no 'answr'"):
        withheld_source(SOURCE, "lib.mod", ["answr"], "04_x.ipynb")
    monkeypatch.setitem(WITHHELD, "99_x.ipynb", ("prenorm_lib.nowhere:answer",))
    with pytest.raises(ValueError, match=r"no module prenorm_lib\.nowhere in the library"):
        withheld_files({"prenorm_lib/functional.py": SOURCE.encode()}, "99_x.ipynb")


def test_every_declared_piece_exists_in_the_library():
    files = CourseFiles.take(repo_root()).files
    for notebook in WITHHELD:
        graded = withheld_files(files, notebook)  # raises for a name the library does not define
        assert graded != files and any(MARKER.encode() in data for data in graded.values())


CHEATS = '''
import importlib.util, inspect, math, torch
import prenorm_lib, prenorm_lib.functional as functional
from prenorm_lib.functional import scaled_dot_product_attention as renamed
from prenorm_lib.attention import MultiHeadSelfAttention
q = k = v = torch.randn(1, 3, 4)
''' + ATTEMPT + '''
attempt("renamed", lambda: renamed(q, k, v))
attempt("softmax", lambda: functional.softmax(q, -1))
spec = importlib.util.spec_from_file_location("again", functional.__file__)
again = importlib.util.module_from_spec(spec)
spec.loader.exec_module(again)
attempt("loaded again", lambda: again.scaled_dot_product_attention(q, k, v))
namespace = {"__name__": "copied"}
exec(open(functional.__file__).read(), namespace)
attempt("exec", lambda: namespace["softmax"](q, -1))
class Mine(MultiHeadSelfAttention):
    pass
attempt("subclass", lambda: Mine(8, 2, 16, 10000.0))
attempt("block", lambda: prenorm_lib.TransformerBlock(8, 2, 16, 16))
print(sorted(found.items()))
from prenorm_lib.checks import attention, block, ffn, rmsnorm, rope
print(sorted(name for m in (attention, block, ffn, rmsnorm, rope) for name in vars(m)
             if callable(vars(m)[name]) and getattr(vars(m)[name], "__module__", "") == m.__name__))
'''


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_in_the_graded_kernel_of_04_every_route_to_the_answer_finds_the_stub():
    course = CourseFiles.take(repo_root()).for_grading("04_attention.ipynb")
    with Kernel(Sandbox.create(CONFINED, course)) as kernel:
        run = kernel.run_cell(CHEATS, 60)
    assert run.status == OK, run
    printed = "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip().splitlines()
    assert printed[0] == str(sorted(dict.fromkeys(
        ["renamed", "softmax", "loaded again", "exec", "subclass", "block"], "withheld").items()))
    # the checker modules are not there at all (their references, their mistakes): a stub that says so
    assert printed[1] == str(["__getattr__"] * 5)


def _cell(cell_id: str, source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, id=cell_id)


def test_cells_that_need_a_withheld_piece_are_not_counted_but_edited_cells_are():
    course = {c.id: c for c in [_cell("a", "x = 1"), _cell("b", "y = answer(x)"), _cell("c", "print(y)"),
                                _cell("d", "print(2)"), _cell("e", "print(3)")]}
    for cell in course.values():
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    merged = nbformat.v4.new_notebook(cells=list(course.values()))
    withheld = CellRun(ERROR, ename="ImportError", evalue=f"lib.answer is {MARKER} 04.ipynb: ...")
    same = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    runs = {"a": CellRun(OK, outputs=same), "b": withheld,
            "c": CellRun(ERROR, ename="NameError", evalue="name 'y' is not defined"),
            "d": CellRun(OK, outputs=[{"output_type": "stream", "name": "stdout", "text": "2\n"}]),
            "e": CellRun(OK, outputs=[{"output_type": "stream", "name": "stdout", "text": "3\n"}])}
    exercises = [Exercise("4.1", "x", "zz", "zy")]
    problems, note = check._other_cell_problems(merged, exercises, runs, {"e"}, [], course)
    assert note.startswith("3 cell(s) from `y = answer(x)` on were not compared with the course run")
    assert problems == ["cell `print(3)`: its output changed — you edited this cell"]
    # before the withheld cell, and without one, everything is compared as before
    runs["b"] = CellRun(ERROR, ename="ImportError", evalue="No module named 'answer'")
    problems, note = check._other_cell_problems(merged, exercises, runs, set(), [], course)
    assert note == "" and len(problems) == 4


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_a_copy_of_the_library_run_through_exec_does_not_pass_4_3():
    """It passed before (its source names no library call; the attention came from the library's own text)."""
    root = repo_root()
    name = "04_attention.ipynb"
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / name), read_notebook(solution_path(root, name)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 4.3"))
    cell.source = ("# Exercise 4.3: scaled dot-product attention with a boolean mask\n"
                   "import prenorm_lib.functional as _f\n_ns = {}\nexec(open(_f.__file__).read(), _ns)\n"
                   "def attention(Q, K, V, mask=None):\n"
                   "    return _ns['scaled_dot' + '_product_attention'](Q, K, V, mask)\n")
    result = check.check_notebook(nb, name, root, 60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["4.3"][0] == check.HINT and MARKER in statuses["4.3"][1], statuses
    assert statuses["4.1"][0] == statuses["4.4"][0] == check.PASSED, statuses
    assert any("were not compared with the course run" in note for note in result.notes)


def test_every_library_answer_is_withheld_from_its_notebooks_graded_kernel():
    """What ``leaks`` keeps out of view (the code an exercise re-implements) the grader keeps out of reach.

    One list per purpose, tied here: an exercise's own answer (``leaks.LIBRARY_ANSWERS``, per
    exercise) must be among what its notebook's kernel lacks (``WITHHELD``, which adds every
    helper computing the same); a withheld class covers its methods.
    """
    for exercise_id, answers in LIBRARY_ANSWERS.items():
        [notebook] = [name for name in WITHHELD if name.startswith(f"{int(exercise_id.split('.')[0]):02d}_")]
        for answer in answers:
            assert any(answer == held or answer.startswith(held + ".") for held in WITHHELD[notebook]), \
                f"{exercise_id}: {answer} is not withheld from {notebook}'s graded kernel"
