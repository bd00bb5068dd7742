"""Cells that run the learner's own classes (tag ``uses-exercises``, 06's training): the exercise
notebook stores no output for them, and neither nbval nor the grader compares what they print."""

from __future__ import annotations

import nbformat

from prenorm_course.exercises.build import exercise_notebook
from prenorm_course.exercises.check import _other_cell_problems
from prenorm_course.exercises.kernel import ERROR, CellRun
from prenorm_course.exercises.markers import USES_EXERCISES_TAG
from prenorm_course.exercises.withheld import MARKER


def trains(tags: list[str]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("history = train(MyModel())", metadata={"tags": tags})
    cell.id = "train"
    cell.execution_count = 3
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="final loss 2.53\n")]
    return cell


def test_the_exercise_version_stores_no_output_and_nbval_ignores_it():
    solution = nbformat.v4.new_notebook(cells=[trains([USES_EXERCISES_TAG])])
    nb, _ = exercise_notebook(solution, "01_x.ipynb")
    cell = nb.cells[0]
    assert cell.outputs == [] and cell.execution_count is None
    assert cell.metadata["tags"] == [USES_EXERCISES_TAG, "nbval-ignore-output"]
    assert solution.cells[0].outputs, "the solution notebook keeps its output"


def test_the_grader_does_not_compare_its_output():
    learner_run = {"train": CellRun(outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                    text="Exercise 6.7: not done yet\n")])}
    for tags, problems in (([USES_EXERCISES_TAG], 0), ([], 1)):
        course = trains(tags)
        found, _ = _other_cell_problems(nbformat.v4.new_notebook(cells=[course]), [], learner_run, set(), [],
                                        {"train": course})
        assert len(found) == problems


def test_a_withheld_failure_in_it_is_not_counted_unless_the_learner_edited_it():
    """In a graded kernel the library's side of 06's comparison is withheld: the cell raises the withheld message
    (the stub keeps TransformerLM's signature, so build_model gets that far); any other failure counts."""
    withheld = CellRun(status=ERROR, ename="ImportError",
                       evalue=f"prenorm_lib.model.TransformerLM is {MARKER} 06_your_transformer.ipynb: …")
    other = CellRun(status=ERROR, ename="ValueError", evalue="unknown TransformerLM arguments")
    for run, tags, edited, problems in ((withheld, [USES_EXERCISES_TAG], set(), 0),
                                        (withheld, [USES_EXERCISES_TAG], {"train"}, 1), (withheld, [], set(), 0),
                                        (other, [USES_EXERCISES_TAG], set(), 1), (other, [], set(), 1)):
        course = trains(tags)
        found, note = _other_cell_problems(nbformat.v4.new_notebook(cells=[course]), [], {"train": run}, edited,
                                           [], {"train": course})
        assert len(found) == problems, (run.ename, tags, edited, found)
        assert ("not compared" in note) == (problems == 0)
