"""The exercises as nbgrader source notebooks, for teachers who grade with nbgrader.

``python -m prenorm_course.nbgrader_export OUT`` (``make nbgrader-export``) writes, for each
course notebook ``NN_name.ipynb``, ``OUT/source/NN_name/NN_name.ipynb``: nbgrader's "source"
version of an assignment, from which nbgrader's own ``generate_assignment`` makes the release.

* Each exercise cell (``# Exercise N.M: …``) keeps its solution regions between nbgrader's
  own markers, ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (the course uses the same),
  and is an nbgrader "autograded answer" cell (``solution: true``); nbgrader replaces each
  region by ``raise NotImplementedError()`` in the release.
* The check cell after it becomes an nbgrader "autograder tests" cell worth one point
  (``grade: true``, locked): it calls the course's check in its strict form,
  ``check.NAME.core(...)``, which raises on a hint or an unfinished exercise and prints the
  course's "passed" line otherwise; nbgrader gives the point when the cell raises nothing.
  Which check and on which names comes from the metadata ``make exercises`` writes into the
  course's exercise notebook, never from learner text.
* A cell tagged ``answer`` keeps its code but no output, and an answer's text is held back,
  as in the learners' repository of a graded class (:func:`prenorm_course.hub.distribution.for_a_class`).

nbgrader runs these checks **inside the learner's kernel**: the learner's code shares a
process with the checker and its reference answers (the whole library), so a notebook can
patch the checker, read the library's answers, or print what a pass prints. Its verdicts
are the self-check's, weaker than the course's grader (``make grade``, Gradescope), which
runs the learner's code in bubblewrap where the answers are withheld and decides outside
the kernel. ``OUT/nbgrader_config.py`` is a starting configuration: the course id, and the
kernel nbgrader runs (one in which ``import prenorm_lib`` works: ``pip install`` the wheel
that ``make wheel`` builds into the environment of that kernel).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat

from prenorm_course.exercises.build import learners_names, read_notebook, write_notebook
from prenorm_course.exercises.markers import exercise_header
from prenorm_course.exercises.paths import exercise_name, exercise_path, repo_root, solution_notebooks
from prenorm_course.hub.distribution import for_a_class

SCHEMA = 3  # nbgrader's cell metadata schema
CONFIG = '''# A starting nbgrader configuration for the prenorm exercises (written by make nbgrader-export).
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "prenorm"
# The kernel nbgrader runs learners' notebooks in must import prenorm_lib (pip install the course's wheel there).
# c.Execute.kernel_name = "python3"
c.Execute.timeout = 300
'''


def grade_id(kind: str, exercise_id: str) -> str:
    return f"{kind}_{exercise_id.replace('.', '_')}"


def strict_check(metadata: dict) -> str:
    """The check cell as an nbgrader test: the course's check in its strict form (raises unless passed)."""
    function = metadata["check"].rsplit(".", 1)[1]
    return (f"# Autograder test (1 point): the course's check of Exercise {metadata['exercise']}; it raises\n"
            f"# on a hint or an unfinished exercise, and prints the course's \"passed\" line otherwise.\n"
            f"{metadata['kernel_source'].rstrip()}\n\ncheck.{function}.core({', '.join(metadata['args'])})\n")


def source_notebook(solution: nbformat.NotebookNode, exercise: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's source version of one course notebook."""
    checks = {cell.id: cell.metadata["prenorm"] for cell in exercise.cells if "prenorm" in cell.metadata}
    nb = for_a_class(copy.deepcopy(solution))
    learners_names(nb)  # nbgrader releases it to learners: an exercise notebook's title
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        header = exercise_header(cell.source)
        if header is not None:
            cell.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id("exercise", header[0]),
                                         "locked": False, "schema_version": SCHEMA, "solution": True}
        elif cell.id in checks:
            cell.source = strict_check(checks[cell.id])
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id("check", checks[cell.id]["exercise"]),
                                         "locked": True, "points": 1, "schema_version": SCHEMA, "solution": False}
    missing = set(checks) - {c.id for c in nb.cells}
    if missing:
        raise ValueError(f"check cells {sorted(missing)} of the exercise notebook are not in the course notebook; "
                         "run make exercises")
    return nb


def export(root: Path, out: Path) -> list[Path]:
    """Write every course notebook's nbgrader source version under ``out/source/``; return them."""
    written = []
    for path in solution_notebooks(root):
        name = exercise_name(path)  # the assignment and its notebook are named as the learner's file
        exercise = read_notebook(exercise_path(root, name))
        target = out / "source" / Path(name).stem / name
        write_notebook(source_notebook(read_notebook(path), exercise), target)
        written.append(target)
    (out / "nbgrader_config.py").write_text(CONFIG)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.nbgrader_export",
                                     description="The exercises as nbgrader source notebooks.")
    parser.add_argument("out", type=Path, help="nbgrader's course folder to write source/ into, e.g. dist/nbgrader")
    parser.add_argument("--root", type=Path, help="course root (default: $PRENORM_ROOT or the current folder)")
    args = parser.parse_args(argv)
    try:
        written = export(repo_root(args.root), args.out)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"then, in {args.out}: nbgrader generate_assignment NN_name (see its nbgrader_config.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
