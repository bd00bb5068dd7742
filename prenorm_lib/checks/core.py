"""Shared machinery of the exercise checkers.

A checker must never pass a wrong answer and never drown a learner in a traceback of
their own code. The same checker runs in two places:

* inline, in the learner's notebook (self-study): the learner's function is a real
  object, and the check cell prints one line;
* in the grader (``python -m prenorm_course.exercises check/grade``): the learner's
  function stays in the learner's kernel and arrives here as a
  :class:`~prenorm_lib.checks.remote.RemoteObject`; calling it returns plain data.
  The verdict is computed here, from data, by comparing with references computed here.

So a checker only calls the learner's objects (``call_learner``, which hands them copies
of its inputs and names an input the call changed), compares what comes back with
references computed from its own tensors, and learns about an object through
``object_facts`` (type names as strings, parameter shapes, attribute tensors as bytes:
every question is answered here, from that data). ``probe`` remains for actions that
must happen where the object lives (give a module the checker's weights). Inputs are
drawn afresh on every check (``fresh_generator``). The helpers:

* ``Hint`` -- the only exception a checker raises on a wrong answer; its message starts
  ``Exercise N.M: `` and IPython shows it as that one line, not as a traceback.
* ``NotDone`` -- the exercise still holds its placeholder.
* ``exercise`` -- the decorator of every checker a notebook calls: inline, "not done" is
  one printed line (so Run All goes on); ``checker.core`` raises instead (the grader).
* ``call_learner`` -- runs learner code; a crash becomes a ``Hint`` naming the exception,
  the learner's line and a did-you-mean.
* ``expect_close`` / ``expect`` / ``expect_choice`` -- tensors, conditions, predictions.
* ``refuse_library_object`` / ``refuse_library_calls`` -- an exercise that asks the
  learner to write something does not accept the library's own copy.
* ``passed`` -- the one stable success line.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import io
import math
import re
import secrets
import tokenize
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

from prenorm_lib.checks import probes
from prenorm_lib.checks.remote import KernelProblem, LearnerError, RemoteObject

__all__ = [
    "Hint", "NotDone", "call_learner", "dense_tensor", "describe", "exercise", "expect", "expect_choice",
    "expect_close", "expect_input_gradients", "expect_repeatable", "expect_trains", "finite_number",
    "fresh_generator", "number_hint", "object_facts", "passed",
    "probe", "refuse_library_calls", "refuse_library_object", "refuse_library_ops", "todo",
]


class Hint(AssertionError):
    """A wrong answer, explained: ``Exercise N.M: <what to look at>``.

    A subclass of AssertionError so that it reads as a failed check, not as a
    crash, wherever it surfaces. In IPython it is shown as its message alone.
    """

    def __init__(self, exercise_id: str, message: str):
        self.exercise_id = exercise_id
        self.hint = message
        super().__init__(f"Exercise {exercise_id}: {message}")

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback through the checker: the hint itself."""
        return [f"\x1b[1;31mExercise {self.exercise_id}\x1b[0m: {self.hint}"]


class NotDone(NotImplementedError):
    """The exercise still holds its placeholder (``raise NotImplementedError`` or ``...``)."""

    def __init__(self, exercise_id: str, todo: str = "fill it in above"):
        self.exercise_id = exercise_id
        self.todo = todo
        super().__init__(f"Exercise {exercise_id} is not done yet — {todo}")


_PASS_SINK: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("pass_sink", default=None)


def passed(exercise_id: str, detail: str) -> None:
    """Print the success line; it is stored in the notebook, so keep ``detail`` fixed."""
    line = f"Exercise {exercise_id} passed: {detail}"
    sink = _PASS_SINK.get()
    if sink is None:
        print(line)
    else:
        sink(line)


@contextlib.contextmanager
def collecting_passes(sink: Callable[[str], None]) -> Iterator[None]:
    """Inside, ``passed`` lines of this thread go to ``sink`` instead of stdout (the grader reads them)."""
    token = _PASS_SINK.set(sink)
    try:
        yield
    finally:
        _PASS_SINK.reset(token)


# --- learner objects, here or in the learner's kernel ----------------------------------------


def is_remote(obj: Any) -> bool:
    """True for an object that lives in the learner's kernel (the grader's view of it)."""
    return isinstance(obj, RemoteObject)


def describe(obj: Any) -> str:
    """The short type name of a learner's value, for a hint ("list", "ndarray", "MyNorm")."""
    if is_remote(obj):
        return obj.remote_type.rsplit(".", 1)[-1]
    return type(obj).__name__


def is_callable(obj: Any) -> bool:
    return obj.is_callable if is_remote(obj) else callable(obj)


def probe(anchor: Any, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` where ``anchor`` lives: in this process, or in the learner's kernel.

    ``function`` must be one of :mod:`prenorm_lib.checks.probes` (named in its ``__all__``),
    which return plain data (or objects, which come back as handles); the kernel's agent
    finds it there by name.
    """
    name = getattr(function, "__name__", "")
    if name not in probes.__all__ or getattr(probes, name) is not function:
        raise ValueError(f"{name or function!r} is not a probe of prenorm_lib.checks.probes")
    if is_remote(anchor):
        return anchor.learner.probe(name, args)
    return function(*args)


def object_facts(obj: Any, attributes: Iterable[str] = ()) -> dict:
    """``facts_of(obj, attributes)`` where ``obj`` lives: here, or (as plain data) from the learner's kernel."""
    attributes = list(attributes)
    facts = obj.learner.facts(obj, attributes) if is_remote(obj) else probes.facts_of(obj, attributes)
    if not isinstance(facts, dict) or not all(k in facts for k in ("types", "origin", "attributes", "parameters")):
        raise TypeError("malformed facts about a learner's object")
    return facts


def n_parameters(facts: dict) -> int:
    """The number of parameter values, from the parameter shapes in ``facts`` (0 for no module)."""
    shapes = facts.get("parameters") or []
    return sum(math.prod(shape) for _, shape in shapes if isinstance(shape, list))


def _raised(exercise_id: str, facts: dict | Any) -> Hint:
    if not isinstance(facts, dict):
        facts = {"type": facts.ename, "message": facts.message, "frame": facts.frame, "suggestion": facts.suggestion}
    return Hint(exercise_id, f"your code raised {facts['type']}: {facts['message']}{facts['frame']}"
                             f"{facts['suggestion']}")


def fresh_generator() -> torch.Generator:
    """A random generator seeded afresh from the operating system, for one check's inputs.

    Checker inputs are drawn anew on every check (their edge cases are kinds and shapes:
    a tiny row, an all-zero row, large values, odd lengths), so no table of yesterday's
    inputs and outputs can pass. In the grader the seed is drawn in the grader's process
    and never sent to the learner's kernel, which only ever sees the inputs themselves.
    """
    return torch.Generator().manual_seed(secrets.randbits(63))


def _copy_inputs(value: Any) -> Any:
    """``value`` with every tensor (also inside lists, tuples, dicts) replaced by a fresh copy."""
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        if isinstance(value, torch.nn.Parameter):
            return torch.nn.Parameter(copy, requires_grad=value.requires_grad)
        return copy.requires_grad_(value.requires_grad) if copy.is_floating_point() or copy.is_complex() else copy
    if type(value) in (list, tuple):
        return type(value)(_copy_inputs(v) for v in value)
    if type(value) is dict:
        return {k: _copy_inputs(v) for k, v in value.items()}
    return value


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and values (nan counts as equal to nan)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().cpu(), b.detach().cpu()
    if torch.equal(a, b):
        return True
    return (a.is_floating_point() or a.is_complex()) and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _changed_inputs(sent: Any, pristine: Any) -> bool:
    """True if a tensor in ``sent`` (what the learner got) no longer equals its pristine original."""
    if isinstance(pristine, torch.Tensor):
        return not isinstance(sent, torch.Tensor) or not _same_tensor(sent, pristine)
    if type(pristine) in (list, tuple, dict):
        pairs = zip(sent.values(), pristine.values(), strict=True) if type(pristine) is dict \
            else zip(sent, pristine, strict=True)
        return any(_changed_inputs(a, b) for a, b in pairs)
    return False


def _argument_name(key: int | str, names: Sequence[str]) -> str:
    if isinstance(key, int):
        return names[key] if key < len(names) else f"number {key + 1}"
    return str(key)


def in_place_hint(name: str, advice: str = "") -> str:
    """The one line for a learner's function that changed its input ``name`` in place."""
    advice = advice or (f"compute into a new tensor (x * …, not x.mul_(…)), so the caller's {name} stays as it "
                        "was")
    return f"your function changed its input {name} in place — {advice}"


def call_learner(exercise_id: str, fn: Callable[..., Any], *args: Any, arg_names: Sequence[str] = (),
                 in_place: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn(*args, **kwargs)`` and return its result.

    The learner's code never gets the caller's tensors: every tensor argument is copied
    first, so the checker's inputs (and any reference computed from them, before or
    after) stay exactly as drawn. After the call each argument is compared with what was
    sent; one that changed is a ``Hint`` naming it (``arg_names`` names positional
    arguments, ``in_place`` gives the advice per name). In the grader that comparison is
    made here, from the bytes the learner's kernel sends back, against the exact
    encoding that was sent; nothing it reports is copied into the checker's tensors. So
    the in-place hint can only fail a check: a kernel that hides a change hides only its
    own learner's mistake, and the result is compared with references from untouched inputs.

    The scaffold's ``NotImplementedError("Exercise N.M: ...")`` becomes ``NotDone``; a
    ``Hint`` propagates; any other exception becomes a ``Hint`` that names the exception,
    the learner's line and a did-you-mean instead of showing a traceback. Problems of the
    learner's kernel itself (a timeout, a crash) propagate: they are not hints.
    """
    if not is_callable(fn):
        raise Hint(
            exercise_id,
            f"expected a function, got {describe(fn)} — pass the function itself, not its result",
        )
    sent_args, sent_kwargs = _copy_inputs(args), _copy_inputs(kwargs)
    try:
        result = fn(*sent_args, **sent_kwargs)
    except (NotDone, Hint):
        raise
    except NotImplementedError as exc:
        if str(exc).startswith("Exercise "):
            raise NotDone(exercise_id, "fill in the function above") from None
        raise _raised(exercise_id, probes.error_facts(exc)) from None
    except KernelProblem:  # the learner's kernel did not answer: not a hint
        raise
    except LearnerError as exc:  # the learner's code raised in its kernel
        raise _raised(exercise_id, exc) from None
    except Exception as exc:  # the learner's code may raise anything
        raise _raised(exercise_id, probes.error_facts(exc)) from None
    if is_remote(fn):
        changed = list(fn.learner.changed_arguments)
    else:
        changed = [key for key, value in (dict(enumerate(args)) | dict(kwargs)).items()
                   if _changed_inputs((dict(enumerate(sent_args)) | sent_kwargs)[key], value)]
    if changed:
        name = _argument_name(changed[0], arg_names)
        raise Hint(exercise_id, in_place_hint(name, (in_place or {}).get(name, "")))
    return result


# --- facts re-derived from values: a gradient step ------------------------------------------


def expect_trains(exercise_id: str, anchor: Any, module: Any, reference: Callable[..., torch.Tensor],
                  weights: Mapping[str, torch.Tensor], x: torch.Tensor, hint: str, lr: float = 0.5,
                  after: torch.Tensor | None = None, atol: float | None = None, rtol: float | None = None,
                  room: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], float] | None = None) -> None:
    """The learner's ``module`` learns like ``reference(x, **weights)``: checked from values, not reported facts.

    Whether a weight is an ``nn.Parameter`` that forward uses is something the learner's
    kernel could misreport. So the module takes one SGD step (``gradient_step``, where it
    lives) on a loss whose gradient the grader computes itself from ``weights`` (the
    module's current weights, which the checker gave it); afterwards its output on fresh
    inputs must equal the reference with the weights moved by exactly that step. A weight
    the optimiser does not see, or one forward does not use, leaves a different output.
    ``after`` (fresh normal inputs shaped like ``x`` by default; token ids for an
    embedding) are the inputs after the step, compared within ``atol``; ``room(x, direction, after)``, when
    given, adds what rounding may move a correct module on this draw (a deep module's, measured by the caller).
    """
    gen = fresh_generator()
    direction = torch.randn(reference(x, **weights).shape, generator=gen)
    moving = {name: value.detach().clone().requires_grad_(True) for name, value in weights.items()}
    (reference(x, **moving) * direction).sum().backward()
    stepped = {name: (value - lr * value.grad).detach() for name, value in moving.items()}
    after = torch.randn(x.shape, generator=gen) if after is None else after
    probe(anchor, probes.gradient_step, module, x, direction, lr)
    got = call_learner(exercise_id, module, after, arg_names=("x",))
    with torch.no_grad():
        want = reference(after, **stepped)
    if room is not None:
        atol = (expect_close.__defaults__[0] if atol is None else atol) + room(x, direction, after)
    tolerances = {name: value for name, value in (("atol", atol), ("rtol", rtol)) if value is not None}
    expect_close(exercise_id, got, want, hint, **tolerances)


# --- the contract beyond the values: gradients to the inputs, repeated calls -------------------------


def expect_input_gradients(exercise_id: str, fn: Any, args: Sequence[Any], reference: Callable[..., torch.Tensor],
                           names: Sequence[str]) -> None:
    """``fn`` carries gradients back to each floating-point tensor in ``args`` as ``reference`` does.

    Its output feeds a loss ``sum(output · direction)`` (a direction drawn here); the gradient
    with respect to every input, computed where ``fn`` lives (``probes.input_gradients``), must
    equal the reference's, computed here. A function right in its values that detaches an
    input (``x.detach()``, ``torch.no_grad``, ``.data``) would stop training at that input.
    Like the gradient step, a guard against honest mistakes that a patched kernel could forge.
    Compared within ten times ``expect_close``'s own tolerance (a backward pass adds the
    roundings of its own reductions).
    """
    atol, rtol = (10 * default for default in expect_close.__defaults__[:2])
    leaves = [a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point()
              else a for a in args]
    out = reference(*leaves)
    direction = torch.randn(out.shape, generator=fresh_generator(), dtype=torch.float64).to(out.dtype)
    tensors = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    want = iter(torch.autograd.grad((out * direction).sum(), tensors, allow_unused=True))
    wanted = [next(want) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in leaves]
    got = probe(fn, probes.input_gradients, fn, list(args), direction)
    if isinstance(got, dict) and isinstance(got.get("raised"), dict):
        facts = got["raised"]
        raise Hint(exercise_id, f"taking the gradient through your code raised {facts.get('type')}: "
                                f"{str(facts.get('message', ''))[:300]} — a model built on it could not be trained")
    if not isinstance(got, list) or len(got) != len(wanted):
        raise Hint(exercise_id, "the gradient of your output could not be taken — return a tensor computed from "
                                "the inputs with torch operations")
    for name, g, w in zip(names, got, wanted, strict=False):
        if w is None:
            continue
        if not dense_tensor(g) or (bool((g == 0).all()) and not bool((w == 0).all())):
            raise Hint(exercise_id, f"no gradient reaches {name}: the output does not depend on it through autograd "
                                    "(a .detach(), torch.no_grad() or .data?) — training could not learn through it")
        expect_close(exercise_id, g.to(w.dtype), w, f"the gradient with respect to {name} is wrong: somewhere the "
                     "output depends on it other than through the formula (a detached or copied part?)",
                     atol=atol, rtol=rtol, shape_hint=f"the gradient with respect to {name} has the wrong shape")


def expect_repeatable(exercise_id: str, fn: Any, args: Sequence[Any], first: Any, again: Sequence[Any],
                      want_again: torch.Tensor, **tolerance: float) -> None:
    """Called again, ``fn`` gives ``first`` again on the same inputs, and the right answer on new ones.

    A learner's function or module that keeps state between calls (a cache of its first
    output, a counter) is right only on its first calls; the checker calls it more than once.
    ``tolerance`` (``atol``, ``rtol``) as ``expect_close``'s, whose defaults it keeps otherwise.
    """
    repeated = call_learner(exercise_id, fn, *args)
    if isinstance(first, torch.Tensor):
        expect_close(exercise_id, repeated, first.detach(), "called a second time on the same inputs, your code "
                     "returned something else: does it keep state between calls (a cache, a counter)?",
                     **tolerance)
    got = call_learner(exercise_id, fn, *again)
    expect_close(exercise_id, got, want_again, "after its first calls your code is wrong on new inputs of the same "
                 "shape: does it keep state between calls (a cache of an earlier result)?", **tolerance)


# --- the library's own copy is not an answer -----------------------------------------------


def code_only(source: str) -> str:
    """``source`` without comments and string literals (a docstring may name a library function)."""
    kept: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in (tokenize.COMMENT, tokenize.STRING):
                kept.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#.*", "", source)
    return " ".join(kept)


def _reported(obj: Any, what: str) -> str:
    """For a grader's hint about an object in the learner's kernel: what it was decided from (a lint's basis).

    Inline the learner's objects are their own, so nothing is added there.
    """
    return f" [decided from {what} the learner's kernel reported]" if is_remote(obj) else ""


def refuse_library_object(exercise_id: str, obj: Any, library: Collection[str], task: str) -> None:
    """Hint if ``obj`` *is* one of the ``library`` objects (qualified names), or an instance/subclass of one.

    A lint, not a guarantee: the names come from the learner's kernel (see README). It can
    only fail a check; a pass rests on the values the checker compares, never on this.
    """
    origin = object_facts(obj)["origin"]
    hit = next((name for name in origin if name in library), None) if isinstance(origin, list) else None
    if hit is not None:
        raise Hint(exercise_id, f"that is the library's own `{hit}`, not your code — {task}"
                                f"{_reported(obj, 'the type names')}")


def refuse_library_calls(exercise_id: str, obj: Any, pattern: re.Pattern[str], task: str) -> None:
    """Hint if the learner's source calls a library implementation of the exercise (``pattern``).

    A lint like ``refuse_library_object``: the source comes from the learner's kernel, and
    the refusal can only fail a check.
    """
    source = probe(obj, probes.learner_source, obj)
    match = pattern.search(code_only(source)) if isinstance(source, str) else None
    if match is not None:
        called = re.sub(r"\s+", "", match.group(0)).rstrip("(")
        raise Hint(exercise_id, f"your code calls `{called}`, the library's own implementation — {task}"
                                f"{_reported(obj, 'the source')}")


def refuse_library_ops(exercise_id: str, obj: Any, args: Sequence[Any], pattern: re.Pattern[str] | None,
                       task: str) -> None:
    """Hint if calling ``obj(*args)`` runs a torch function or operator that ``pattern`` names.

    The call runs once more where ``obj`` lives, under a record of what it runs
    (``probes.traced_ops``: torch functions, dispatcher operators, torch's Python functions);
    so a name the source never spells (a string, an alias, ``torch.ops.aten``, a class of
    torch, a decoy ``__wrapped__``) is seen as what it is. A lint like the others: the record
    is made in the learner's kernel, which could be patched to hide it, and it can only fail
    a check.
    """
    if pattern is None:
        return
    names = probe(obj, probes.traced_ops, obj, list(args))
    hit = next((name for name in names if isinstance(name, str) and pattern.search(name)), None) \
        if isinstance(names, list) else None
    if hit is not None:
        raise Hint(exercise_id, f"your code runs torch's `{hit}`, a ready-made implementation — {task}"
                                f"{_reported(obj, 'the operators')}")


# --- comparing answers -------------------------------------------------------------------


def expect(exercise_id: str, condition: bool, hint: str) -> None:
    """Raise ``Hint(exercise_id, hint)`` unless ``condition`` holds."""
    if not condition:
        raise Hint(exercise_id, hint)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# (atol, rtol) an answer computed correctly from inputs of a half-precision dtype stays within: a few units of
# its last place (the final rounding, and the ones before it when the learner computes in half)
TOLERANCES = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}
# A composite result computed in bfloat16 (attention, a block, a model) rounds every intermediate to 8 bits of
# mantissa (a relative step of 2⁻⁸ ≈ 0.4 %), and rounding a score s moves its softmax weight by about |s|·2⁻⁸: no
# elementwise bound of a few last places holds for it (4.3's handout formula in bfloat16 missed (2e-2, 2e-2) in 19
# of 3,000 draws, by up to 1.6 ×). Over the whole output it lands within a few of those steps of the float64 answer
# (at most 1.8 % in those draws); 5 % is far beyond what rounding does and far below what a wrong formula does.
BF16_RELATIVE = 0.05


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for a result computed correctly from inputs of ``dtype``: ``TOLERANCES`` for half precision;
    for float32 and float64 ``expect_close``'s own defaults, the rounding of float32's reductions over tens of
    values (a learner may compute float64 in float32)."""
    return TOLERANCES.get(dtype) or tuple(expect_close.__defaults__[:2])


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """‖got − want‖ / ‖want‖, in float64 (inf where the difference is not finite)."""
    got64, want64 = got.detach().to("cpu", torch.float64), want.detach().to("cpu", torch.float64)
    error = float((got64 - want64).norm() / want64.norm().clamp_min(1e-12))
    return error if math.isfinite(error) else math.inf


def expect_relative(exercise_id: str, got: Any, want: torch.Tensor, hint: str, limit: float = BF16_RELATIVE,
                    **hints: str) -> None:
    """``expect_close``'s checks of type, shape, dtype and non-finite values, then the values within ``limit``
    of ``want`` relative to its size over the whole tensor: for a composite result computed in bfloat16
    (``BF16_RELATIVE``), where no elementwise bound holds."""
    expect_close(exercise_id, got, want, hint, atol=math.inf, rtol=0.0, **hints)
    error = relative_error(got, want)
    expect(exercise_id, error <= limit, f"{hint} ({error:.1%} away from it over the whole output, relative to its "
           f"size; {_dtype_name(want.dtype)}'s rounding explains at most {limit:.0%})")


def dense_tensor(value: Any) -> bool:
    """True for a tensor whose values a checker can read and compare: dense, real, not on the meta device.

    A learner may return anything; only such a tensor is worth comparing with the typical
    mistakes, and ``expect_close`` names whatever else it is.
    """
    return (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device.type != "meta"
            and not value.is_complex())


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
        raise Hint(exercise_id, f"returned a {describe(got)} but expected a torch.Tensor")
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
    if got.layout != torch.strided or got.device.type == "meta":
        kind = "a meta tensor, which holds no values" if got.device.type == "meta" else f"a {got.layout} tensor"
        raise Hint(exercise_id, f"returned {kind} — return an ordinary dense tensor computed from the inputs")
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


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a real number (0-d tensors and NumPy scalars too), else None.

    inf and nan come back as themselves, because a prediction may name them ("inf");
    a numeric answer reads through ``finite_number`` instead.
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex() or value.device.type == "meta" or value.layout != torch.strided:
            return None
        value = value.item()
    if isinstance(value, bool) or (not isinstance(value, int | float) and type(value).__module__ != "numpy"):
        return None
    if getattr(getattr(value, "dtype", None), "kind", "f") not in "iuf":  # NumPy bool, complex, str, object
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def finite_number(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number, else None: nan and inf answer no numeric question.

    ``abs(nan - 8) > 0.5`` is False, so a tolerance test alone would pass nan; every
    numeric answer goes through here first.
    """
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def number_hint(answer: Any, what: str) -> str:
    """The one line for an answer that is not a finite real number: what it was, and ``what`` is asked
    ("one number, the standard deviation of q·k")."""
    try:
        shown = repr(answer)
    except Exception:  # a learner's object whose __repr__ raises
        shown = "an object"
    if len(shown) > 80:
        shown = shown[:77] + "..."
    if _number(answer) is not None:  # nan or ±inf
        return f"answer with {what}; {shown} is not a finite number, so it answers nothing"
    return f"answer with {what}; got {describe(answer)} {shown}"


def _as_choice(answer: Any, options: list[Any]) -> Any:
    """A number given for a choice written as a string (``float("inf")`` for ``"inf"``) counts as that choice."""
    number = _number(answer)
    if number is None:
        return _normalise(answer)
    for option in options:
        try:
            value = float(option)
        except (TypeError, ValueError):
            continue
        if value == number or (math.isnan(value) and math.isnan(number)):
            return option
    return answer


def expect_choice(
    exercise_id: str,
    answer: Any,
    choices: Iterable[Any],
    correct: Any,
    why: str,
) -> None:
    """Check a predict-then-run answer; strings compare case- and space-insensitively.

    A number counts as the choice it equals (``float("inf")`` is ``"inf"``, ``0`` is
    ``"0"``). An answer outside ``choices`` gets a hint listing them; a wrong choice
    gets ``why``, the explanation of what actually happens.
    """
    choices = list(choices)
    options = [_normalise(c) for c in choices]
    if _normalise(correct) not in options:
        raise ValueError(f"correct={correct!r} must be one of choices={choices!r}")
    given = _as_choice(answer, options)
    if given not in options:
        listed = ", ".join(repr(c) for c in choices)
        raise Hint(exercise_id, f"answer {answer!r} is not one of the choices: {listed} — give the choice as "
                                "one of these strings")
    if given != _normalise(correct):
        raise Hint(exercise_id, f"not quite — {why}")


# --- the checkers a notebook calls -----------------------------------------------------------


def todo(args: Iterable[Any]) -> str:
    """What the learner still has to do, for the not-done line."""
    args = list(args)
    if any(a is Ellipsis for a in args):
        return "replace each `...` in the exercise cell above with your answer"
    names = [getattr(a, "__name__", None) for a in args if callable(a) and not is_remote(a)]
    names = [n for n in names if isinstance(n, str) and n != "<lambda>"]
    return f"fill in `{names[0]}` above" if names else "fill in the exercise cell above"


def exercise(exercise_id: str):
    """Decorate the checker of Exercise ``exercise_id`` (the function a notebook's check cell calls).

    Called in a notebook, an unfinished exercise prints one line ("Exercise 1.1 is not
    done yet — fill in `my_rms_norm` above") and returns, so Run All goes on; a wrong
    answer raises ``Hint`` (one line in IPython). ``checker.core`` is the strict form for
    the grader: it raises ``NotDone`` too.
    """

    def strict(check: Callable[..., None]) -> Callable[..., None]:
        """``check`` that raises NotDone for a ``...`` placeholder and names what to fill in."""

        @functools.wraps(check)
        def run(*args: Any, **kwargs: Any) -> None:
            values = (*args, *kwargs.values())
            if any(value is Ellipsis for value in values):
                raise NotDone(exercise_id, todo(values))
            try:
                return check(*args, **kwargs)
            except NotDone as exc:
                raise NotDone(exercise_id, todo(values)) from exc.__cause__

        return run

    def decorate(check: Callable[..., None]) -> Callable[..., None]:
        core = strict(check)

        @functools.wraps(check)
        def inline(*args: Any, **kwargs: Any) -> None:
            try:
                return core(*args, **kwargs)
            except NotDone as exc:
                print(exc)
                return None

        inline.core = core
        inline.exercise_id = exercise_id
        return inline

    return decorate
