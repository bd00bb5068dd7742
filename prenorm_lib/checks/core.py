"""Shared machinery of the exercise checkers.

A checker must never pass a wrong answer and never drown a learner in a
traceback of their own code. Every topic checker is therefore built from the
few helpers here:

* ``Hint`` -- the only exception a checker raises on a wrong answer. Its message
  starts ``Exercise N.M: `` so the exercise tool (and the learner) can tell which
  exercise it belongs to.
* ``call_learner`` -- runs learner code; a crash becomes a ``Hint`` naming the
  exception, while ``NotImplementedError`` from an unfilled scaffold passes
  through unchanged (that is how "not done yet" is recognised).
* ``expect_close`` -- compares a returned tensor with the reference: type,
  shape and dtype first (each with its own hint), then the values.
* ``expect`` / ``expect_choice`` -- plain conditions and predict-then-run answers.
* ``passed`` -- prints the one stable success line that nbval compares.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["Hint", "call_learner", "expect", "expect_choice", "expect_close", "passed"]


class Hint(AssertionError):
    """A wrong answer, explained: ``Exercise N.M: <what to look at>``.

    A subclass of AssertionError so that it reads as a failed check, not as a
    crash, wherever it surfaces.
    """

    def __init__(self, exercise_id: str, message: str):
        self.exercise_id = exercise_id
        self.hint = message
        super().__init__(f"Exercise {exercise_id}: {message}")


def passed(exercise_id: str, detail: str) -> None:
    """Print the success line; it is stored in the notebook, so keep ``detail`` fixed."""
    print(f"Exercise {exercise_id} passed: {detail}")


def _learner_frame(exc: BaseException) -> str:
    """Where in the learner's code ``exc`` was raised: ``" (in f, line 3)"`` or ``""``.

    The deepest frame outside this package is the learner's; only the function
    name and line number are shown, never a file path.
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "prenorm_lib" not in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (in {frame.name}, line {frame.lineno})"


def call_learner(exercise_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``fn(*args, **kwargs)`` and return its result.

    ``NotImplementedError`` propagates unchanged (the exercise is not done yet);
    a ``Hint`` propagates too; any other exception becomes a ``Hint`` that names
    the exception type and message instead of showing a traceback.
    """
    if not callable(fn):
        raise Hint(
            exercise_id,
            f"expected a function, got {type(fn).__name__} — pass the function itself, not its result",
        )
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, Hint):
        raise
    except Exception as exc:  # the learner's code may raise anything
        raise Hint(
            exercise_id,
            f"your code raised {type(exc).__name__}: {exc}{_learner_frame(exc)}",
        ) from None


def expect(exercise_id: str, condition: bool, hint: str) -> None:
    """Raise ``Hint(exercise_id, hint)`` unless ``condition`` holds."""
    if not condition:
        raise Hint(exercise_id, hint)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def expect_close(
    exercise_id: str,
    got: Any,
    want: torch.Tensor,
    hint: str,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    shape_hint: str = "did you reduce over the wrong dimension?",
    dtype_hint: str = "cast the result back to the input dtype",
) -> None:
    """Check that the learner's tensor ``got`` matches the reference ``want``.

    Checks, in order, each with its own message: a tensor was returned at all,
    the shape (``shape_hint``), the dtype (``dtype_hint``; ``want`` is expected
    to carry the input's dtype), non-finite values, then the values within
    ``atol + rtol * |want|`` (``hint``, plus where the largest error is).
    Values are compared in float64 so fp16 rounding of the comparison itself
    cannot hide or create a difference.
    """
    if not isinstance(want, torch.Tensor):
        raise TypeError(f"want must be a torch.Tensor (the reference result), got {type(want).__name__}")
    if got is None:
        raise Hint(exercise_id, "returned None — did you forget to `return` the result?")
    if not isinstance(got, torch.Tensor):
        raise Hint(exercise_id, f"returned a {type(got).__name__} but expected a torch.Tensor")
    if got.shape != want.shape:
        raise Hint(
            exercise_id,
            f"returned shape {tuple(got.shape)} but expected {tuple(want.shape)} — {shape_hint}",
        )
    if got.dtype != want.dtype:
        raise Hint(
            exercise_id,
            f"returned {_dtype_name(got.dtype)} for a {_dtype_name(want.dtype)} input — {dtype_hint}",
        )
    got64 = got.detach().to("cpu", torch.float64)
    want64 = want.detach().to("cpu", torch.float64)
    bad_finite = torch.isfinite(got64) != torch.isfinite(want64)
    if bad_finite.any():
        index = tuple(torch.nonzero(bad_finite)[0].tolist())
        raise Hint(
            exercise_id,
            f"returned {got64[index].item():.3g} at index {index} where {want64[index].item():.3g} "
            f"was expected — {hint}",
        )
    finite = torch.isfinite(want64)
    same_special = (got64 == want64) | (torch.isnan(got64) & torch.isnan(want64))
    error = torch.where(finite, (got64 - want64).abs(), torch.zeros_like(got64))
    too_far = (error > atol + rtol * want64.abs()) | (~finite & ~same_special)
    if too_far.any():
        scored = torch.where(too_far, error, torch.full_like(error, -1.0))
        worst = tuple(int(i) for i in torch.unravel_index(scored.argmax(), scored.shape))
        raise Hint(
            exercise_id,
            f"{hint} (largest difference at index {worst}: "
            f"got {got64[worst].item():.4g}, expected {want64[worst].item():.4g})",
        )


def _normalise(answer: Any) -> Any:
    return answer.strip().lower() if isinstance(answer, str) else answer


def expect_choice(
    exercise_id: str,
    answer: Any,
    choices: Iterable[Any],
    correct: Any,
    why: str,
) -> None:
    """Check a predict-then-run answer; strings compare case- and space-insensitively.

    An answer outside ``choices`` gets a hint listing them; a wrong choice gets
    ``why``, the explanation of what actually happens.
    """
    options = [_normalise(c) for c in choices]
    if _normalise(correct) not in options:
        raise ValueError(f"correct={correct!r} must be one of choices={list(choices)!r}")
    given = _normalise(answer)
    if given not in options:
        listed = ", ".join(repr(c) for c in choices)
        raise Hint(exercise_id, f"answer {answer!r} is not one of the choices: {listed}")
    if given != _normalise(correct):
        raise Hint(exercise_id, f"not quite — {why}")
