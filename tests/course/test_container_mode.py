"""Gradescope's container mode keeps one notebook's kernel from handing answers to the next (issue 36, item 5).

Without bubblewrap the kernels of one submission share ``/tmp`` and ``/dev/shm``. The attack that
scored 7/7 there: notebook 01's kernel (whose library copy still held 06's answers) copied them
into ``/tmp``, and 06's kernel subclassed them. Now every kernel's library copy lacks the
answers of every notebook of the assignment, and a kernel's user leaves nothing behind (its
processes killed, its files in the shared folders removed) before the next kernel starts.

The first tests need root (container mode changes users); the last runs the Gradescope zip as
Gradescope does, in a container without ``CAP_SYS_ADMIN`` (``test_gradescope``'s outer sandbox).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from prenorm_course.exercises import check
from prenorm_course.exercises.build import read_notebook, write_notebook
from prenorm_course.exercises.paths import exercise_name, repo_root, solution_notebooks, solution_path
from prenorm_course.exercises.sandbox import (
    CONTAINER,
    KERNEL_UID_BASE,
    CourseFiles,
    Sandbox,
    _pids_of_user,
    kernel_env,
    remove_leftovers,
)
from prenorm_course.exercises.verify import filled_in
from prenorm_course.exercises.withheld import MARKER, withheld_files

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernels' users and sandboxes are Linux's")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="container mode runs kernels as fresh users: root only")

LEAVE_BEHIND = """
import os, subprocess, sys
marker = os.path.join("/tmp", sys.argv[1])
with open(marker, "w") as f:
    f.write("answers")
os.chmod(marker, 0o644)
os.makedirs(os.path.join("/dev/shm", sys.argv[1], "deep"), exist_ok=True)
subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(os.getuid())
"""


@ROOT_ONLY
def test_a_container_kernels_user_leaves_no_file_and_no_process_behind():
    name = f"prenorm-leftover-{os.getpid()}"
    box = Sandbox.create(CONTAINER, CourseFiles({}))
    try:
        proc = subprocess.run(box.command([sys.executable, "-c", LEAVE_BEHIND, name]), capture_output=True,
                              text=True, timeout=120, env=kernel_env(box.workdir), cwd=box.workdir)
        assert proc.returncode == 0, proc.stderr
        uid = int(proc.stdout.split()[-1])
        assert uid == box.uid and Path("/tmp", name).exists() and Path("/dev/shm", name, "deep").is_dir()
        assert _pids_of_user(uid), "the daemon should be running until the sandbox goes"
    finally:
        box.remove()
    assert not Path("/tmp", name).exists() and not Path("/dev/shm", name).exists()
    assert _pids_of_user(box.uid) == []


@ROOT_ONLY
def test_remove_leftovers_takes_only_that_users_entries_and_never_a_real_accounts(tmp_path: Path):
    uid = KERNEL_UID_BASE + 12345
    shared = tmp_path / "shared"
    (shared / "deeper").mkdir(parents=True)
    os.chmod(shared / "deeper", 0o777)  # a world-writable folder inside a shared one is searched too
    for path in (shared / "mine", shared / "deeper" / "mine.txt"):
        path.write_text("x")
        os.chown(path, uid, uid)
    (shared / "theirs").write_text("y")
    removed = remove_leftovers(uid, shared=(str(shared),))
    assert sorted(Path(p).name for p in removed) == ["mine", "mine.txt"]
    assert (shared / "theirs").exists() and (shared / "deeper").is_dir()
    with pytest.raises(ValueError, match="not a kernel's user"):
        remove_leftovers(os.getuid(), shared=(str(shared),))


def test_every_kernel_of_a_container_run_lacks_every_assignment_notebooks_answers():
    files = CourseFiles.take(repo_root()).files
    alone = withheld_files(files, "01_rmsnorm.ipynb")
    together = withheld_files(files, "01_rmsnorm.ipynb", also=("06_your_transformer.ipynb",))
    assert MARKER.encode() not in alone["prenorm_lib/block.py"]  # 01's own kernel kept 06's block before
    for module in ("block.py", "model.py", "layers.py", "attention.py", "norm.py"):
        assert MARKER.encode() in together[f"prenorm_lib/{module}"], module
    course = CourseFiles.take(repo_root(), together=("01_rmsnorm.ipynb", "06_your_transformer.ipynb"))
    assert MARKER.encode() in course.for_grading("01_rmsnorm.ipynb").files["prenorm_lib/model.py"]


@pytest.mark.slow
def test_with_every_notebook_withheld_the_filled_in_notebooks_still_pass():
    """Each kernel lacking every notebook's answers (container mode with all six in the assignment): the probes
    of 5.1 and 5.2 hand the learner's block stand-ins of its submodules, and every right answer still passes."""
    root = repo_root()
    everything = tuple(exercise_name(path) for path in solution_notebooks(root))
    course = CourseFiles.take(root, together=everything)
    for name in ("05_prenorm_vs_postnorm.ipynb", "01_rmsnorm.ipynb"):
        nb = filled_in(read_notebook(root / "notebooks" / "exercises" / name), read_notebook(solution_path(root, name)))
        result = check.check_notebook(nb, name, root, 120, course=course)
        statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
        assert all(status == check.PASSED for status, _ in statuses.values()), (name, statuses)


# --- the attack, end to end, in Gradescope's layout without CAP_SYS_ADMIN --------------------------------------

LEAVE = '''# Exercise 1.1: rms_norm kernel
import os
try:  # does this kernel's library hold 06's answers?
    from prenorm_lib.layers import Linear as _Linear
    _Linear(2, 2)
    held = "answers"
except ImportError:
    held = "stubs"
with open("/tmp/prenorm-leak", "w") as _f:
    _f.write(held)
os.chmod("/tmp/prenorm-leak", 0o666)
def my_rms_norm(x, weight, eps=1e-5):
    raise RuntimeError(f"held={held}")
'''

FIND = '''# Exercise 6.1: Linear
import os
leak = open("/tmp/prenorm-leak").read() if os.path.exists("/tmp/prenorm-leak") else "none"
class MyLinear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        raise RuntimeError(f"leak={leak}")
'''


@pytest.mark.slow
@ROOT_ONLY
def test_in_gradescopes_container_01s_kernel_cannot_hand_06_its_answers(tmp_path: Path):
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap to lay out /autograder")
    from test_gradescope import _outer_sandbox  # the hub's harness: /autograder as Gradescope lays it out

    root = repo_root()
    make = subprocess.run(["make", "gradescope", "NB=01 06"], cwd=root, capture_output=True, text=True)
    assert make.returncode == 0, make.stdout + make.stderr
    folder = tmp_path / "autograder"
    (folder / "source").mkdir(parents=True)
    with zipfile.ZipFile(root / "dist" / "gradescope-autograder.zip") as archive:
        archive.extractall(folder / "source")
    for name in ("setup.sh", "run_autograder"):
        (folder / "source" / name).chmod(0o755)
    shutil.copy(folder / "source" / "run_autograder", folder / "run_autograder")
    setup = subprocess.run([*_outer_sandbox(folder, True), "env", "PATH=/usr/local/bin:/usr/bin:/bin", "bash",
                            "/autograder/source/setup.sh"], capture_output=True, text=True, timeout=1800)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    (folder / "submission").mkdir()
    (folder / "results").mkdir()
    for name, source in (("01_rmsnorm.ipynb", LEAVE), ("06_your_transformer.ipynb", FIND)):
        nb = read_notebook(root / "notebooks" / "exercises" / name)
        header = source.split("\n", 1)[0].split(":")[0]
        cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(header + ":"))
        cell.source = cell.source.split("\n", 1)[0] + "\n" + source.split("\n", 1)[1]
        write_notebook(nb, folder / "submission" / name)
    start = time.monotonic()
    run = subprocess.run([*_outer_sandbox(folder, False), "/autograder/run_autograder"], capture_output=True,
                         text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((folder / "results" / "results.json").read_text())
    print(f"\ncontainer mode, 01 and 06: {time.monotonic() - start:.0f} s")
    assert results["extra_data"]["confinement"] == "container"
    outputs = {t["name"].split(":")[1].split("(")[0].strip(): t["output"] for t in results["tests"]}
    assert "held=stubs" in outputs["Exercise 1.1"], outputs  # 01's kernel lacked 06's answers
    assert "leak=none" in outputs["Exercise 6.1"], outputs  # and 06's kernel found nothing 01's left in /tmp
    assert all(t.get("output_format") == "text" for t in results["tests"])
