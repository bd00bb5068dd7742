"""Notebook 05's graded kernel cannot reach the block's forward passes, the answers to 5.1 and 5.2 (issue 31, item 1).

As ``test_withheld`` does for notebook 04: the routes that reach a library answer --
an alias, the file loaded again, its text run through ``exec``, a subclass, and here
also the variants that compute the same pass (sandwich with identity output norms,
DeepNorm with α = 1) -- run in a real sandboxed kernel whose library is the graded copy
of notebook 05, and each finds the stub. A 5.1 answer that hides a call of the library's
method from the source lint passed before and fails now; 5.3 is still graded there, from
the record, with nothing trained in the kernel.
"""

from __future__ import annotations

import sys

import pytest
import torch
from withheld_routes import ATTEMPT

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.kernel import OK, Kernel
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER, withheld_files
from prenorm_lib.checks import block as block_checks

NAME = "05_prenorm_vs_postnorm.ipynb"
BLOCK_FILE = "prenorm_lib/block.py"

CHEATS = '''
import importlib.util, torch
from types import SimpleNamespace
import prenorm_lib.block as block_module
from prenorm_lib import TransformerBlock as Renamed
from prenorm_lib.block import TransformerBlock
''' + ATTEMPT + '''
blk = TransformerBlock(8, 2, 16, 16)  # building a block still works: the checkers' probes build one
x = torch.randn(1, 3, 8)
parts = dict(ln1=blk.ln1, attn=blk.attn, ln2=blk.ln2, ffn=blk.ffn)
attempt("method", lambda: blk.pre_norm_forward(x))
attempt("renamed", lambda: Renamed.post_norm_forward(SimpleNamespace(**parts), x))
attempt("forward", lambda: blk(x))
spec = importlib.util.spec_from_file_location("again", block_module.__file__)
again = importlib.util.module_from_spec(spec)
spec.loader.exec_module(again)
attempt("loaded again", lambda: again.TransformerBlock.pre_norm_forward(SimpleNamespace(**parts), x))
namespace = {"__name__": "copied"}
exec(open(block_module.__file__).read(), namespace)
attempt("exec", lambda: namespace["TransformerBlock"].post_norm_forward(SimpleNamespace(**parts), x))
class Mine(TransformerBlock):
    pass
attempt("subclass", lambda: Mine(8, 2, 16, 16, norm="post")(x))
same = lambda t: t
attempt("sandwich", lambda: TransformerBlock.sandwich_forward(SimpleNamespace(ln1_out=same, ln2_out=same, **parts), x))
attempt("deepnorm", lambda: TransformerBlock.deepnorm_forward(SimpleNamespace(deepnorm_alpha=1.0, **parts), x))
attempt("scaled", lambda: TransformerBlock.scaled_pre_norm_forward(
    SimpleNamespace(norm_output_scale=1.0, branch_multiplier=1.0, **parts), x))
attempt("unnormalised", lambda: TransformerBlock.unnormalised_forward(SimpleNamespace(**parts), x))
print(sorted(found.items()))
from prenorm_lib.checks import block
print(sorted(name for name in vars(block)
             if callable(vars(block)[name]) and getattr(vars(block)[name], "__module__", "") == block.__name__))
'''


def test_the_graded_copy_of_05_stubs_exactly_the_block_passes_that_answer_5_1_and_5_2():
    """The stubs are in the file the kernel imports; the other placements (and the constructor) stay whole."""
    files = CourseFiles.take(repo_root()).files
    graded = withheld_files(files, NAME)[BLOCK_FILE].decode()
    for method in ("pre_norm_forward", "post_norm_forward", "sandwich_forward", "deepnorm_forward",
                   "scaled_pre_norm_forward"):
        assert f"prenorm_lib.block.TransformerBlock.{method} is {MARKER} {NAME}" in graded, method
    assert graded.count(MARKER) == 5
    assert "h = x + self.attn(x, token_positions)" in graded  # unnormalised_forward, kept
    assert files[BLOCK_FILE].decode().count(MARKER) == 0  # the course's own library is untouched


def test_the_variants_withheld_beside_the_answers_compute_them():
    """Why sandwich and DeepNorm are withheld too: given identity output norms, or α = 1, they are 5.1 and 5.2."""
    block = block_checks._test_block()
    parts = {name: getattr(block, name) for name in ("ln1", "attn", "ln2", "ffn")}
    x = torch.randn(2, 5, block.ln1.weight.shape[0], generator=torch.Generator().manual_seed(0))

    class Parts:
        def __init__(self, **kwargs):
            vars(self).update(parts, **kwargs)

    with torch.no_grad():
        sandwich = block.sandwich_forward.__func__(Parts(ln1_out=lambda t: t, ln2_out=lambda t: t), x)
        deepnorm = block.deepnorm_forward.__func__(Parts(deepnorm_alpha=1.0), x)
        scaled = block.scaled_pre_norm_forward.__func__(Parts(norm_output_scale=1.0, branch_multiplier=1.0), x)
        assert torch.equal(sandwich, block_checks._pre(x, *parts.values()))
        assert torch.equal(scaled, block_checks._pre(x, *parts.values()))
        assert torch.equal(deepnorm, block_checks._post(x, *parts.values()))


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_in_the_graded_kernel_of_05_every_route_to_the_block_passes_finds_the_stub():
    course = CourseFiles.take(repo_root()).for_grading(NAME)
    with Kernel(Sandbox.create(CONFINED, course)) as kernel:
        run = kernel.run_cell(CHEATS, 60)
    assert run.status == OK, run
    printed = "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip().splitlines()
    routes = ["method", "renamed", "forward", "loaded again", "exec", "subclass", "sandwich", "deepnorm", "scaled"]
    assert printed[0] == str(sorted({**dict.fromkeys(routes, "withheld"), "unnormalised": "computed"}.items()))
    # the checker modules are not there at all (their references, their mistakes): a stub that says so
    assert printed[1] == str(["__getattr__"])


# Hidden from the source lint (no `pre_norm_forward`, no `TransformerBlock(`): the library's method does the work.
HIDDEN_CALL = ("# Exercise 5.1: the pre-norm forward pass\n"
               "import prenorm_lib.block as _b\n"
               "from types import SimpleNamespace as _Parts\n\n\n"
               "def pre_norm_block(x, ln1, attn, ln2, ffn):\n"
               "    return getattr(_b.TransformerBlock, 'pre_norm' + '_forward')("
               "_Parts(ln1=ln1, attn=attn, ln2=ln2, ffn=ffn), x)\n")


def _hidden_call():
    namespace: dict = {}
    exec(HIDDEN_CALL, namespace)
    return namespace["pre_norm_block"]


def test_the_hidden_call_passes_5_1_where_the_library_is_whole(capsys):
    """What the grader's kernel had before 05 withheld anything: the whole library, so the call computed the answer."""
    block_checks.pre_norm_forward.core(_hidden_call())
    assert capsys.readouterr().out.startswith("Exercise 5.1 passed")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_the_hidden_call_fails_5_1_in_the_graded_kernel_and_5_2_5_3_still_pass():
    root = repo_root()
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / NAME), read_notebook(solution_path(root, NAME)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 5.1"))
    cell.source = HIDDEN_CALL
    result = check.check_notebook(nb, NAME, root, 60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["5.1"][0] == check.HINT and MARKER in statuses["5.1"][1], statuses
    assert statuses["5.2"][0] == statuses["5.3"][0] == check.PASSED, statuses  # 5.3: from the record
    assert not result.other_cells, result.other_cells  # the cells that train blocks are noted, not counted
    assert any("were not compared with the course run" in note for note in result.notes), result.notes
