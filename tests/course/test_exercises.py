"""The exercise tool on a small synthetic course built in tmp_path, graded by the real checkers.

``01_mini.ipynb`` holds two exercises checked by :mod:`prenorm_lib.checks.rmsnorm` (1.1, a
kernel; 1.3, a prediction) and a few ordinary cells; ``02_other.ipynb`` one exercise of
:mod:`prenorm_lib.checks.ffn`. Build, reading files, recognising notebooks and reading
check cells run without a kernel. The round trips through real kernels (a few seconds
each) are marked slow: check and verify; one grading run over a folder of learners who
make mistakes, tamper with the check in every way we know, or hand in files that are not
notebooks; and a hostile submission that tries to write into the course and into
another learner's work, graded inside bubblewrap.
"""

from __future__ import annotations

import ast
import csv
import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import prenorm_lib
from prenorm_course.exercises import sandbox
from prenorm_course.exercises.__main__ import main
from prenorm_course.exercises.build import (
    build_all,
    exercise_notebook,
    read_notebook,
    stale_notebooks,
    write_notebook,
)
from prenorm_course.exercises.check import NotANotebook, check_path, format_report, identify, parse_learner
from prenorm_course.exercises.grade import grade_folder
from prenorm_course.exercises.kernel import Kernel
from prenorm_course.exercises.limits import LIMITS
from prenorm_course.exercises.markers import (
    USES_EXERCISES_TAG,
    NotebookError,
    check_calls,
    course_options,
    fill_scaffold,
    solution_literals,
    solution_regions,
    validate_solution,
)
from prenorm_course.exercises.paths import exercise_name, repo_root, solution_name, solution_notebooks, solution_path
from prenorm_course.exercises.sandbox import CourseFiles, Sandbox
from prenorm_course.exercises.verify import filled_in, verify

NAME, OTHER = "01_mini.ipynb", "02_other.ipynb"

EXERCISE_1 = '''\
# Exercise 1.1: rms_norm kernel
def my_rms_norm(x, weight, eps=1e-5):
    ### BEGIN SOLUTION
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    ### END SOLUTION'''
CHECK_1 = "from prenorm_lib.checks import rmsnorm as check\n\ncheck.rms_norm(my_rms_norm)"
EXERCISE_2 = '''\
# Exercise 1.3: predict fp16 overflow
### BEGIN SOLUTION
square_in_fp16 = "inf"
norm_without_upcast = "0"
### END SOLUTION'''
CHECK_2 = "check.fp16_prediction(square_in_fp16, norm_without_upcast)"
PASS_1 = ("Exercise 1.1 passed: matches RMSNorm on float32 batches, a tiny and an all-zero row, a custom eps, fp16 "
          "and bf16\n")
PASS_2 = ("Exercise 1.3 passed: fp16 300² = inf (the fp16 maximum is 65504), so RMS = inf and x / inf = 0 for every "
          "entry\n")
HEADER_1 = "# Exercise 1.1: rms_norm kernel\n"
WRONG_1 = HEADER_1 + "def my_rms_norm(x, weight, eps=1e-5):\n    return x"
RIGHT_1 = EXERCISE_1.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION", "").rstrip()
RIGHT_2 = '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = "inf"\nnorm_without_upcast = "0"'


def _stdout(text: str):
    return new_output("stream", name="stdout", text=text)


def _code(cell_id: str, source: str, count: int, outputs=(), tags=None):
    cell = new_code_cell(source, id=cell_id, execution_count=count)
    cell.outputs = list(outputs)
    if tags:
        cell.metadata["tags"] = tags
    return cell


def _notebook(cells) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    nb.nbformat_minor = 5
    return nb


def solution_notebook() -> nbformat.NotebookNode:
    """A stored, fully executed solution notebook (outputs written as a run would)."""
    return _notebook([
        new_markdown_cell("# RMSNorm, briefly — solutions", id="intro"),
        _code("setup", "import torch\n\nprint('setup ok')", 1, [_stdout("setup ok\n")]),
        _code("ex1", EXERCISE_1, 2),
        _code("check1", CHECK_1, 3, [_stdout(PASS_1)]),
        _code("ex2", EXERCISE_2, 4),
        _code("check2", CHECK_2, 5, [_stdout(PASS_2)]),
        _code("after", "print(1 + 1)", 6, [_stdout("2\n")]),
        _code("clock", "import time\n\nprint(time.time())", 7, [_stdout("1.5\n")], tags=["nbval-ignore-output"]),
        _code("address", "# NBVAL_IGNORE_OUTPUT\nprint(id(object()))", 8, [_stdout("1\n")]),
    ])


RUNS = ("from types import SimpleNamespace as Run\n\n"
        "runs = {'pre': Run(final_val_loss=2.7, diverged_at=None),\n"
        "        'post': Run(final_val_loss=3.78, diverged_at=None),\n"
        "        'none': Run(final_val_loss=float('nan'), diverged_at=3)}")
PREDICTION = ("# Exercise 5.3: predict which configuration diverges\n### BEGIN SOLUTION\n"
              "prediction = {'pre': 'trains', 'post': 'stalls', 'none': 'diverges'}\n### END SOLUTION")


def other_notebook() -> nbformat.NotebookNode:
    """Notebook 02: a function exercise, and a prediction checked against a record beside runs the notebook makes."""
    exercise = ("# Exercise 2.3: choose d_ff\ndef my_hidden_dim(d_model):\n    ### BEGIN SOLUTION\n"
                "    return max(64, round(8 * d_model / 3 / 64) * 64)\n    ### END SOLUTION")
    return _notebook([
        new_markdown_cell("# Other — solutions", id="o-title"),
        _code("o-setup", "print('other')", 1, [_stdout("other\n")]),
        _code("o-ex", exercise, 2),
        _code("o-check", "from prenorm_lib.checks import ffn as check\n\ncheck.hidden_dim(my_hidden_dim)", 3,
              [_stdout("Exercise 2.3 passed: d_ff = 8/3·d_model rounded to the nearest multiple of 64 for "
                       "d_model from 8 to 5120\n")]),
        _code("o-runs", RUNS, 4),
        _code("o-ex2", PREDICTION, 5),
        _code("o-check2", "from prenorm_lib.checks import block as check\n\n"
                          "check.divergence_prediction(prediction)", 6,
              [_stdout("Exercise 5.3 passed: you predicted all three runs "
                       "(pre trains, post stalls, none diverges)\n")]),
    ])


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A course root: two solution notebooks, their exercise versions and nbval's sanitize file."""
    root = tmp_path / "course"
    write_notebook(solution_notebook(), solution_path(root, NAME))
    write_notebook(other_notebook(), solution_path(root, OTHER))
    (root / "tests").mkdir()
    (root / "tests" / "nbval_sanitize.cfg").write_text(
        "[object addresses]\nregex: (<[\\w.]+ (?:object )?at )0x[0-9a-fA-F]+>\nreplace: \\1ADDR>\n"
    )
    build_all(root)
    return root


def learner_copy(root: Path, path: Path, edits: dict[str, str], name: str = NAME, **extra) -> Path:
    """The built exercise notebook with some cells' sources replaced, as a learner would save it."""
    nb = read_notebook(root / "notebooks" / "exercises" / name)
    for cell in nb.cells:
        if cell.id in edits:
            cell.source = edits[cell.id]
        if cell.id in extra.get("outputs", {}):
            cell.outputs = [_stdout(extra["outputs"][cell.id])]
    nb.cells += [new_code_cell(source, id=f"mine-{i}") for i, source in enumerate(extra.get("added", []))]
    write_notebook(nb, path)
    return path


def filled_in_copy(root: Path) -> nbformat.NotebookNode:
    """The exercise notebook with the solutions typed in, as a learner who got everything right."""
    return filled_in(read_notebook(root / "notebooks" / "exercises" / NAME), read_notebook(solution_path(root, NAME)))


# --- build ---------------------------------------------------------------------------------


def test_build_writes_placeholders_and_drops_unearned_outputs(course: Path):
    exercise = read_notebook(course / "notebooks" / "exercises" / NAME)
    solution = read_notebook(solution_path(course, NAME))
    assert [c.id for c in exercise.cells] == [c.id for c in solution.cells]
    by_id = {c.id: c for c in exercise.cells}
    assert by_id["ex1"].source == (
        "# Exercise 1.1: rms_norm kernel\ndef my_rms_norm(x, weight, eps=1e-5):\n"
        '    # YOUR CODE HERE\n    raise NotImplementedError("Exercise 1.1: rms_norm kernel")'
    )
    assert by_id["ex2"].source == (  # a top-level region: running the unfilled cell raises nothing
        "# Exercise 1.3: predict fp16 overflow\n# YOUR CODE HERE\nsquare_in_fp16 = ...\nnorm_without_upcast = ..."
    )
    solution_by_id = {c.id: c for c in solution.cells}
    for cell_id in ("ex1", "ex2"):  # a stub prints nothing
        assert by_id[cell_id].outputs == []
    # under each check: what an unfilled Run All prints there, never a "passed" line
    assert [o.text for o in by_id["check1"].outputs] == [
        "Exercise 1.1 is not done yet — fill in `my_rms_norm` above\n"]
    assert [o.text for o in by_id["check2"].outputs] == [
        "Exercise 1.3 is not done yet — replace each `...` in the exercise cell above with your answer\n"]
    for cell_id in ("ex1", "check1", "ex2", "check2"):  # counts as in a top-to-bottom run
        assert by_id[cell_id].execution_count == solution_by_id[cell_id].execution_count
    assert by_id["after"].outputs == solution.cells[6].outputs  # the course's own outputs stay
    assert by_id["address"].source == "print(id(object()))"  # nbval comments become tags
    assert by_id["address"].metadata["tags"] == ["nbval-ignore-output"]
    text = (course / "notebooks" / "exercises" / NAME).read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in text and "rsqrt" not in text and "passed" not in text
    assert text.endswith("}\n") and text.startswith('{\n "cells": [\n  {\n')


def test_build_is_idempotent_and_detects_stale(course: Path):
    target = course / "notebooks" / "exercises" / NAME
    first = target.read_bytes()
    build_all(course)
    assert target.read_bytes() == first
    assert stale_notebooks(course) == []
    assert main(["--root", str(course), "build", "--check"]) == 0

    target.write_bytes(first.replace(b"rms_norm kernel", b"rms_norm kernal"))
    assert stale_notebooks(course) == [f"notebooks/exercises/{NAME} is stale (differs from a fresh build)"]
    assert main(["--root", str(course), "build", "--check"]) == 1
    target.unlink()
    assert "is missing" in stale_notebooks(course)[0]


def test_build_does_not_overwrite_filled_in_work(course: Path):
    target = course / "notebooks" / "exercises" / NAME
    learner_copy(course, target, {"ex2": RIGHT_2})
    with pytest.raises(NotebookError, match="has filled-in exercises"):
        build_all(course)
    assert RIGHT_2 in [c.source for c in read_notebook(target).cells]
    assert main(["--root", str(course), "build", "--force"]) == 0
    assert RIGHT_2 not in [c.source for c in read_notebook(target).cells]


@pytest.mark.parametrize(
    ("cell_id", "source", "message"),
    [
        ("setup", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "marker outside an exercise cell"),
        ("ex1", "# Exercise 1.1: t\n### BEGIN SOLUTION\nx = 1", "never closed"),
        ("ex1", "# Exercise 1.1: t\nx = 1\n### END SOLUTION", "without a ### BEGIN SOLUTION"),
        ("ex1", "# Exercise 1.1: t\n### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
        ("ex1", "# Exercise 1.1: t\nmy_rms_norm = 1", "has no ### BEGIN SOLUTION region"),
        ("ex2", "# Exercise 1.1: again\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "duplicate exercise id 1.1"),
        ("check1", "print('Exercise 1.1 passed: fine')", "must call exactly one checker"),
        ("check1", "from prenorm_lib.checks import rmsnorm as check\nif True:\n    check.rms_norm(my_rms_norm)",
         "must call exactly one checker"),
        ("check1", "from prenorm_lib.checks import rmsnorm as check\ncheck.rms_norm(some_other_name)",
         "passes nothing the exercise cell defines"),
        ("check1", "from prenorm_lib.checks import rmsnorm as check\ncheck.rms_norm(my_rms_norm, 3)",
         "argument 2 of the checker call is not a name the exercise cell defines"),
    ],
)
def test_build_rejects_bad_markers_and_check_cells(course: Path, cell_id: str, source: str, message: str):
    path = solution_path(course, NAME)
    nb = read_notebook(path)
    next(c for c in nb.cells if c.id == cell_id).source = source
    write_notebook(nb, path)
    with pytest.raises(NotebookError, match=re.escape(message)):
        build_all(course, force=True)
    assert main(["--root", str(course), "build", "--force"]) == 2


def test_exercise_without_checker_cell_is_an_error(course: Path):
    path = solution_path(course, NAME)
    nb = read_notebook(path)
    nb.cells = [c for c in nb.cells if c.cell_type == "markdown" or c.id in ("setup", "ex1", "check1", "ex2")]
    write_notebook(nb, path)
    with pytest.raises(NotebookError, match=r"Exercise 1\.3 is not followed by a checker"):
        build_all(course)


def test_fill_scaffold_restores_both_kinds_of_placeholder(course: Path):
    solution = read_notebook(solution_path(course, NAME))
    scaffold = read_notebook(course / "notebooks" / "exercises" / NAME)
    filled = {c.id: c.source for c in filled_in(scaffold, solution).cells}
    assert filled["ex1"] == RIGHT_1
    assert filled["ex2"] == RIGHT_2
    with pytest.raises(NotebookError, match=r"1 solution regions but 0 placeholders"):
        fill_scaffold("x = 1", solution_regions(EXERCISE_1, "t"), "1.1")


def test_check_cells_are_read_as_calls():
    calls = check_calls(solution_notebook(), validate_solution(solution_notebook(), NAME), NAME)
    assert calls["1.1"].module == "prenorm_lib.checks.rmsnorm" and calls["1.1"].function == "rms_norm"
    assert calls["1.1"].args == ("my_rms_norm",)
    assert calls["1.1"].kernel_source.strip() == "from prenorm_lib.checks import rmsnorm as check"
    assert calls["1.3"].args == ("square_in_fp16", "norm_without_upcast") and calls["1.3"].kernel_source == ""
    assert solution_literals(EXERCISE_2) == {"square_in_fp16": "inf", "norm_without_upcast": "0"}


def test_every_course_check_cell_is_gradable():
    """Each real check cell names a decorated checker, and the exercise version shows it not done."""
    root = repo_root()
    seen, declared = [], []
    for path in solution_notebooks(root):
        nb = read_notebook(path)
        exercises = validate_solution(nb, path.name)
        declared += [exercise.id for exercise in exercises]
        for exercise_id, call in check_calls(nb, exercises, path.name).items():
            module = __import__(call.module, fromlist=[call.function])
            checker = getattr(module, call.function)
            assert checker.exercise_id == exercise_id and callable(checker.core)
            seen.append(exercise_id)
        built, _ = exercise_notebook(nb, path.name)
        for exercise in exercises:
            built_cells = {c.id: c for c in built.cells}
            [line] = [output.text for output in built_cells[exercise.checker_cell_id].outputs]
            assert line.startswith(f"Exercise {exercise.id} is not done yet — ") and "passed" not in line
            assert "raise NotImplementedError" in built_cells[exercise.cell_id].source or \
                " = ..." in built_cells[exercise.cell_id].source
        assert not any("NBVAL_" in c.source for c in built.cells)
    assert sorted(seen) == sorted(declared) and len(set(seen)) == len(seen) >= 25


# --- reading learner files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{}", "nbformat None; only version 4 notebooks can be checked"),
        (b'{"nbformat": 4, "nbformat_minor": 5, "cells": "x"}', '"cells" is a str, not a list of cells'),
        (b'{"nbformat": 4, "cells": [', "invalid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "the file is not text (UTF-8)"),
        (b"[1, 2]", "the file holds a JSON list, not a notebook object"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = 1"}]}', "cell 0 has no id"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "id": "a", "source": 7}]}', "cell 0 has no text source"),
        (b'{"nbformat": 4, "cells": [17]}', "cell 0 is not a code, markdown or raw cell"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON"),
    ],
)
def test_a_file_that_is_not_a_notebook_says_why(data: bytes, why: str):
    with pytest.raises(NotANotebook, match=r"^not a notebook: ") as info:
        parse_learner(data)
    assert why in str(info.value)


def test_check_on_a_broken_file_prints_one_clear_line(course: Path, tmp_path: Path, capsys):
    path = tmp_path / "01_mini.ipynb"
    path.write_text('{"nbformat": 4, "cells": "x"}')
    assert main(["--root", str(course), "check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == 'error: not a notebook: "cells" is a str, not a list of cells\n'
    assert "Traceback" not in captured.out + captured.err


def test_check_cli_rejects_a_foreign_notebook(course: Path, tmp_path: Path, capsys):
    write_notebook(_notebook([new_code_cell("x = 1", id="elsewhere")]), tmp_path / "notes.ipynb")
    assert main(["--root", str(course), "check", str(tmp_path / "notes.ipynb")]) == 2
    assert "cannot tell which course notebook this is" in capsys.readouterr().err


def test_a_notebook_is_recognised_by_its_content(course: Path, tmp_path: Path):
    other = learner_copy(course, tmp_path / NAME, {}, name=OTHER)  # notebook 02, saved as 01's file name
    path, note = identify(parse_learner(other.read_bytes()), NAME, course)
    assert exercise_name(path) == OTHER and path.name == solution_name(OTHER)
    assert note == f"recognised by its cells as the course notebook {OTHER}, although the file is called {NAME}"
    fresh = _notebook([new_code_cell("# Exercise 1.1: rms_norm kernel\ndef my_rms_norm(x, w, eps): pass", id="n")])
    assert exercise_name(identify(fresh, "mine.ipynb", course)[0]) == NAME  # new ids, but the exercise header


def test_course_options_come_from_tags_and_course_comments():
    assert course_options(new_code_cell("# NBVAL_SKIP\nx", metadata={"tags": ["raises-exception"]})) == {
        "nbval-skip", "raises-exception"}
    assert course_options(new_code_cell("x  # NBVAL_SKIP")) == set()  # nbval ignores inline markers too


# --- check, verify and grade with real kernels --------------------------------------------


@pytest.mark.slow
def test_check_reports_hint_not_done_and_changed_cells(course: Path, tmp_path: Path):
    learner = learner_copy(
        course, tmp_path / "learner" / NAME,
        {"ex1": WRONG_1,
         "check1": "# NBVAL_SKIP\npass",  # editing a check cell does not skip it
         "after": "# NBVAL_SKIP\n# NBVAL_IGNORE_OUTPUT\nprint(1 + 2)"},  # nor do a learner's own markers
        outputs={"check1": PASS_1, "check2": PASS_2},  # stored outputs are never read
        added=["scratch = 1"],
    )
    nb = read_notebook(learner)
    for cell in nb.cells:
        if cell.id in ("after", "check1"):
            cell.metadata["tags"] = ["nbval-skip", "nbval-ignore-output", "raises-exception"]  # ignored as well
    write_notebook(nb, learner)
    result = check_path(learner, course, timeout=60)
    statuses = {s.exercise.id: (s.status, s.detail) for s in result.exercises}
    # the checker draws the width per check (never the notebook's 8)
    assert statuses["1.1"][0] == "hint" and re.search(r"on a \(2, 3, \d+\) float32 batch", statuses["1.1"][1])
    assert statuses["1.3"] == ("not done", "not done yet")
    assert not result.passed
    assert result.other_cells == ["cell `# NBVAL_SKIP`: its output changed — you edited this cell"]
    report = format_report(result)
    assert "Exercise 1.1 (rms_norm kernel): hint — " in report
    assert "Exercise 1.3 (predict fp16 overflow): not done yet" in report
    assert "you edited the check cell after Exercise 1.1" in report
    assert "you added 1 code cell(s) (`scratch = 1`)" in report
    assert "Traceback" not in report
    assert report.endswith("0 of 2 exercises passed; the check fails.")


@pytest.mark.slow
def test_verify_unfilled_runs_to_the_end_and_filled_passes(course: Path):
    lines: list[str] = []
    assert verify(course, timeout=60, emit=lines.append), lines
    assert lines[0].startswith("learner code runs bubblewrap: no network")
    assert lines[1].startswith(f"ok    {NAME}: unfilled runs to the end (2 exercises not done), filled-in passes")
    assert lines[2].startswith(f"ok    {OTHER}: unfilled runs to the end (2 exercises not done), filled-in passes")
    assert lines[-1] == "2 passed, 0 failed"


def test_verify_fails_on_a_check_that_does_not_check(course: Path):
    path = solution_path(course, NAME)
    nb = read_notebook(path)
    next(c for c in nb.cells if c.id == "check1").source = "print('Exercise 1.1 passed: fine')"
    write_notebook(nb, path)
    lines: list[str] = []
    assert not verify(course, timeout=60, emit=lines.append)
    assert "must call exactly one checker" in lines[0] and lines[-1] == "0 passed, 1 failed"


def test_verify_reports_stale_notebook_without_running_it(course: Path):
    (course / "notebooks" / "exercises" / NAME).unlink()
    solution_path(course, OTHER).unlink()
    (course / "notebooks" / "exercises" / OTHER).unlink()
    lines: list[str] = []
    assert not verify(course, emit=lines.append)
    build = "python -m prenorm_course.exercises build"
    assert lines == [f"FAIL  notebooks/exercises/{NAME} is missing — run `{build}`", "0 passed, 1 failed"]


# Each learner below hands in a wrong 1.1 and tries to make it pass anyway (or makes another
# typical mistake); the comment says how. None of it may read "pass".
TAMPERING = {
    "checker_replaced": HEADER_1 + "import prenorm_lib.checks.rmsnorm as m\n"
    "m.rms_norm = lambda fn: print('" + PASS_1.strip() + "')\n"
    "def my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "core_replaced": HEADER_1 + "import prenorm_lib.checks.core as c\n"
    "c.expect_close = c.expect = lambda *a, **k: None\n"
    "c.Hint = type('Hint', (Exception,), {})\ndef my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "custom_exc": HEADER_1 + "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: print('"
    + PASS_1.strip() + "'))\ndef my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "input_transformer": HEADER_1 + "get_ipython().input_transformers_post.append(\n"
    "    lambda lines: [l.replace('check.rms_norm(my_rms_norm)', 'print(1)').replace('serve(', 'print(')"
    " for l in lines])\ndef my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "comparisons_patched": HEADER_1 + "import torch\nfor name in ('allclose', 'equal', 'isclose'):\n"
    "    setattr(torch, name, lambda *a, **k: True)\ntorch.Tensor.__eq__ = lambda *a: True\n"
    "def my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "agent_forged": HEADER_1 + "import json\nimport prenorm_lib.checks.agent as agent\n"
    "from IPython.display import display\n"
    "def forged(text):\n    nonce = json.loads(text)['nonce']\n"
    "    display({agent.REPLY_MIME: json.dumps({'nonce': nonce, 'value': 1.0})}, raw=True)\n"
    "agent.serve = forged\ndef my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "replies_spammed": HEADER_1 + "import json\nfrom IPython.display import display\n"
    "def spam(*args):\n    for nonce in range(20):\n"
    "        display({'text/x-prenorm-reply': json.dumps({'nonce': str(nonce), 'value': 1.0})}, raw=True)\n"
    "get_ipython().events.register('pre_run_cell', spam)\n"
    "def my_rms_norm(x, weight, eps=1e-5):\n    return x",
    "liar_tensor": HEADER_1 + "import torch\nclass Liar(torch.Tensor):\n"
    "    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
    "        if func.__name__ in ('allclose', 'equal', '__eq__', 'isclose'):\n            return True\n"
    "        return super().__torch_function__(func, types, args, kwargs or {})\n"
    "def my_rms_norm(x, weight, eps=1e-5):\n    return x.as_subclass(Liar)",
}
MISTAKES = {
    "in_place": HEADER_1 + "def my_rms_norm(x, weight, eps=1e-5):\n    x32 = x.to(torch.float32)\n"
    "    x32 /= torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)\n    return (x32 * weight.float()).to(x.dtype)",
    "library_handed_back": HEADER_1 + "from prenorm_lib import functional\nmy_rms_norm = functional.rms_norm",
    "misnamed": HEADER_1 + "def rms_norm(x, weight, eps=1e-5):\n    return x",
    "no_keepdim": HEADER_1 + "def my_rms_norm(x, weight, eps=1e-5):\n    x32 = x.float()\n"
    "    return (x32 / torch.sqrt(x32.pow(2).mean(-1) + eps) * weight.float()).to(x.dtype)",
    "stops_kernel": HEADER_1 + "import os\ndef my_rms_norm(x, weight, eps=1e-5):\n    os._exit(0)",
    "endless_loop": HEADER_1 + "def my_rms_norm(x, weight, eps=1e-5):\n    while True:\n        pass",
}


@pytest.mark.slow
def test_grade_a_folder_of_mistakes_tampering_and_broken_files(course: Path, tmp_path: Path):
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    write_notebook(filled_in_copy(course), folder / "alice.ipynb")  # renamed: recognised by its cells
    warns = RIGHT_1.replace("    x32 = x.float()", "    import warnings\n    warnings.warn('deprecated', UserWarning)\n"
                                                  "    x32 = x.float()")
    learner_copy(course, folder / "carol" / NAME, {
        "ex1": warns,
        "ex2": '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = float("inf")\nnorm_without_upcast = 0',
        "after": "print(1 + 1)\nbig = bytearray(8 * 2**30)"})  # past the kernel's memory limit
    for learner, source in {**TAMPERING, **MISTAKES}.items():
        learner_copy(course, folder / learner / NAME, {"ex1": source, "ex2": RIGHT_2})
    learner_copy(course, folder / "setup_cell" / NAME, {  # tampering from an ordinary cell, the import cell
        "setup": "import torch\nfrom prenorm_lib.checks import rmsnorm as check\n"
                 "check.rms_norm = check.fp16_prediction = lambda *a: print('passed')\nprint('setup ok')",
        "ex1": WRONG_1})
    learner_copy(course, folder / "dave" / NAME, {}, name=OTHER)  # notebook 02 saved under 01's name
    learner_copy(course, folder / "eve" / OTHER, {  # a wrong prediction, and runs made to agree with it
        "o-runs": RUNS.replace("final_val_loss=3.78", "final_val_loss=2.5"),
        "o-ex2": "# Exercise 5.3: predict which configuration diverges\n"
                 "prediction = {'pre': 'trains', 'post': 'trains', 'none': 'diverges'}"}, name=OTHER)
    broken = {"empty": b"{}", "cells_x": b'{"nbformat": 4, "nbformat_minor": 5, "cells": "x"}',
              "truncated": b'{"nbformat": 4, "cells": [', "picture": b"\x89PNG\r\n\x1a\n"}
    for learner, data in broken.items():
        (folder / learner).mkdir()
        (folder / learner / NAME).write_bytes(data)

    table = grade_folder(folder, out, root=course, timeout=30, jobs=2, progress=lambda _: None)

    assert table["alice"] == {"1.1": "pass", "1.3": "pass"}
    assert table["carol"] == {"1.1": "pass", "1.3": "pass"}  # a warning is not a print; inf for "inf" counts
    for learner in [*TAMPERING, *MISTAKES, "setup_cell"]:
        assert table[learner]["1.1"] != "pass", learner
    assert table["setup_cell"]["1.3"] == "not done"
    assert table["stops_kernel"] == {"1.1": "error", "1.3": "not run"}
    assert table["endless_loop"]["1.1"] == "timeout" and table["endless_loop"]["1.3"] == "pass"
    assert table["dave"] == {"2.3": "not done", "5.3": "not done"}  # recognised as notebook 02 by its cells
    assert table["eve"]["5.3"] == "hint"  # the runs are the notebook's data: faking them proves nothing
    for learner in broken:
        assert table[learner] == {"1.1": "not a notebook", "1.3": "not a notebook"}

    markdown = re.sub(r"\\(.)", r"\1", (out / "grades.md").read_text())  # learner text in it is escaped
    details = dict(re.findall(r"^- \*\*(\w+)\*\* — (.*)$", markdown, flags=re.MULTILINE))
    assert "changed its input x in place" in details["in_place"]
    assert "that is the library's own `prenorm_lib.functional.rms_norm`" in details["library_handed_back"]
    assert "the check uses `my_rms_norm`, but your exercise cell does not define it (it defines `rms_norm`)" in (
        details["misnamed"])
    assert "keepdim=True" in details["no_keepdim"]
    assert "your code stopped the kernel" in details["stops_kernel"]
    assert "not a notebook: nbformat None" in details["empty"]
    assert 'not a notebook: "cells" is a str' in details["cells_x"]
    assert "not a notebook: invalid JSON" in details["truncated"]
    assert "not a notebook: the file is not text" in details["picture"]
    assert f"recognised by its cells as the course notebook {OTHER}, although the file is called {NAME}" in (
        details["dave"])
    assert "values differ from RMSNorm" in details["liar_tensor"]  # a tensor subclass is judged by its data
    with open(out / "grades.csv", newline="") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    assert (rows["alice"]["points"], rows["alice"]["max"]) == ("2", "4")
    assert rows["cells_x"]["notes"].startswith(f"cells_x/{NAME}: not a notebook")
    assert rows["dave"]["2.3"] == "not done" and rows["dave"]["1.1"] == "missing"


# --- isolation: a hostile submission changes nothing outside its kernel --------------------

HOSTILE = '''\
import glob, os, sys
from pathlib import Path
import prenorm_lib
targets = [Path(prenorm_lib.__file__).parent / "course" / "checks" / "ffn.py", Path("../notebooks") / "evil.txt",
           Path("evil.txt").resolve().parent.parent / "notebooks" / "evil.txt"]
for finder in sys.meta_path:  # the editable install knows where the real library is
    for path in getattr(finder, "MAPPING", {}).values() if isinstance(getattr(finder, "MAPPING", None), dict) else []:
        targets.append(Path(path) / "checks" / "ffn.py")
targets += [Path(p) for p in os.environ.get("PRENORM_TEST_TARGETS", "").split(os.pathsep) if p]
targets += [Path(p) for p in glob.glob("{course}/**/*.ipynb", recursive=True)]
targets += [Path(p) for p in glob.glob("{folder}/**/*.ipynb", recursive=True)]
targets += [Path("{course}/notebooks/new.txt"), Path("{folder}/bob/new.txt")]
done = []
for target in targets:
    try:
        with open(target, "a") as f:
            f.write("# hostile\\n")
        done.append(str(target))
    except OSError:
        pass
print(len(done))
def my_rms_norm(x, weight, eps=1e-5):
    return x
'''


def _snapshot(*tops: Path) -> dict[str, bytes]:
    files = {}
    for top in tops:
        for path in top.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                files[str(path)] = path.read_bytes()
    return files


@pytest.mark.slow
def test_a_hostile_submission_changes_nothing_outside_its_kernel(course: Path, tmp_path: Path):
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    hostile = HOSTILE.replace("{course}", str(course)).replace("{folder}", str(folder))
    learner_copy(course, folder / "mallory" / NAME, {"ex1": HEADER_1 + hostile, "ex2": RIGHT_2})
    write_notebook(filled_in_copy(course), folder / "bob" / NAME)
    package = Path(prenorm_lib.__file__).resolve().parent
    before = _snapshot(course, folder, package)

    table = grade_folder(folder, out, root=course, timeout=60, jobs=2, progress=lambda _: None)

    assert _snapshot(course, folder, package) == before  # byte for byte, nothing added
    assert table["bob"] == {"1.1": "pass", "1.3": "pass"}
    assert table["mallory"]["1.1"] == "hint"
    assert (out / "grades.md").read_text().startswith("Learner code ran bubblewrap: no network")


def test_a_sandbox_command_runs_as_its_own_user_in_its_own_folder_with_limits(course: Path):
    target = solution_path(course, NAME)
    script = f"id -u; touch own.txt && echo own; (echo x >> {target}) 2>/dev/null && echo wrote || echo refused;" \
             " ulimit -v"
    box = Sandbox.create(sandbox.CONFINED, CourseFiles({}))
    try:
        proc = subprocess.run(box.command(["/bin/sh", "-c", script]), capture_output=True, text=True,
                              env=sandbox.kernel_env(box.workdir), timeout=60)
    finally:
        box.remove()
    uid, own, course_file, memory = proc.stdout.split()
    assert (own, course_file, memory) == ("own", "refused", str(LIMITS.memory_bytes // 1024))
    if os.geteuid() == 0:
        assert int(uid) == box.uid and box.uid >= sandbox.KERNEL_UID_BASE
    else:
        assert int(uid) == os.getuid()


@pytest.mark.slow
def test_kernels_run_with_limits_and_as_their_own_user(course: Path):
    target = solution_path(course, NAME)
    probe = (
        "import os, resource\n"
        "def writable(path):\n"
        "    try:\n        open(path, 'a').close()\n        return True\n"
        "    except OSError:\n        return False\n"
        "try:\n    big = bytearray(8 * 2**30)\n    memory = 'no limit'\nexcept MemoryError:\n    memory = 'limited'\n"
        f"print(memory, resource.getrlimit(resource.RLIMIT_CPU)[0] == {LIMITS.cpu_seconds},\n"
        f"      os.getuid() >= {sandbox.KERNEL_UID_BASE}, writable({str(target)!r}), writable('own.txt'))"
    )
    with Kernel(Sandbox.create(sandbox.CONFINED, CourseFiles({}))) as kernel:
        run = kernel.run_cell(probe, 60)
    assert run.status == "ok", run
    expected = f"limited True {os.geteuid() == 0} False True\n"
    assert run.outputs == [{"output_type": "stream", "name": "stdout", "text": expected}]


@pytest.mark.slow
def test_in_a_live_kernel_a_hint_is_one_line_and_not_done_does_not_stop_run_all():
    with Kernel(Sandbox.create(sandbox.CONFINED, CourseFiles.take(repo_root()))) as kernel:
        kernel.run_cell("from prenorm_lib.checks import rmsnorm as check", 120)
        wrong = kernel.run_cell("check.rms_norm(lambda x, weight, eps: x)", 60)
        unfinished = kernel.run_cell(
            'def my_rms_norm(x, weight, eps=1e-5):\n    raise NotImplementedError("Exercise 1.1: rms_norm kernel")\n'
            "check.rms_norm(my_rms_norm)", 60)
        dead = kernel.run_cell("import os\nos._exit(0)", 60)
        after = kernel.run_cell("print(1)", 60)
    (error,) = wrong.outputs
    assert wrong.status == "error" and error["ename"] == "Hint"
    assert len(error["traceback"]) == 1 and "Exercise 1.1" in error["traceback"][0]
    assert re.search(r"on a \(2, 3, \d+\) float32 batch", error["traceback"][0])
    assert unfinished.status == "ok"
    assert unfinished.outputs == [{"output_type": "stream", "name": "stdout",
                                   "text": "Exercise 1.1 is not done yet — fill in `my_rms_norm` above\n"}]
    assert dead.status == "died" and after.status == "died"
    assert kernel.death.startswith("your code stopped the kernel")


def code_names(source: str) -> set[str]:
    """The names a cell's code uses: Python's tokens, so words in comments and strings do not count."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
    tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    return {token.string for token in tokens if token.type == tokenize.NAME}


def test_code_names_skip_comments_and_strings():
    source = '# uses attention\nx = "attention"  # attention\ny = attention(q)'
    assert code_names(source) == {"x", "y", "attention", "q"}
    assert "attention" not in code_names('# Exercise 4.4: self-attention\nprint("an attention map")')


def _run_when_defined(source: str) -> set[str]:
    """The names a cell uses when it runs, not those inside the functions and classes it only defines."""
    return {node.id for statement in ast.parse(source).body
            if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for node in ast.walk(statement) if isinstance(node, ast.Name)}


def test_no_cell_after_a_check_needs_the_learners_object():
    """If a later cell used `my_rms_norm`, an unfinished exercise would stop Run All there: use the library's.

    Two kinds of cell may build on an earlier exercise: a later exercise cell inside what it
    defines (06's SwiGLU is made of the learner's Linear; only its check runs it, and reports
    "not done"), and a cell tagged uses-exercises, which says so itself when they are not done.
    """
    for path in solution_notebooks(repo_root()):
        nb = read_notebook(path)
        exercises = validate_solution(nb, path.name)
        calls = check_calls(nb, exercises, path.name)
        checkers = {e.checker_cell_id for e in exercises}
        exercise_cells = {e.cell_id for e in exercises}
        for exercise in exercises:
            names = set(calls[exercise.id].learner_names)
            later = [c for c in nb.cells[[c.id for c in nb.cells].index(exercise.checker_cell_id) + 1:]
                     if c.cell_type == "code" and c.id not in checkers
                     and USES_EXERCISES_TAG not in c.metadata.get("tags", [])]
            for cell in later:
                found = _run_when_defined(cell.source) if cell.id in exercise_cells else code_names(cell.source)
                used = found & names
                assert not used, f"{path.name}: cell `{cell.source[:40]}` uses {used} from Exercise {exercise.id}"
