"""The notebook-05 checkers pass correct blocks and name each typical mistake."""

import re
from types import SimpleNamespace

import pytest
import torch

from prenorm_lib import TransformerBlock
from prenorm_lib.checks import Hint
from prenorm_lib.checks import block as check
from prenorm_lib.checks.core import NotDone
from prenorm_lib.checks.remote import loopback

pytest_plugins = ["learner_wire"]

# ----------------------------------------------------------------------------- 5.1


def pre_norm(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln2(h))


def pre_norm_calls_block_method(x, ln1, attn, ln2, ffn):
    from prenorm_lib import TransformerBlock

    block = TransformerBlock(16, 4, 48, 16)
    block.ln1, block.attn, block.ln2, block.ffn = ln1.module, attn.module, ln2.module, ffn.module
    return block.pre_norm_forward(x)


def pre_as_post(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(z + ffn(z))


def pre_norm_inside_residual(x, ln1, attn, ln2, ffn):
    h = ln1(x + attn(x))
    return h + ffn(ln2(h))


def pre_forgot_attn_residual(x, ln1, attn, ln2, ffn):
    h = attn(ln1(x))
    return h + ffn(ln2(h))


def pre_forgot_ffn_residual(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return ffn(ln2(h))


def pre_normalised_stream(x, ln1, attn, ln2, ffn):
    x = ln1(x)
    h = x + attn(x)
    return h + ffn(ln2(h))


def pre_normalised_stream_both(x, ln1, attn, ln2, ffn):
    x = ln1(x)
    h = x + attn(x)
    h = ln2(h)
    return h + ffn(h)


def pre_ln2_on_x(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln2(x))


def pre_ln1_for_both(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln1(h))


def pre_norms_swapped(x, ln1, attn, ln2, ffn):
    h = x + attn(ln2(x))
    return h + ffn(ln1(h))


def pre_second_residual_from_x(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return x + ffn(ln2(h))


def pre_in_place(x, ln1, attn, ln2, ffn):
    x += attn(ln1(x))
    return x + ffn(ln2(x))


def pre_crashes(x, ln1, attn, ln2, ffn):
    return x @ attn(ln1(x))


def pre_returns_none(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    h + ffn(ln2(h))


def pre_skips_ffn_branch_weirdly(x, ln1, attn, ln2, ffn):
    return x + attn(ln1(x)) * 2


def pre_unfilled(x, ln1, attn, ln2, ffn):
    raise NotImplementedError("Exercise 5.1: the pre-norm forward pass")


def test_pre_norm_correct_passes(via, capsys):
    check.pre_norm_forward(via(pre_norm))
    assert capsys.readouterr().out.startswith("Exercise 5.1 passed:")


@pytest.mark.parametrize(
    ("library", "words"),
    [
        (TransformerBlock.pre_norm_forward, "the library's own `prenorm_lib.block.TransformerBlock.pre_norm_forward`"),
        (TransformerBlock(16, 4, 48, 16).pre_norm_forward, "that is the library's own"),
        (pre_norm_calls_block_method, "your code calls `TransformerBlock`, the library's own implementation"),
    ],
)
def test_pre_norm_from_the_library_is_refused(library, words, via):
    with pytest.raises(Hint, match=r"^Exercise 5\.1: ") as info:
        check.pre_norm_forward(via(library))
    assert words in str(info.value)


def test_post_norm_from_the_library_is_refused(via):
    with pytest.raises(Hint, match=r"^Exercise 5\.2: that is the library's own `[\w.]*post_norm_forward`"):
        check.post_norm_forward(via(TransformerBlock.post_norm_forward))


@pytest.mark.parametrize(
    ("learner", "hint"),
    [
        (pre_as_post, "post-norm block"),
        (pre_norm_inside_residual, "applied to the residual sum after attention"),
        (pre_forgot_attn_residual, "attention residual is missing"),
        (pre_forgot_ffn_residual, "FFN residual is missing"),
        (pre_normalised_stream, "residual stream itself was normalised"),
        (pre_normalised_stream_both, "residual stream itself was normalised"),
        (pre_ln2_on_x, "FFN branch reads the block's input"),
        (pre_ln1_for_both, "ln1 is used for both"),
        (pre_norms_swapped, "swapped"),
        (pre_second_residual_from_x, "added to the block's input"),
        (pre_in_place, "in place"),
        (pre_crashes, "raised RuntimeError"),
        (pre_returns_none, "returned None"),
        (pre_skips_ffn_branch_weirdly, "ln2, ffn were never called"),
    ],
)
def test_pre_norm_mistakes_get_their_hint(learner, hint, via):
    with pytest.raises(Hint) as info:
        check.pre_norm_forward(via(learner))
    message = str(info.value)
    assert message.startswith("Exercise 5.1: ")
    assert hint in message, message


def test_pre_norm_unfilled_scaffold_is_not_done(via, capsys):
    check.pre_norm_forward(via(pre_unfilled))
    assert capsys.readouterr().out.startswith("Exercise 5.1 is not done yet — ")
    with pytest.raises(NotDone):
        check.pre_norm_forward.core(via(pre_unfilled))


# ----------------------------------------------------------------------------- 5.2


def post_norm(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(z + ffn(z))


def post_as_pre(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln2(h))


def post_norms_swapped(x, ln1, attn, ln2, ffn):
    z = ln2(x + attn(x))
    return ln1(z + ffn(z))


def post_missing_second_norm(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return z + ffn(z)


def post_missing_first_norm(x, ln1, attn, ln2, ffn):
    z = x + attn(x)
    return ln2(z + ffn(z))


def post_residual_after_norm(x, ln1, attn, ln2, ffn):
    z = x + ln1(attn(x))
    return z + ln2(ffn(z))


def post_ffn_on_x(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(z + ffn(x))


def post_ln1_for_both(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln1(z + ffn(z))


def post_forgot_ffn_residual(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(ffn(z))


def post_returns_tuple(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return z, ln2(z + ffn(z))


def test_post_norm_correct_passes(via, capsys):
    check.post_norm_forward(via(post_norm))
    assert capsys.readouterr().out.startswith("Exercise 5.2 passed:")


@pytest.mark.parametrize(
    ("learner", "hint"),
    [
        (post_as_pre, "this is the pre-norm block"),
        (post_norms_swapped, "wrong order"),
        (post_missing_second_norm, "second norm is missing"),
        (post_missing_first_norm, "first norm is missing"),
        (post_residual_after_norm, "before the residual is added"),
        (post_ffn_on_x, "the FFN reads the block's input"),
        (post_ln1_for_both, "ln1 normalises both sums"),
        (post_forgot_ffn_residual, "FFN residual is missing"),
        (post_returns_tuple, "expected a torch.Tensor"),
    ],
)
def test_post_norm_mistakes_get_their_hint(learner, hint, via):
    with pytest.raises(Hint) as info:
        check.post_norm_forward(via(learner))
    message = str(info.value)
    assert message.startswith("Exercise 5.2: ")
    assert hint in message, message


def test_every_variant_differs_from_the_reference_and_from_each_other():
    """If two variants gave the same output, one of their hints could never be shown."""
    block = check._test_block()
    parts = (block.ln1, block.attn, block.ln2, block.ffn)
    x = 3 * torch.randn(2, 5, block.ln1.weight.shape[0], generator=torch.Generator().manual_seed(0))
    for reference, variants in ((check._pre, check.PRE_NORM_MISTAKES), (check._post, check._POST_NORM_MISTAKES)):
        with torch.no_grad():
            outputs = [reference(x, *parts)] + [v(x, *parts) for v, _ in variants.values()]
        for i, a in enumerate(outputs):
            for b in outputs[i + 1 :]:
                assert not torch.allclose(a, b, atol=1e-4), "two variants coincide"


# ----------------------------------------------------------------------------- 5.3

RIGHT = {"pre": "trains", "post": "stalls", "none": "diverges"}  # what the warmup_grid record holds


def test_divergence_right_prediction_passes(capsys):
    check.divergence_prediction(RIGHT)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 5.3 passed:")
    assert "post stalls" in out


def test_divergence_prediction_ignores_case_and_spaces(capsys):
    check.divergence_prediction({"pre": " Trains", "post": "STALLS", "none": "diverges "})
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("prediction", "hint"),
    [
        ({**RIGHT, "post": "trains"}, "post stalls (you said trains)"),
        ({**RIGHT, "post": "diverges"}, "warmup"),
        ({**RIGHT, "none": "stalls"}, "none diverges (you said stalls)"),
        ({**RIGHT, "pre": "explodes"}, "is not one of"),
        ({"pre": "trains", "post": "stalls"}, "exactly the keys"),
        ("post", "must be a dict"),
    ],
)
def test_divergence_wrong_prediction_explains(prediction, hint):
    with pytest.raises(Hint) as info:
        check.divergence_prediction(prediction)
    assert str(info.value).startswith("Exercise 5.3: ")
    assert hint in str(info.value), str(info.value)


def test_divergence_placeholder_is_not_done(capsys):
    check.divergence_prediction(...)
    assert capsys.readouterr().out.startswith("Exercise 5.3 is not done yet — replace each `...`")


def test_the_recorded_outcomes_are_the_seed_0_cells_at_lr_0_01_without_warmup():
    """The runs 5.3's markdown describes: 6 blocks, lr 1e-2, no warmup -- seed 0 of the record behind the grid."""
    record = check.experiments.load("warmup_grid")
    assert record.config["num_layers"] == 6
    assert check.recorded_outcomes(record) == RIGHT


def test_the_verdict_comes_from_the_record(monkeypatch):
    """A record in which post-norm trained turns the course's answer into a wrong one, and the other way round."""
    record = check.experiments.load("warmup_grid")
    cells = {**record.runs["0"]["cells"], "post|0.01|0": {**record.runs["0"]["cells"]["post|0.01|0"],
                                                           "outcome": "trains"}}
    other = SimpleNamespace(runs={**record.runs, "0": {**record.runs["0"], "cells": cells}})
    monkeypatch.setattr(check.experiments, "load", lambda name: other)
    with pytest.raises(Hint, match=r"post trains \(you said stalls\)"):
        check.divergence_prediction.core(RIGHT)
    check.divergence_prediction.core({**RIGHT, "post": "trains"})


def test_grader_judges_divergence_through_the_kernels_proxy(capsys):
    """In the grader the prediction is a proxy for the learner's object; the runs come from the grader's record."""
    learner = loopback({"prediction": {"pre": "trains", "post": "trains", "none": "diverges"}})
    with pytest.raises(Hint, match="post stalls \\(you said trains\\)"):
        check.divergence_prediction.core(learner.lookup("prediction"))
    check.divergence_prediction.core(loopback({"prediction": dict(RIGHT)}).lookup("prediction"))
    with pytest.raises(NotDone):
        check.divergence_prediction.core(...)
    assert "Exercise 5.3 passed: you predicted all three runs (pre trains, post stalls, none diverges)" in (
        capsys.readouterr().out
    )


def test_block_hints_name_the_mistake_not_the_fix():
    """A hint says what went wrong in words; the code of the answer (ln1(x + …), attn(ln1(x)), …) is the exercise."""
    hints = [hint for _, hint in (*check.PRE_NORM_MISTAKES.values(), *check._POST_NORM_MISTAKES.values())]
    assert len(hints) == 24
    for hint in hints:
        assert re.search(r"\b(?:ln1|ln2|attn|ffn)\s*\(|\bx\s*\+|return\b|:=", hint) is None, hint


def test_the_post_norm_stall_explanation_agrees_with_section_3():
    """Notebook 05's section 3: with SwiGLU the post-norm gradient profile falls towards the output."""
    why = check._WHY[("post", "stalls")]
    assert "largest next to the output" not in why
    assert "with SwiGLU they fall towards it (section 3)" in why


@pytest.mark.parametrize(("checker", "right"), [(check.pre_norm_forward, pre_norm), (check.post_norm_forward,
                                                                                      post_norm)])
def test_a_block_that_writes_in_the_notebooks_width_fails(checker, right):
    """Widths are drawn per check (never the old d_model = 16), so a block reshaped to 16 fails every check."""

    def reshaped_to_16(x, ln1, attn, ln2, ffn):
        return right(x, ln1, attn, ln2, ffn).reshape(*x.shape[:-1], 16)

    for _ in range(3):
        with pytest.raises(Hint, match=rf"^Exercise {checker.exercise_id}: "):
            checker.core(reshaped_to_16)
