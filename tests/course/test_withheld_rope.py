"""The graded kernel of notebook 03 cannot reach 3.1's answer, the table of angles (issue 31, item 1).

Before, the kernel's library kept ``functional.rope_angles`` because 3.3's solution read it
through ``wavelengths``; a 3.1 whose ``build_cache`` fetched the library's table under a
name the source refusal does not know passed. Now the table and every helper that returns
it or its speeds are stubs there, whichever way they are reached, and 3.3 is solved from
the formula.
"""

from __future__ import annotations

import sys

import pytest
from withheld_routes import ATTEMPT

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.kernel import OK, Kernel
from prenorm_course.exercises.paths import repo_root, solution_path
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER, WITHHELD

NOTEBOOK = "03_rope.ipynb"
TABLE_HELPERS = ("prenorm_lib.functional:rope_angles", "prenorm_lib.lab.figures.rope:wavelengths",
                 "prenorm_lib.positions:sinusoidal_encoding", "prenorm_lib.rope:complex_rotations")

ROUTES = '''
import importlib.util, torch
import prenorm_lib.functional as functional
import prenorm_lib.lab.figures.rope as figures
import prenorm_lib.positions as positions
from prenorm_lib.functional import rope_angles as renamed
from prenorm_lib.positions import SinusoidalPositions
from prenorm_lib.rope import complex_rotations
''' + ATTEMPT + '''
def again(module):
    spec = importlib.util.spec_from_file_location("again_" + module.__name__.replace(".", "_"), module.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy
attempt("alias", lambda: renamed(10000.0, 8, 4))
attempt("getattr", lambda: getattr(functional, "rope_" + "angles")(10000.0, 8, 4))
attempt("loaded again", lambda: again(functional).rope_angles(10000.0, 8, 4))
namespace = {"__name__": "copied"}
exec(open(functional.__file__).read(), namespace)
attempt("exec", lambda: namespace["rope_angles"](10000.0, 8, 4))
attempt("wavelengths", lambda: figures.wavelengths(10000.0, 8))
attempt("wavelengths loaded again", lambda: again(figures).wavelengths(10000.0, 8))
attempt("sinusoidal", lambda: positions.sinusoidal_encoding(torch.arange(4), 8, 10000.0))
namespace = {"__name__": "copied"}
exec(open(positions.__file__).read(), namespace)
attempt("sinusoidal exec", lambda: namespace["sinusoidal_encoding"](torch.arange(4), 8, 10000.0))
class Mine(SinusoidalPositions):
    pass
attempt("subclass", lambda: Mine(8)(torch.zeros(4, 8)))
attempt("complex", lambda: complex_rotations(10000.0, 8, 4))
print(sorted(found.items()))
'''


def test_every_helper_that_returns_the_table_or_its_speeds_is_declared_for_03():
    assert set(TABLE_HELPERS) <= set(WITHHELD[NOTEBOOK])


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_in_the_graded_kernel_of_03_every_route_to_the_table_finds_the_stub():
    course = CourseFiles.take(repo_root()).for_grading(NOTEBOOK)
    with Kernel(Sandbox.create(CONFINED, course)) as kernel:
        run = kernel.run_cell(ROUTES, 60)
    assert run.status == OK, run
    printed = "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip()
    routes = ["alias", "getattr", "loaded again", "exec", "wavelengths", "wavelengths loaded again", "sinusoidal",
              "sinusoidal exec", "subclass", "complex"]
    assert printed == str(sorted(dict.fromkeys(routes, "withheld").items()))


# build_cache through the library's table under a name the source refusal does not look for
TABLE_BY_GETATTR = ("# Exercise 3.1: build the cos/sin cache\n"
                    "import prenorm_lib.functional as _f\n"
                    "_table = getattr(_f, 'rope_' + 'angles')\n"
                    "def build_cache(theta, d_k, max_seq_len):\n"
                    "    angles = _table(theta, d_k, max_seq_len)\n"
                    "    return angles.cos().float(), angles.sin().float()\n")


def _with_cheat():
    root = repo_root()
    nb = filled_in(read_notebook(root / "notebooks" / "exercises" / NOTEBOOK),
                   read_notebook(solution_path(root, NOTEBOOK)))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Exercise 3.1"))
    cell.source = TABLE_BY_GETATTR
    return nb


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_a_3_1_that_calls_the_librarys_table_passed_before_and_fails_now(monkeypatch):
    root = repo_root()
    before = tuple(entry for entry in WITHHELD[NOTEBOOK] if entry not in TABLE_HELPERS)
    with monkeypatch.context() as patched:
        patched.setitem(WITHHELD, NOTEBOOK, before)  # the entry as it was: the table in the kernel
        result = check.check_notebook(_with_cheat(), NOTEBOOK, root, 60)
    assert {s.exercise.id: s.status for s in result.exercises}["3.1"] == check.PASSED
    result = check.check_notebook(_with_cheat(), NOTEBOOK, root, 60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    assert statuses["3.1"][0] == check.HINT and MARKER in statuses["3.1"][1], statuses
    # 3.3's solution computes the wavelengths itself, so it passes without the library's table
    assert statuses["3.2"][0] == statuses["3.3"][0] == check.PASSED, statuses
    assert any("were not compared with the course run" in note for note in result.notes)
