"""No answer in view: what an exercise notebook shows must not give an exercise away.

A learner reads an exercise notebook top to bottom before running anything, so every
stored output and every unfolded cell is in view. ``build`` refuses an exercise
notebook in which one of them holds

* two lines of an exercise's solution (its BEGIN/END region; one, if that is all it has);
* two lines of the library code the exercise re-implements (:data:`LIBRARY_ANSWERS`),
  e.g. ``inspect.getsource(functional.rms_norm)`` printed below exercise 1.1;
* a prediction's answer: every word a prediction exercise answers with (5.3's
  "trains", "stalls", "diverges") in one output of the exercise's own section.

A cell that must show such a thing (the library's code, for comparison once the
exercise is done) carries the tag ``answer`` in the solution notebook; ``build`` folds
it in the exercise version (source and outputs hidden: JupyterLab shows one line
that opens on a click), and a folded cell is out of view.
"""

from __future__ import annotations

import ast
import html
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterable, Iterator

import nbformat

from prenorm_course.exercises.markers import Exercise, solution_literals, solution_regions
from prenorm_lib.checks.catalogue import EXERCISES

ANSWER_TAG = "answer"  # a solution-notebook cell that shows an answer: folded in the exercise version
MIN_LINE = 12  # shorter code lines ("return x", "h = x") are too common to mean a leak
SHARED_LINES = 2  # one shared line (an upcast, a naive softmax's sum) is a resemblance; two are the code

# The library code that answers an exercise, from its record (the grader withholds the same, and more)
LIBRARY_ANSWERS: dict[str, tuple[str, ...]] = {record.id: record.answers for record in EXERCISES.values()
                                               if record.answers}


def fold(cell: nbformat.NotebookNode) -> None:
    """Hide a cell's source and outputs in JupyterLab (one click opens them)."""
    view = cell.metadata.setdefault("jupyter", {})
    view["source_hidden"] = True
    if cell.cell_type == "code":
        view["outputs_hidden"] = True


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _code_lines(lines: Iterable[str]) -> Iterator[str]:
    """The lines of code worth looking for: comments and docstring-only lines dropped, whitespace squeezed."""
    for line in lines:
        code = _squeezed(re.sub(r"\s#.*$|^\s*#.*$", "", line))
        if len(code) >= MIN_LINE and not code.startswith(('"', "'", "def", "class", "@")):
            yield code


def _library_lines(target: str) -> set[str]:
    """The code lines of a library object's bodies: no signature, no docstring, no call fragments.

    A line that only opens or continues a call (ends in "(" or ",") or is boilerplate
    (``super().__init__()``) says nothing about the answer on its own.
    """
    module, _, qualname = target.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    source = textwrap.dedent(inspect.getsource(obj))
    lines = source.split("\n")
    kept: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            body = body[1:]  # the docstring
        for statement in body:
            for code in _code_lines(lines[statement.lineno - 1:statement.end_lineno]):
                if not code.endswith(("(", ",")) and code != "super().__init__()":
                    kept.add(code)
    return kept


def _output_text(output: nbformat.NotebookNode) -> str:
    if "text" in output:
        return str(output["text"])
    data = output.get("data", {})
    parts = [str(data.get(kind, "")) for kind in ("text/plain", "text/markdown")]
    parts.append(html.unescape(re.sub(r"<[^>]+>", " ", str(data.get("text/html", "")))))
    return "\n".join(parts)


def _in_view(cell: nbformat.NotebookNode) -> Iterator[tuple[str, str]]:
    """(where, text) for the parts of a cell a reader sees: its source and outputs unless folded."""
    view = cell.metadata.get("jupyter", {})
    if not view.get("source_hidden"):
        yield "source", cell.source
    if cell.cell_type == "code" and not view.get("outputs_hidden"):
        for output in cell.get("outputs", []):
            yield "output", _output_text(output)


def _answer_words(solution_source: str) -> set[str]:
    """The words a prediction answers with: string literals of 3+ letters in its solution regions."""
    words: set[str] = set()
    regions = solution_regions(solution_source, "")
    for value in solution_literals("\n".join(line for region in regions for line in region)).values():
        values = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
        words |= {v.strip().lower() for v in values if isinstance(v, str) and len(v.strip()) >= 3}
    return words


def _section_of(cells: list, index: int) -> range:
    """The cells from ``index`` to the next level-2 heading (``## ``)."""
    end = index + 1
    while end < len(cells) and not (cells[end].cell_type == "markdown" and cells[end].source.startswith("## ")):
        end += 1
    return range(index, end)


def answers_in_view(
    exercise_nb: nbformat.NotebookNode, solution_nb: nbformat.NotebookNode, exercises: list[Exercise],
    library_answers: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """Every place in ``exercise_nb`` where an answer is in view, one message each (empty: none)."""
    library_answers = LIBRARY_ANSWERS if library_answers is None else library_answers
    solution_cells = {cell.id: cell for cell in solution_nb.cells}
    cells = exercise_nb.cells
    found: list[str] = []
    for exercise in exercises:
        source = solution_cells[exercise.cell_id].source
        solution = {line for region in solution_regions(source, exercise.label) for line in _code_lines(region)}
        library = {target: _library_lines(target) for target in library_answers.get(exercise.id, ())}
        for cell in cells:
            for where, text in _in_view(cell):
                squeezed = _squeezed(text)
                hits = sorted(line for line in solution if line in squeezed)
                if hits and len(hits) >= min(SHARED_LINES, len(solution)):
                    found.append(f"cell {cell.id} ({where}) shows {len(hits)} lines of the solution of "
                                 f"{exercise.label}: {hits[0][:60]}")
                for target, lines in library.items():
                    hits = sorted(line for line in lines if line in squeezed)
                    if len(hits) >= SHARED_LINES:
                        found.append(f"cell {cell.id} ({where}) shows {len(hits)} lines of the library's {target}, "
                                     f"the answer of {exercise.label}: {hits[0][:60]}")
        words = _answer_words(source)
        if not words:
            continue
        start = next(i for i, cell in enumerate(cells) if cell.id == exercise.cell_id)
        for i in _section_of(cells, start):
            if cells[i].id == exercise.checker_cell_id:
                continue
            for where, text in _in_view(cells[i]):
                said = set(re.findall(r"[a-z]+", text.lower()))
                if where == "output" and words <= said:
                    found.append(f"cell {cells[i].id} (output) shows the answer of {exercise.label}: "
                                 f"{', '.join(sorted(words))}")
    return found
