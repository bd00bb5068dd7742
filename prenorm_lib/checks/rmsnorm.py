"""Checkers of notebook 01's exercises (RMSNorm).

* ``rms_norm(fn)`` — Exercise 1.1, the kernel ``fn(x, weight, eps)``.
* ``rms_norm_module(cls)`` — Exercise 1.2, the module class ``cls(d_model, eps, device, dtype)``,
  whose ``forward`` calls the learner's own kernel ``my_rms_norm`` from 1.1.
* ``fp16_prediction(square, normalised)`` — Exercise 1.3, predict-then-run on fp16.

A wrong kernel is diagnosed by comparing its output with small wrong kernels, one per
typical mistake (``MISTAKES``): if the learner's result matches the "forgot eps" kernel on
the case that tells them apart, the hint says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from prenorm_lib import functional
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    Hint,
    NotDone,
    call_learner,
    dense_tensor,
    exercise,
    expect,
    expect_choice,
    expect_close,
    expect_input_gradients,
    expect_repeatable,
    expect_trains,
    fresh_generator,
    is_callable,
    is_remote,
    n_parameters,
    object_facts,
    passed,
    probe,
    refuse_library_calls,
    refuse_library_object,
    refuse_library_ops,
    tolerance,
)
from prenorm_lib.checks.probes import MODULE_CLASS, PARAMETER_CLASS, set_training, set_weight

__all__ = ["MISTAKES", "fp16_prediction", "rms_norm", "rms_norm_module"]

KERNEL, MODULE, PREDICT = "1.1", "1.2", "1.3"
KERNEL_RECORD, MODULE_RECORD = EXERCISES[KERNEL], EXERCISES[MODULE]


def _mean_square(x: torch.Tensor, dim=-1) -> torch.Tensor:
    return x.pow(2).mean(dim=dim, keepdim=True)


def _f32(fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]):
    """Run a float32 formula and cast back, so a variant differs from the reference only in its mistake."""
    return lambda x, w, eps: fn(x.float(), w.float(), eps).to(x.dtype)


# name -> (wrong kernel, hint). Order matters: the first variant that matches is reported.
MISTAKES: dict[str, tuple[Callable, str]] = {
    "no gain": (
        _f32(lambda x, w, eps: x * torch.rsqrt(_mean_square(x) + eps)),
        "the output ignores `weight` — multiply the normalised vector by the gain g",
    ),
    "layernorm": (
        _f32(lambda x, w, eps: (x - x.mean(-1, keepdim=True))
             * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w),
        "you subtracted the mean, as LayerNorm does — RMSNorm does not re-center: divide x itself by "
        "sqrt(mean(x²) + eps)",
    ),
    "std": (
        _f32(lambda x, w, eps: x * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w),
        "you divided by the standard deviation — RMSNorm divides by the root mean square sqrt(mean(x²) + eps), "
        "which does not subtract the mean first",
    ),
    "std unbiased": (
        _f32(lambda x, w, eps: x * torch.rsqrt(x.var(-1, keepdim=True) + eps) * w),
        "you divided by the standard deviation (torch.std / var) — RMSNorm divides by the root mean square "
        "sqrt(mean(x²) + eps)",
    ),
    "sum": (
        _f32(lambda x, w, eps: x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w),
        "you used the sum of the squares — take their mean (divide by d_model), so the output has RMS ≈ 1",
    ),
    "no sqrt": (
        _f32(lambda x, w, eps: x / (_mean_square(x) + eps) * w),
        "you divided by the mean square — take its square root: RMS = sqrt(mean(x²) + eps)",
    ),
    "mean over dim 0": (
        _f32(lambda x, w, eps: x * torch.rsqrt(_mean_square(x, 0) + eps) * w),
        "the mean is over the wrong axis — average over the last dimension (dim=-1, keepdim=True): "
        "each token's vector is normalised on its own",
    ),
    "mean over dim -2": (
        _f32(lambda x, w, eps: x * torch.rsqrt(_mean_square(x, -2) + eps) * w),
        "the mean is over the wrong axis — average over the last dimension (dim=-1, keepdim=True): "
        "each token's vector is normalised on its own",
    ),
    "mean over everything": (
        _f32(lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean() + eps) * w),
        "the mean is over the whole tensor — average over the last dimension only (dim=-1, keepdim=True): "
        "each token's vector is normalised on its own",
    ),
    "eps fixed at 1e-5": (
        _f32(lambda x, w, eps: x * torch.rsqrt(_mean_square(x) + 1e-5) * w),
        "the result ignores the `eps` argument — use the eps you are given instead of a fixed number",
    ),
    "no eps": (
        _f32(lambda x, w, eps: x * torch.rsqrt(_mean_square(x)) * w),
        "near-zero inputs go wrong — did you forget eps? It belongs inside the square root: "
        "sqrt(mean(x²) + eps); without it an all-zero vector gives 0/0 = nan",
    ),
    "eps outside sqrt": (
        _f32(lambda x, w, eps: x / (_mean_square(x).sqrt() + eps) * w),
        "eps is added outside the square root — it belongs inside: sqrt(mean(x²) + eps)",
    ),
    "no upcast": (
        lambda x, w, eps: functional.rms_norm(x, w, eps, upcast=False),
        "the result is zeros or inf — compute in float32: x.float() before squaring "
        "(300² = 90000 overflows fp16, whose largest value is 65504), then cast the result back",
    ),
}

KERNEL_DTYPE_HINT = "cast the result back to the input dtype (x.dtype): fp16 in, fp16 out"
IN_PLACE_HINT = (
    "`x.to(torch.float32)` does not copy a float32 input, so `x32 /= rms` (or `x32.div_(...)`) divides the "
    "caller's tensor too. Write `x32 / rms`, which makes a new tensor"
)
KERNEL_IN_PLACE = {"x": IN_PLACE_HINT, "weight": "multiply into a new tensor"}
KEEPDIM_HINT = (
    "the mean over the last dimension dropped that dimension, so x (..., d) and the RMS (...) do not line up — "
    "keep it with mean(dim=-1, keepdim=True), which gives (..., 1)"
)


def _matches(got: torch.Tensor, candidate: torch.Tensor) -> bool:
    """``got`` is ``candidate`` within what tells a mistake from another (2e-3, 1e-3), or within the dtype's own
    precision where that is coarser (bf16's last place is 4e-3: a right bf16 answer one rounding off the
    reference once matched "forgot eps" better than it matched RMSNorm)."""
    if not dense_tensor(got) or got.shape != candidate.shape:
        return False
    atol, rtol = tolerance(candidate.dtype)
    return torch.allclose(got.detach().double(), candidate.double(), rtol=max(2e-3, rtol), atol=max(1e-3, atol),
                          equal_nan=True)


OLD_EPS = (1e-5, 0.5)  # the values the checks used to send: a drawn eps is never one of them


def _log_uniform(gen: torch.Generator, low: float, high: float) -> float:
    """One number drawn log-uniformly from [low, high], rounded to 2 significant digits so a hint quotes it;
    never one of ``OLD_EPS``, so an answer that reads eps only when it is an old value fails every check."""
    value = OLD_EPS[0]
    while value in OLD_EPS:
        value = math.exp(math.log(low) + (math.log(high) - math.log(low)) * float(torch.rand((), generator=gen)))
        value = float(f"{value:.2g}")
    return value


def _kernel_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, float]]:
    """(description, x, weight, eps), each aimed at a few mistakes; ends with the dtype cases.

    Every argument is drawn afresh: the widths (a batch 9 … 24 wide, a vector 3 … 7 long,
    so neither is the 8 of the notebook's example), eps (a small one, 1e-7 … 1e-5, too small
    to move an ordinary row beyond the tolerance, so a missing or fixed eps is named where it
    matters, and a large one, 0.05 … 2, which changes every row), and
    the dtype cases (fp16 with |x| ≈ 300, bf16, float64). A kernel that writes in any
    of these instead of reading its arguments fails on some case.
    """
    gen = fresh_generator()

    def width(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=gen))

    d, short, tiny_d, loud_d = width(9, 24), width(3, 7), width(3, 12), width(9, 24)
    small_eps, large_eps = _log_uniform(gen, 1e-7, 1e-5), _log_uniform(gen, 0.05, 2.0)
    batch = torch.randn(2, 3, d, generator=gen) + 0.5  # non-zero mean: tells RMS from std
    gain = torch.rand(d, generator=gen) + 0.5
    tiny_and_zero = torch.stack([1e-3 * torch.randn(tiny_d, generator=gen), torch.zeros(tiny_d)])  # (2, tiny_d)
    loud = (300.0 * (1 + 0.1 * torch.rand(3, loud_d, generator=gen))
            * (torch.randint(0, 2, (3, loud_d), generator=gen) * 2 - 1))
    return [
        (f"a (2, 3, {d}) float32 batch, eps = {small_eps:g}", batch, gain, small_eps),
        (f"a single {short}-vector", torch.randn(short, generator=gen) - 1.0, torch.rand(short, generator=gen) + 0.5,
         small_eps),
        ("a tiny row and an all-zero row", tiny_and_zero, torch.ones(tiny_d), 1e-5),
        (f"eps = {large_eps:g}", batch, gain, large_eps),
        ("an fp16 input with |x| ≈ 300", loud.half(), torch.ones(loud_d, dtype=torch.float16), 1e-5),
        ("a bf16 input", batch.bfloat16(), gain.bfloat16(), small_eps),
        (f"a float64 (4, {short}) input, eps = {large_eps:g}",
         torch.randn(4, short, generator=gen, dtype=torch.float64),
         torch.rand(short, generator=gen, dtype=torch.float64) + 0.5, large_eps),
    ]


def _wrong(mistake: Callable, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor | None:
    """A typical mistake's output on these inputs, or None where it cannot run on them (a mean over
    dim −2 of a vector): the checker's own variants must never crash a check."""
    try:
        return mistake(x, weight, eps)
    except (RuntimeError, IndexError, ValueError):
        return None


def _call_kernel(fn: Callable, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The learner's kernel on one case; a broadcasting error gets the keepdim explanation."""
    try:
        return call_learner(KERNEL, fn, x, weight, eps, arg_names=("x", "weight", "eps"), in_place=KERNEL_IN_PLACE)
    except Hint as hint:
        if "must match the size of tensor" in hint.hint:
            raise Hint(KERNEL, f"{hint.hint} — {KEEPDIM_HINT}") from None
        raise


def _kernel_contract(fn: Callable) -> None:
    """1.1 beyond the values of its cases: a 4-D batch; gradients reach x and weight; called again, the same."""
    gen = fresh_generator()
    d = int(torch.randint(5, 17, (), generator=gen))
    x, again = torch.randn(2, 2, 3, d, generator=gen), torch.randn(2, 2, 3, d, generator=gen)
    weight, eps = torch.rand(d, generator=gen) + 0.5, _log_uniform(gen, 1e-3, 0.5)
    first = _call_kernel(fn, x, weight, eps)
    expect_close(KERNEL, first, functional.rms_norm(x, weight, eps), f"on a 4-D (2, 2, 3, {d}) batch, eps = {eps:g}, "
                 "the values differ from RMSNorm: normalise the last dimension, whatever comes before it",
                 shape_hint="the output must have the input's shape; keep the reduced dimension (keepdim=True)")
    expect_input_gradients(KERNEL, fn, (x, weight, eps), functional.rms_norm, ("x", "weight", "eps"))
    want_again = functional.rms_norm(again, weight, eps)
    expect_repeatable(KERNEL, fn, (x, weight, eps), first, (again, weight, eps), want_again)


@exercise(KERNEL)
def rms_norm(fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise 1.1: ``fn(x, weight, eps)`` must equal ``functional.rms_norm`` on every case."""
    refuse_library_object(KERNEL, fn, KERNEL_RECORD.refuses, KERNEL_RECORD.task)
    for description, x, weight, eps in _kernel_cases():
        want = functional.rms_norm(x, weight, eps)  # before the learner's call, which gets copies of x and weight
        got = _call_kernel(fn, x, weight, eps)
        if isinstance(got, torch.Tensor) and got.dtype == want.dtype and not _matches(got, want):
            for mistake, hint in MISTAKES.values():
                wrong = _wrong(mistake, x, weight, eps)
                if wrong is not None and not _matches(want, wrong) and _matches(got, wrong):
                    raise Hint(KERNEL, f"on {description}: {hint}")
            if x.dtype == torch.float16:
                raise Hint(KERNEL, f"on {description}: {MISTAKES['no upcast'][1]}")
        atol, rtol = tolerance(x.dtype)
        expect_close(
            KERNEL, got, want, f"on {description} the values differ from RMSNorm: x / sqrt(mean(x²) + eps) * weight",
            atol=atol, rtol=rtol, dtype_hint=KERNEL_DTYPE_HINT,
            shape_hint="the output must have the input's shape; keep the reduced dimension (keepdim=True)",
        )
    _kernel_contract(fn)
    refuse_library_calls(KERNEL, fn, KERNEL_RECORD.refused_calls, KERNEL_RECORD.task)
    refuse_library_ops(KERNEL, fn, (x, weight, eps), KERNEL_RECORD.refused_ops, KERNEL_RECORD.task)
    passed(KERNEL, "matches RMSNorm on float32 batches, a tiny and an all-zero row, a custom eps, fp16 and bf16")


KERNEL_NAME = "my_rms_norm"  # what Exercise 1.1 defines and 1.2's forward calls


def _learner_kernel(cls: object) -> object:
    """The learner's ``my_rms_norm`` (Exercise 1.1), where ``cls`` lives, or None.

    1.2's ``forward`` calls 1.1's kernel, so a wrong kernel makes a right module's output
    wrong too; the checker calls this kernel only to word that hint (``_kernel_first``).
    No verdict rests on it: a module passes only by matching the reference computed here.
    In the grader it is the name in the learner's namespace (as the grader finds every
    learner name); inline, the name as ``forward`` sees it, in the notebook's globals.
    """
    if is_remote(cls):
        kernel = cls.learner.lookup(KERNEL_NAME)
    else:
        namespace = getattr(getattr(cls, "forward", None), "__globals__", None)
        kernel = namespace.get(KERNEL_NAME) if isinstance(namespace, dict) else None
    return kernel if is_callable(kernel) else None


def _agrees(got: object, want: torch.Tensor) -> bool:
    """``got`` is ``want`` within ``expect_close``'s default tolerance (same shape, dtype and non-finite entries)."""
    return (dense_tensor(got) and got.shape == want.shape and got.dtype == want.dtype
            and torch.allclose(got.detach().double(), want.double(), rtol=1e-4, atol=1e-5, equal_nan=True))


def _kernel_first(kernel: object, x: torch.Tensor, weight: torch.Tensor, eps: float, want: torch.Tensor,
                  what: str, got: object = None) -> None:
    """Hint "make 1.1 pass first" when the learner's kernel is not RMSNorm on the module's inputs.

    ``want`` is RMSNorm of ``(x, weight, eps)`` and ``got`` what the module gave (None if it
    raised). The kernel gets the same values the module was given: if it is wrong there, the
    module cannot be judged, and blaming the module would send the learner to the wrong cell.
    """
    if kernel is None:
        return
    try:
        mine = call_learner(KERNEL, kernel, x, weight, eps, arg_names=("x", "weight", "eps"), in_place=KERNEL_IN_PLACE)
    except NotDone:
        raise Hint(MODULE, f"forward calls your `{KERNEL_NAME}`, and Exercise 1.1 is not done yet — write the "
                           "kernel first, then run this check again") from None
    except Hint as hint:
        raise Hint(MODULE, f"your `{KERNEL_NAME}` (Exercise 1.1) fails on {what}: {hint.hint} — make 1.1 pass "
                           "first, then run this check again") from None
    if _agrees(mine, want):
        return
    if got is not None and _agrees(got, mine):
        raise Hint(MODULE, f"on {what}, forward gives what your `{KERNEL_NAME}` gives, and that is not RMSNorm — "
                           "the mistake is in Exercise 1.1's kernel, not in the module: make 1.1 pass first (its "
                           "check names the mistake), then run this check again")
    raise Hint(MODULE, f"your `{KERNEL_NAME}` (Exercise 1.1) is not RMSNorm on {what}, so forward cannot be judged "
                       "yet — make 1.1 pass first, then run this check again")


def _module_output(module: object, x: torch.Tensor, kernel: object, weight: torch.Tensor, eps: float,
                   want: torch.Tensor, what: str) -> object:
    """``module(x)``; where it fails or is not ``want``, first the learner's kernel on the same values."""
    try:
        got = call_learner(MODULE, module, x, arg_names=("x",))
    except (Hint, NotDone):
        _kernel_first(kernel, x, weight, eps, want, what)
        raise
    if not _agrees(got, want):
        _kernel_first(kernel, x, weight, eps, want, what, got)
    return got


def _module_facts(module: object) -> dict:
    """What Exercise 1.2 needs to know about a learner's module, decided here from plain facts.

    The facts (type names, parameter shapes, the weight's type names and bytes) come from
    wherever the module lives; every question below is answered in this process.
    """
    raw = object_facts(module, ("weight",))
    facts = {"is_module": MODULE_CLASS in raw["types"], "n_params": n_parameters(raw)}
    weight = raw["attributes"].get("weight") if facts["is_module"] else None
    facts["has_weight"] = weight is not None
    types = weight["types"] if weight is not None else ["NoneType"]
    facts["weight_type"] = types[0].rsplit(".", 1)[-1]
    facts["is_parameter"] = PARAMETER_CLASS in types
    tensor = weight["tensor"] if weight is not None else None
    if isinstance(tensor, torch.Tensor):
        facts |= {
            "shape": list(tensor.shape), "dtype": str(tensor.dtype).removeprefix("torch."),
            "device": tensor.device.type,
            "ones": tensor.device.type != "meta" and bool((tensor.detach() == 1).all()),
        }
    return facts


def _module_contract(cls: type, module: object, x: torch.Tensor, gain: torch.Tensor, gen: torch.Generator) -> None:
    """1.2 beyond its values on a 3-D batch: the same in eval mode, other ranks, the input's gradient, a
    bfloat16 module's output, and a second call; ``module`` holds ``gain``."""
    d_model = x.shape[-1]
    first = call_learner(MODULE, module, x, arg_names=("x",))
    probe(cls, set_training, module, False)
    got = call_learner(MODULE, module, x, arg_names=("x",))
    probe(cls, set_training, module, True)
    expect_close(MODULE, got, functional.rms_norm(x, gain), "in eval mode (module.eval()) forward gives another "
                 "output: RMSNorm does the same in training and in evaluation")
    for shape in ((d_model,), (2, 2, 3, d_model)):
        xs = torch.randn(*shape, generator=gen)
        expect_close(MODULE, call_learner(MODULE, module, xs, arg_names=("x",)), functional.rms_norm(xs, gain),
                     f"on an input of shape {shape} forward differs from RMSNorm: it normalises the last dimension "
                     "of an input of any rank", shape_hint=f"forward must keep x's shape {shape}")
    expect_input_gradients(MODULE, module, (x,), lambda x: functional.rms_norm(x, gain), ("x",))
    half = call_learner(MODULE, cls, d_model, dtype=torch.bfloat16)
    xh = torch.randn(2, 3, d_model, generator=gen).bfloat16()
    atol, rtol = tolerance(torch.bfloat16)
    expect_close(MODULE, call_learner(MODULE, half, xh, arg_names=("x",)),
                 functional.rms_norm(xh, torch.ones(d_model, dtype=torch.bfloat16)),
                 "built with dtype=torch.bfloat16, forward on a bfloat16 input is wrong", atol=atol, rtol=rtol,
                 dtype_hint="a bfloat16 module given a bfloat16 input returns bfloat16 (the kernel casts back)")
    again = torch.randn(x.shape, generator=gen)
    expect_repeatable(MODULE, module, (x,), first, (again,), functional.rms_norm(again, gain))


@exercise(MODULE)
def rms_norm_module(cls: type) -> None:
    """Exercise 1.2: ``cls(d_model, eps=1e-5, device=None, dtype=None)`` behaves like ``RMSNorm``."""
    refuse_library_object(MODULE, cls, MODULE_RECORD.refuses, MODULE_RECORD.task)
    # every argument drawn: d_model (9 … 32, never the notebook's 8), eps, the dtype asked for
    gen = fresh_generator()
    d_model = int(torch.randint(9, 33, (), generator=gen))
    large_eps = _log_uniform(gen, 0.2, 2.0)
    dtype = (torch.float64, torch.float16, torch.bfloat16)[int(torch.randint(3, (), generator=gen))]
    module = call_learner(MODULE, cls, d_model)
    facts = _module_facts(module)
    expect(MODULE, facts["is_module"], f"{cls!r} did not build an nn.Module — subclass nn.Module")
    expect(MODULE, facts["has_weight"], "the module has no `weight` — store the gain as self.weight")
    expect(
        MODULE, facts["is_parameter"],
        f"self.weight is a {facts['weight_type']}, not an nn.Parameter — wrap it in nn.Parameter(...) so "
        "that module.parameters() and the optimiser see it",
    )
    expect(
        MODULE, tuple(facts["shape"]) == (d_model,),
        f"self.weight has shape {tuple(facts['shape'])}, expected ({d_model},) — one gain per channel: (d_model,)",
    )
    expect(
        MODULE, facts["ones"],
        "self.weight does not start at ones (initialised randomly?) — use torch.ones so a fresh RMSNorm "
        "only normalises",
    )
    expect(
        MODULE, facts["n_params"] == d_model,
        f"the module has {facts['n_params']} parameters, expected {d_model} — RMSNorm has a gain and nothing else "
        "(no bias)",
    )
    name = str(dtype).removeprefix("torch.")
    typed = _module_facts(call_learner(MODULE, cls, d_model, dtype=dtype))
    expect(MODULE, typed.get("dtype") == name, f"dtype=torch.{name} was ignored — pass dtype= on to torch.ones")
    meta = _module_facts(call_learner(MODULE, cls, d_model, device="meta"))
    expect(MODULE, meta.get("device") == "meta", "device='meta' was ignored — pass device= on to torch.ones")

    kernel = _learner_kernel(cls)
    x = torch.randn(2, 3, d_model, generator=gen)
    gain = torch.rand(d_model, generator=gen) + 0.5
    want, without_gain = functional.rms_norm(x, gain), functional.rms_norm(x, torch.ones(d_model))
    probe(cls, set_weight, module, gain)
    got = _module_output(module, x, kernel, gain, 1e-5, want, f"a (2, 3, {d_model}) batch with a random gain")
    if not _agrees(got, want) and _matches(got, without_gain):
        raise Hint(MODULE, "forward ignores self.weight — pass it to the kernel")
    expect_close(MODULE, got, want, "forward(x) differs from RMSNorm(x) with self.weight and self.eps",
                 shape_hint=f"forward must keep x's shape; {KEEPDIM_HINT}")
    expect(
        MODULE, isinstance(got, torch.Tensor) and got.requires_grad,
        "the output does not depend on self.weight through autograd — call the kernel with the parameter itself",
    )
    small = 0.1 * x  # mean square ≈ 0.01: an eps of 0.2 … 2 changes the result a lot
    ones = torch.ones(d_model)
    ignored_eps, want = functional.rms_norm(small, ones), functional.rms_norm(small, ones, large_eps)
    loose = call_learner(MODULE, cls, d_model, eps=large_eps)
    got = _module_output(loose, small, kernel, ones, large_eps, want, f"a small batch with eps = {large_eps:g}")
    if not _agrees(got, want) and _matches(got, ignored_eps):
        raise Hint(MODULE, "the module ignores eps — store it in __init__ (self.eps = eps) and pass it to the kernel")
    expect_close(MODULE, got, want, f"with eps={large_eps:g} the output is wrong")
    _module_contract(cls, module, x, gain, gen)
    # the step last: a kernel that drops eps (1e-5 here) may agree above yet not after the step; the eps case
    # sends it to 1.1 first
    expect_trains(MODULE, cls, module, lambda x, weight: functional.rms_norm(x, weight), {"weight": gain}, x,
                  "after one gradient step the output is wrong — self.weight must be the nn.Parameter forward uses")
    refuse_library_calls(MODULE, cls, MODULE_RECORD.refused_calls, MODULE_RECORD.task)
    refuse_library_ops(MODULE, module, (x,), MODULE_RECORD.refused_ops, MODULE_RECORD.task)
    passed(MODULE, "gain is a Parameter of ones with the right shape, dtype and device; forward uses weight and eps")


PREDICT_CHOICES = ("inf", "nan", "0", "1", "90000")


def _describe(t: torch.Tensor) -> str:
    """Which of ``PREDICT_CHOICES`` a tensor's values all are ("inf", "nan", "0", "1", "90000")."""
    values = t.double().flatten()
    for name, test in (
        ("nan", torch.isnan(values)), ("inf", torch.isinf(values)), ("0", values == 0),
        ("90000", values == 90000), ("1", (values.abs() - 1).abs() < 0.01),
    ):
        if bool(test.all()):
            return name
    return "something else"


def _overflowing_fp16_vector() -> torch.Tensor:
    """An fp16 vector of the question's kind, drawn afresh: every x² overflows fp16, the RMS itself fits.

    The question names [300, −300, 300, −300]; the answers are decided on a drawn vector of
    the same kind (4 to 8 entries of both signs, |x| from 256 to 2048 log-uniform, so
    x² ≥ 65536 > 65504 while the RMS ≤ 2048), so they are facts about the kind, not one table row.
    """
    gen = fresh_generator()
    n = int(torch.randint(4, 9, (), generator=gen))
    n_positive = int(torch.randint(1, n, (), generator=gen))
    magnitude = (torch.rand(n, generator=gen, dtype=torch.float64) * (math.log(2048) - math.log(256))
                 + math.log(256)).exp()
    sign = torch.tensor([1.0] * n_positive + [-1.0] * (n - n_positive), dtype=torch.float64)
    return (magnitude * sign[torch.randperm(n, generator=gen)]).to(torch.float16)


@exercise(PREDICT)
def fp16_prediction(square: str, normalised: str) -> None:
    """Exercise 1.3: predictions of fp16 300² and of RMSNorm without upcast on [300, −300, 300, −300]."""
    x = _overflowing_fp16_vector()
    actual_square = _describe(x[:1] ** 2)
    expect_choice(
        PREDICT, square, PREDICT_CHOICES, actual_square,
        "first answer: 300² = 90000 is larger than the largest finite fp16 number (65504), so the "
        "square rounds to inf",
    )
    actual_norm = _describe(functional.rms_norm(x, torch.ones(len(x), dtype=torch.float16), upcast=False))
    expect_choice(
        PREDICT, normalised, PREDICT_CHOICES, actual_norm,
        "second answer: the mean of the squares is inf, so the RMS is inf, and a finite x divided by inf is 0 — "
        "every output is 0 (nan would need inf/inf or 0/0)",
    )
    passed(PREDICT, "fp16 300² = inf (the fp16 maximum is 65504), so RMS = inf and x / inf = 0 for every entry")
