"""The shared checker helpers: every wrong answer becomes a specific Hint, right answers pass."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

import prenorm_lib.checks as checks
from prenorm_lib.checks.core import (
    Hint,
    NotDone,
    call_learner,
    code_only,
    exercise,
    expect,
    expect_choice,
    expect_close,
    passed,
)
from prenorm_lib.checks.probes import error_facts, learner_source, library_origin


def test_package_exports_hint_and_passed_only():
    assert checks.Hint is Hint and checks.passed is passed
    assert checks.__all__ == ["Hint", "passed"]


def test_hint_message_and_fields():
    hint = Hint("1.2", "did you divide by the RMS?")
    assert isinstance(hint, AssertionError)
    assert str(hint) == "Exercise 1.2: did you divide by the RMS?"
    assert (hint.exercise_id, hint.hint) == ("1.2", "did you divide by the RMS?")


def test_passed_prints_one_stable_line(capsys):
    assert passed("1.1", "matches rms_norm on 4 cases") is None
    assert capsys.readouterr().out == "Exercise 1.1 passed: matches rms_norm on 4 cases\n"


def test_call_learner_returns_result_and_turns_the_placeholder_into_not_done():
    assert call_learner("1.1", lambda x, k=1: x * k, 3, k=2) == 6

    def unfilled(x):
        raise NotImplementedError("Exercise 1.1: implement rms_norm")

    with pytest.raises(NotDone, match=r"^Exercise 1\.1 is not done yet"):
        call_learner("1.1", unfilled, 1)


def test_a_learners_own_not_implemented_error_is_a_hint_not_not_done():
    def on_meta(x):
        raise NotImplementedError("Could not run 'aten::foo' with arguments from the 'Meta' backend")

    with pytest.raises(Hint, match="your code raised NotImplementedError: Could not run"):
        call_learner("1.2", on_meta, 1)


def test_hint_renders_as_one_line_in_ipython():
    (line,) = Hint("2.2", "swap w1 and w3")._render_traceback_()
    assert line.endswith("Exercise 2.2\x1b[0m: swap w1 and w3")


def test_error_facts_name_the_learners_line_and_a_did_you_mean():
    def kernel(x, weight):
        return x * weigth  # noqa: F821

    try:
        kernel(1, 2)
    except NameError as exc:
        facts = error_facts(exc)
    assert facts["type"] == "NameError" and facts["message"] == "name 'weigth' is not defined"
    assert facts["frame"].startswith(" (in kernel, line ") and facts["suggestion"] == " — did you mean `weight`?"

    class Norm:
        weight = 1

    try:
        Norm().wieght  # noqa: B018
    except AttributeError as exc:
        assert error_facts(exc)["suggestion"] == " — did you mean `weight`?"


def test_exercise_decorator_prints_not_done_inline_and_raises_in_core(capsys):
    @exercise("7.1")
    def check_it(fn):
        call_learner("7.1", fn, 1)
        passed("7.1", "fine")

    def my_fn(x):
        raise NotImplementedError("Exercise 7.1: a function")

    assert check_it(my_fn) is None
    assert capsys.readouterr().out == "Exercise 7.1 is not done yet — fill in `my_fn` above\n"
    with pytest.raises(NotDone, match="fill in `my_fn` above"):
        check_it.core(my_fn)
    check_it(lambda x: x)
    assert capsys.readouterr().out == "Exercise 7.1 passed: fine\n"
    assert check_it.exercise_id == "7.1"


def test_library_origin_sees_through_methods_partials_and_instances():
    import functools

    import torch.nn.functional as F

    from prenorm_lib import RMSNorm, TransformerBlock, functional

    assert library_origin(functional.rms_norm) == ["prenorm_lib.functional.rms_norm"]
    assert library_origin(functools.partial(F.silu, inplace=False)) == ["torch.nn.functional.silu"]
    assert library_origin(TransformerBlock(16, 4, 48, 16).pre_norm_forward) == [
        "prenorm_lib.block.TransformerBlock.pre_norm_forward"]
    assert library_origin(torch.rms_norm) == ["torch.rms_norm"]
    assert "prenorm_lib.norm.RMSNorm" in library_origin(type("Mine", (RMSNorm,), {}))
    assert library_origin(torch.nn.SiLU())[0] == "torch.nn.modules.activation.SiLU"


def test_code_only_drops_comments_and_strings():
    source = 'def f(x):\n    """Not F.silu."""\n    return x  # nor F.silu\n'
    assert "silu" not in code_only(source)
    assert "silu" in code_only("lambda x: F.silu(x")  # an unfinished line still reads


def test_call_learner_wraps_crashes_in_a_hint_without_chaining():
    def broken(x):
        return x.nonexistent

    with pytest.raises(Hint) as info:
        call_learner("1.3", broken, torch.ones(2))
    message = str(info.value)
    assert message.startswith("Exercise 1.3: your code raised AttributeError: ")
    assert "nonexistent" in message and "(in broken, line" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_call_learner_rejects_non_callables():
    with pytest.raises(Hint, match="expected a function, got Tensor"):
        call_learner("1.1", torch.ones(2))


def test_expect():
    expect("2.1", True, "never shown")
    with pytest.raises(Hint, match=r"^Exercise 2\.1: scale matters$"):
        expect("2.1", False, "scale matters")


def test_expect_close_accepts_close_values():
    want = torch.tensor([[1.0, 2.0], [3.0, float("inf")]])
    expect_close("1.1", want + 1e-7, want, "unused")
    expect_close("1.1", want.half(), want.half(), "unused")


@pytest.mark.parametrize(
    ("got", "message"),
    [
        (None, "returned None — did you forget to `return` the result?"),
        ([1.0, 2.0], "returned a list but expected a torch.Tensor"),
        (torch.zeros(2, 3), "returned shape (2, 3) but expected (2, 4) — did you reduce over the wrong dimension?"),
    ],
)
def test_expect_close_type_and_shape_hints(got, message):
    with pytest.raises(Hint) as info:
        expect_close("1.1", got, torch.zeros(2, 4), "values differ")
    assert str(info.value) == f"Exercise 1.1: {message}"


def test_expect_close_dtype_hint():
    with pytest.raises(Hint) as info:
        expect_close("1.4", torch.zeros(3), torch.zeros(3, dtype=torch.float16), "values differ")
    assert str(info.value) == (
        "Exercise 1.4: returned float32 for a float16 input — cast the result back to the input dtype"
    )


def test_expect_close_values_hint_names_worst_index():
    want = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    got = want.clone()
    got[1, 0] = 3.5
    got[0, 1] = 2.1
    with pytest.raises(Hint) as info:
        expect_close("1.2", got, want, "did you divide by the RMS?")
    assert str(info.value) == (
        "Exercise 1.2: did you divide by the RMS? (largest difference at index (1, 0): got 3.5, expected 3)"
    )


def test_expect_close_non_finite_values():
    with pytest.raises(Hint, match=r"returned nan at index \(1,\) where 2 was expected — add eps"):
        expect_close("1.3", torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), "add eps")
    with pytest.raises(Hint, match="largest difference at index"):
        expect_close("1.3", torch.tensor([float("-inf")]), torch.tensor([float("inf")]), "sign")


def test_expect_close_rejects_a_non_tensor_reference():
    with pytest.raises(TypeError, match=r"want must be a torch\.Tensor"):
        expect_close("1.1", torch.zeros(1), [0.0], "x")


@pytest.mark.parametrize("answer", [float("inf"), math.inf, torch.tensor(float("inf")), np.float32("inf")])
def test_expect_choice_takes_a_number_for_its_choice(answer):
    expect_choice("1.5", answer, ["inf", "nan", "0"], "inf", "why")
    expect_choice("1.5", 0, ["inf", "nan", "0"], "0", "why")
    expect_choice("1.5", float("nan"), ["inf", "nan", "0"], "nan", "why")
    with pytest.raises(Hint, match="not quite"):
        expect_choice("1.5", 0.0, ["inf", "nan", "0"], "inf", "why")
    with pytest.raises(Hint, match="give the choice as one of these strings"):
        expect_choice("1.5", 7, ["inf", "nan", "0"], "inf", "why")


def test_expect_choice():
    expect_choice("1.5", "  INF ", ["inf", "nan", "finite"], "inf", "fp16 overflows at 65504")
    with pytest.raises(Hint, match=r"^Exercise 1\.5: not quite — fp16 overflows at 65504$"):
        expect_choice("1.5", "nan", ["inf", "nan", "finite"], "inf", "fp16 overflows at 65504")
    with pytest.raises(Hint, match="answer 'big' is not one of the choices: 'inf', 'nan'"):
        expect_choice("1.5", "big", ["inf", "nan"], "inf", "why")
    with pytest.raises(ValueError, match="correct='zero' must be one of"):
        expect_choice("1.5", "inf", ["inf", "nan"], "zero", "why")


def test_learner_source_reads_a_class_from_a_notebook_cell_through_its_methods():
    """Python 3.11 finds no source for a class whose module has no file (a notebook's ``__main__``)."""
    import linecache
    import types

    cell = "class Mine:\n    def forward(self, x):\n        return F.rms_norm(x, (4,))\n"
    filename = "<ipython-input-cell-7>"  # IPython keeps each cell's text in linecache under such a name
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    main = types.ModuleType("__fake_main__")  # no __file__, like a kernel's __main__
    try:
        exec(compile(cell, filename, "exec"), main.__dict__)
        mine = main.__dict__["Mine"]
        mine.__module__ = "__fake_main__"
        with pytest.raises((OSError, TypeError)):
            inspect.getsource(mine)
        assert "F.rms_norm(x, (4,))" in learner_source(mine)
        assert "F.rms_norm(x, (4,))" in learner_source(mine())
    finally:
        linecache.cache.pop(filename, None)
