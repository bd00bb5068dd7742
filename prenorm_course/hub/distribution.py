"""What learners receive: the exercise notebooks and the figures, in a repository of their own.

``build(root, bare)`` writes one commit onto the branch ``BRANCH`` of the bare repository
``bare`` (``HUB/class.git``), the repository the nbgitpuller link serves. Its tree holds

* ``notebooks/exercises/NN_*.ipynb`` -- the exercise notebooks, as ``make exercises`` made
  them (every solution region replaced by a placeholder), at the same path as in the course,
  so links and ``collect`` name them alike, less what self-study keeps folded: a cell tagged
  ``answer`` (the library's code shown for comparison, the runs a prediction is about, the
  reading of a prediction) keeps its code but not its stored output, and an answer's text
  is replaced by a line saying the teacher holds it back (:func:`for_a_class`);
* ``figures/*.png`` -- the pictures the notebooks' text refers to;
* ``README.md`` -- a learner's page (:data:`LEARNER_README`).

Nothing else of the checkout goes in: not the solution notebooks, not the grader
(``prenorm_course/``), the tests, the experiment code or the teacher's history. The branch
has a history of its own (each build's parent is the previous build, so nbgitpuller merges a
teacher's fix into each learner's copy), and no commit of it ever held a solution.

What self-checking needs is the library, ``prenorm_lib`` (the check cells import
``prenorm_lib.checks``): it is installed in the environment every learner's server runs
(``HUB/venv``), not copied into their home. It is the course's reference implementation:
a learner who opens its files can read code that does what most exercises ask, and the
checks' reference answers. The graded kernel (``make grade``, Gradescope) withholds those
parts and the checkers refuse calls to them, so a pass there needs the learner's own code;
retyping the library's code by hand is not something any check can tell from one's own.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.leaks import ANSWER_TAG
from prenorm_course.exercises.markers import BEGIN, END
from prenorm_course.exercises.paths import exercise_dir, exercise_notebooks, solution_notebooks

BRANCH = "main"
AUTHOR = ("prenorm course", "course@prenorm.invalid")
LEARNER_README = """# prenorm — your copy of the course

Open `notebooks/exercises/` and start with `01_rmsnorm.ipynb`. Each exercise cell has a
`# YOUR CODE HERE` region to fill in; the cell after it checks your answer and prints one
line: "passed", a hint naming the mistake, or "not done yet". Run All goes to the end
whatever you have done so far.

Your work lives in this folder and is yours: clicking the course link again brings your
teacher's newest changes and keeps your edits. Your teacher collects
`notebooks/exercises/*.ipynb` from here; a file of feedback, once graded, appears in
`feedback/`.

The checks call the course's library, `prenorm_lib` (installed for you). It is the course's
reference: reading it is allowed, but the grader runs your notebook where the library's
answers are withheld, so only your own code passes there.
"""


HELD_BACK = "*(In a graded class this answer is held back: your teacher shares it after grading.)*"


def for_a_class(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The exercise notebook without the answers self-study keeps folded: outputs of code cells tagged
    ``answer`` cleared (their code stays, so every later cell still runs), answer text replaced."""
    nb = copy.deepcopy(notebook)
    for cell in nb.cells:
        if ANSWER_TAG not in cell.metadata.get("tags", []):
            continue
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        else:
            cell.source = HELD_BACK
    return nb


def files(root: Path) -> dict[str, bytes]:
    """The distribution's files (path -> bytes), read from the checkout ``root``."""
    found = {"README.md": LEARNER_README.encode()}
    for path in exercise_notebooks(root):
        found[f"notebooks/exercises/{path.name}"] = (nbformat.writes(for_a_class(read_notebook(path))) + "\n").encode()
    for path in sorted((root / "figures").glob("*.png")):
        found[f"figures/{path.name}"] = path.read_bytes()
    if not any(name.startswith("notebooks/") for name in found):
        raise FileNotFoundError(f"no exercise notebooks in {exercise_dir(root)}; run make exercises first")
    return found


def solution_lines(root: Path, shortest: int = 12) -> set[str]:
    """Lines that only a solution holds: inside a solution region of a course notebook (stripped, at least
    ``shortest`` characters, not a comment) and nowhere outside the regions of any course notebook."""
    inside, outside = set(), set()
    for path in solution_notebooks(root):
        for cell in read_notebook(path).cells:
            region = False
            for line in cell.source.splitlines():
                text = line.strip()
                if text.startswith(BEGIN) or text.startswith(END):
                    region = text.startswith(BEGIN)
                    continue
                (inside if region else outside).add(text)
    return {line for line in inside - outside if len(line) >= shortest and not line.startswith("#")}


def find_solutions(files: dict[str, bytes], root: Path) -> list[str]:
    """Where ``files`` (path -> bytes) hold a solution: a course notebook, a solution marker or a solution line."""
    lines, found = solution_lines(root), []
    course = {p.name for p in solution_notebooks(root)}
    for name, data in sorted(files.items()):
        text = data.decode("utf-8", errors="replace")
        if Path(name).name in course:
            found.append(f"{name}: a course (solution) notebook")
        if BEGIN in text or END in text:
            found.append(f"{name}: a solution marker")
        shown = {line.strip() for raw in text.splitlines() for line in _json_lines(raw)}
        found += [f"{name}: the solution line {line!r}" for line in sorted(lines & shown)]
    return found


def _json_lines(raw: str) -> list[str]:
    """A line of a file, and (in a notebook's JSON) the source lines a JSON string holds."""
    stripped = raw.strip().rstrip(",")
    if stripped.startswith('"') and stripped.endswith('"'):
        try:
            return [raw, *json.loads(stripped).splitlines()]
        except ValueError:
            pass
    return [raw]


def _git(bare: Path, *args: str, env: dict | None = None, input: str | None = None) -> str:
    run = subprocess.run(["git", "--git-dir", str(bare), *args], check=True, capture_output=True, text=True,
                         env=env, input=input)
    return run.stdout.strip()


def build(root: Path, bare: Path, log=print) -> str:
    """Commit the distribution onto ``BRANCH`` of ``bare`` (made if missing); return the branch's commit."""
    if not bare.exists():
        subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
        _git(bare, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
    given = files(root)
    leaks = find_solutions(given, root)
    if leaks:  # make exercises refuses these too; the learners' repository never gets one
        raise ValueError("the learners' repository would hold a solution: " + "; ".join(leaks[:5]))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "tree"
        for relative, data in given.items():
            target = work / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": str(work),
               "GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1],
               "GIT_COMMITTER_NAME": AUTHOR[0], "GIT_COMMITTER_EMAIL": AUTHOR[1]}
        _git(bare, "add", "--all", ".", env=env)
        tree = _git(bare, "write-tree", env=env)
        try:
            tip = _git(bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}")
        except subprocess.CalledProcessError:
            tip = ""
        if tip and _git(bare, "rev-parse", f"{tip}^{{tree}}") == tree:
            log(f"the learners' repository {bare} is up to date ({tip[:12]})")
            return tip
        source = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "a checkout without git"
        message = f"The course for learners, from {source}"
        commit = _git(bare, "commit-tree", tree, *(["-p", tip] if tip else []), "-m", message, env=env)
        _git(bare, "update-ref", f"refs/heads/{BRANCH}", commit, *([tip] if tip else []))
    log(f"the learners' repository {bare}: {commit[:12]} ({message})")
    return commit


def remove_full_course_repository(hub: Path, log=print) -> None:
    """An older hub folder served the whole checkout (solutions included) to every learner: remove it."""
    old = hub / "course.git"
    if old.is_dir():
        shutil.rmtree(old)
        log(f"removed {old}: it held the whole course, solutions included, readable by every learner")
