"""Checkers for notebook 06 (your Transformer): every module of the CS336 interface, built by the learner.

Each check draws every constructor argument afresh (``fresh_generator``: widths, heads, d_ff,
θ, the context length, the vocabulary, the number of layers, never the sizes the checks
used to send), builds the learner's class with them, checks its parameter names and shapes
(the state-dict names the handout grades), loads the grader's weights into it and compares
outputs on drawn inputs with the library's module holding those same weights. A wrong
output is compared with the same weights run through a typical mistake (post-norm wiring,
a missing final norm, RoPE positions not broadcast over the heads, ...), and a match names
that mistake. Every module with weights then takes one gradient step where it lives, and
its output afterwards must match the step the grader computes (``_expect_trains``).

What the learner's kernel *reports* about its objects (types, parameter names, buffers,
shared storage, its state dict) only ever produces a hint that fails the check: a kernel
that lies about them hides at most its own mistake, and a pass rests on the values its
module returns for inputs the grader chose. The fresh initialisation is read the same way:
a fresh Linear applied to the identity matrix returns Wᵀ, a fresh Embedding applied to
every id returns its table.

- 6.1 ``linear(cls)``: ``cls(in_features, out_features)``, weight (out, in), no bias, initialised
  N(0, 2/(in + out)) truncated at ±3σ.
- 6.2 ``embedding(cls)``: ``cls(num_embeddings, embedding_dim)``, N(0, 1) truncated at ±3.
- 6.3 ``swiglu(cls)``: ``cls(d_model, d_ff)`` owning ``w1``, ``w2``, ``w3``.
- 6.4 ``rope(cls)``: ``cls(theta, d_k, max_seq_len)``, cos/sin in buffers not saved in the state dict.
- 6.5 ``attention(cls)``: ``cls(d_model, num_heads, max_seq_len, theta)``, causal, RoPE on q and k.
- 6.6 ``block(cls)``: ``cls(d_model, num_heads, d_ff, max_seq_len, theta)``, pre-norm.
- 6.7 ``language_model(cls)``: ``cls(vocab_size, context_length, d_model, num_layers, num_heads, d_ff,
  rope_theta)``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.func import functional_call

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.checks.attention import Layer, attention_mistake
from prenorm_lib.checks.block import PRE_NORM_MISTAKES
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    BF16_RELATIVE,
    Hint,
    call_learner,
    describe,
    exercise,
    expect,
    expect_close,
    expect_trains,
    finite_number,
    fresh_generator,
    object_facts,
    passed,
    probe,
    refuse_library_calls,
    refuse_library_object,
)
from prenorm_lib.checks.probes import (
    MODULE_CLASS,
    buffers_of,
    cached_keys_shape,
    input_gradient,
    load_state,
    set_eval,
    set_train,
    shares_weight,
    start_kv_cache,
    state_dict_of,
    stop_kv_cache,
    submodule,
    tensor_kinds,
)
from prenorm_lib.ffn import SwiGLU
from prenorm_lib.lab.accounting import FLOP_PARTS, Shape, measured_flops, measured_parameters
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM
from prenorm_lib.rope import RotaryPositionalEmbedding

__all__ = ["accounting", "attention", "block", "cached_attention", "embedding", "language_model", "linear", "rope",
           "swiglu"]

LINEAR, EMBEDDING, SWIGLU, ROPE, ATTENTION, BLOCK, LM = "6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7"
ACCOUNTING, CACHED = "6.8", "6.9"

TRUNCATED_STD = 0.98658  # the standard deviation of N(0, 1) truncated at ±3
TRUNCATED_AT_2_STD = 0.87962  # ... and at ±2 (trunc_normal_'s default cut-offs, for std = 1)
ATOL = 1e-5
TRAIN_LR = 0.01  # one SGD step this long moves every output far beyond ATOL, and float32 still agrees


# --- the sizes of one check, drawn afresh ------------------------------------------------------


class Sizes(NamedTuple):
    """The constructor arguments of one check of 6.3-6.7, drawn by ``_sizes``."""

    d_model: int
    num_heads: int
    d_ff: int
    max_seq_len: int
    theta: float
    vocab: int
    num_layers: int


def _pick(gen: torch.Generator, options: tuple) -> Any:
    return options[int(torch.randint(len(options), (), generator=gen))]


def _between(gen: torch.Generator, low: int, high: int) -> int:
    """A whole number drawn uniformly from low … high (both included)."""
    return int(torch.randint(low, high + 1, (), generator=gen))


def _theta(gen: torch.Generator) -> float:
    """θ log-uniform over 200 … 200 000, whole, and never within 7 000 … 14 000 of the usual 10 000: a RoPE
    that writes in 10 000 instead of reading its argument rotates visibly differently on every draw."""
    theta = 10000.0
    while 7000.0 <= theta <= 14000.0:
        theta = float(round(math.exp(math.log(200) + (math.log(2e5) - math.log(200))
                                     * float(torch.rand((), generator=gen, dtype=torch.float64)))))
    return theta


def _sizes(gen: torch.Generator) -> Sizes:
    """Every size of a 6.3-6.7 check drawn, small enough to keep notebook 06's Run All fast.

    The checks used to send d_model 24, 3 heads, d_ff 40, 16 positions, θ = 10 000, 30 tokens
    and 2 layers; none of these is ever drawn, so a module that writes one of them in instead
    of reading its argument fails every check: 2, 4 or 5 heads of 4, 6 or 8 channels (even,
    for RoPE; d_model ≠ 24), d_ff 8 … d_model + 24 above d_model (never 40, never square, so a
    transposed weight shows in its shape), a context of 33 … 96 positions (beyond the 16 and
    the 32 earlier checks reached, so a table of either size fails), 40 … 90 tokens, 3 or 4
    layers (never one: layers that share one block must show).
    """
    num_heads, d_head = _pick(gen, (2, 4, 5)), _pick(gen, (4, 6, 8))
    while num_heads * d_head == 24:
        num_heads, d_head = _pick(gen, (2, 4, 5)), _pick(gen, (4, 6, 8))
    d_model = num_heads * d_head
    d_ff = 40
    while d_ff == 40:
        d_ff = d_model + _between(gen, 8, d_model + 24)
    return Sizes(d_model, num_heads, d_ff, _between(gen, 33, 96), _theta(gen), _between(gen, 40, 90),
                 _pick(gen, (3, 4)))


def _length(gen: torch.Generator, max_seq_len: int) -> int:
    """A sequence length T that leaves room: 4 … max_seq_len − 4 (so some positions are never used)."""
    return _between(gen, 4, max_seq_len - 4)


def _positions(gen: torch.Generator, T: int, max_seq_len: int) -> torch.Tensor:
    """T sorted positions out of 0 … max_seq_len − 1, never 0 … T−1, always including the last one
    (so a cos/sin table shorter than max_seq_len shows)."""
    rest = torch.randperm(max_seq_len - 1, generator=gen)[:T - 1]
    return torch.cat((rest, torch.tensor([max_seq_len - 1]))).sort().values


# --- shared steps ----------------------------------------------------------------------------


def _seeded(seed_from: torch.Generator, build: Callable[[], nn.Module]) -> nn.Module:
    """A library module initialised from a seed drawn from ``seed_from``, without touching the caller's RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**62, (), generator=seed_from)))
        return build().eval()


def _build(ex: str, cls: Any, *args: Any) -> Any:
    """``cls(*args)``; a type the kernel reports as no nn.Module is a hint (it can only fail the check)."""
    module = call_learner(ex, cls, *args)
    facts = object_facts(module)
    expect(ex, MODULE_CLASS in facts["types"], f"{describe(module)} is not an nn.Module — subclass nn.Module and "
           "call super().__init__() first")
    return module


def _expect_names(ex: str, module: Any, library: nn.Module, names_hint: str) -> None:
    """The learner's state dict has the library's names and shapes (the handout's); a hint only: a kernel
    that reports them falsely still has to compute the library's outputs with the grader's weights."""
    mine = {name: tuple(t.shape) for name, t in probe(module, state_dict_of, module).items()}
    want = {name: tuple(t.shape) for name, t in library.state_dict().items()}
    missing, extra = sorted(set(want) - set(mine)), sorted(set(mine) - set(want))
    if missing or extra:
        parts = [f"missing {', '.join(missing[:6])}" if missing else "",
                 f"unexpected {', '.join(extra[:6])}" if extra else ""]
        raise Hint(ex, f"the state dict's names differ from the handout's ({'; '.join(p for p in parts if p)}) — "
                       f"{names_hint}")
    for name, shape in want.items():
        if mine[name] != shape:
            flipped = " (transposed: weights are stored (out_features, in_features))" \
                if mine[name] == shape[::-1] else ""
            raise Hint(ex, f"{name} has shape {mine[name]}, expected {shape}{flipped}")


def _load_both_ways(ex: str, module: Any, library: nn.Module) -> None:
    """The library's weights load into the learner's module, and the learner's into a copy of the library's.

    The copy only tells whether the learner's state dict loads (a hint); the outputs are
    compared with ``library`` itself, which holds the grader's weights, never the learner's report.
    """
    error = probe(module, load_state, module, state_dict_of(library))
    expect(ex, not error, f"the library's state dict does not load into your module: {error}")
    probe(module, set_eval, module)
    error = load_state(copy.deepcopy(library), probe(module, state_dict_of, module))
    expect(ex, not error, f"your state dict does not load into the library's module: {error}")


ROUNDING_ROOM = 4  # how many times the library's own float32 drift a correct module may take (see _rounding)


def _in(dtype: torch.dtype, inputs: tuple) -> tuple:
    """``inputs`` with every floating-point tensor in ``dtype`` (token ids, positions and None as they are)."""
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)


def _with_float32_tables(library: nn.Module) -> nn.Module:
    """A copy of ``library`` whose RoPE tables are float32 from end to end, as the handout writes them (and Hugging
    Face's Llama builds them): θ^(2k/d), its inverse and every angle p·θ^(−2k/d) in float32, not float64 cast once."""
    copied = copy.deepcopy(library)
    for rope in copied.modules():
        if isinstance(rope, RotaryPositionalEmbedding):
            speeds = 1.0 / rope.theta ** (torch.arange(0, rope.d_k, 2, dtype=torch.float32) / rope.d_k)
            angles = torch.outer(torch.arange(rope.max_seq_len, dtype=torch.float32), speeds)
            rope.cos, rope.sin = angles.cos().to(rope.cos.device), angles.sin().to(rope.sin.device)
    return copied


def _rounding(library: nn.Module, run: Callable[[nn.Module, torch.dtype], torch.Tensor], own: torch.Tensor) -> float:
    """How far float32 rounding may move a correct module's output on this draw, measured on the library itself.

    ``own`` is ``run(library, torch.float32)``, the reference the learner's output is compared with. A stack of float32
    layers amplifies rounding where a token's stream is small before a norm: on one drawn 3-layer model (6.7, 92
    positions) the library's own logits missed the same model computed in float64 by 1.3e-5, the handout's form by
    1.8e-6, and the check at 1e-5 told the handout it was wrong. So the room is ``ROUNDING_ROOM`` times the furthest
    the library's float32 result lands from its float64 one (weights and inputs cast up), with its own RoPE table
    and with one built in float32 from end to end (the handout's). Correct learners' float32 errors are their own
    rounding through the same model, so of the library's size: ``make false-hints`` holds three of them to it
    (docs/measurements.md#false-hints), and a weight the step misses still lands more than ten times the widened
    tolerance away (tests/course/test_checks_model_inputs.py).
    """
    exact = run(copy.deepcopy(library).double(), torch.float64)
    witnesses = (own, run(_with_float32_tables(library), torch.float32))
    return ROUNDING_ROOM * max(float((w.detach().double() - exact.detach()).abs().max()) for w in witnesses)


def _answer(library: nn.Module, *inputs: Any) -> tuple[torch.Tensor, float]:
    """The library's output on ``inputs`` and the atol a correct module's output is held to: ATOL and the room
    float32 rounding needs on this draw (``_rounding``)."""
    def run(module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        with torch.no_grad():
            return module(*_in(dtype, inputs))

    want = run(library, torch.float32)
    return want, ATOL + _rounding(library, run, want)


def _compare(ex: str, got: Any, want: torch.Tensor, label: str,
             mistakes: list[tuple[Callable[[], torch.Tensor], str]] = (), atol: float = ATOL) -> None:
    """``got`` equals ``want``; if not, the first mistake whose output it matches is the hint."""
    close = isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype and \
        bool(torch.allclose(got.detach().double(), want.double(), atol=atol, rtol=1e-4))
    if not close and isinstance(got, torch.Tensor):
        for variant, hint in mistakes:
            with torch.no_grad():
                other = variant()
            if got.shape == other.shape and bool(torch.allclose(got.detach().double(), other.double(),
                                                                atol=atol, rtol=1e-4)):
                raise Hint(ex, f"{hint} [case: {label}]")
    expect_close(ex, got, want, f"the output differs from the library's with the same weights [case: {label}]",
                 atol=atol, shape_hint=f"the output has the wrong shape [case: {label}]",
                 dtype_hint=f"keep the input's dtype [case: {label}]")


def _fresh_weight(ex: str, module: Any, identity: torch.Tensor, shape: tuple[int, int], what: str,
                  check: torch.Tensor, lookup: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                  arg: str) -> torch.Tensor:
    """The fresh module's weight, read from its outputs: ``module(identity)`` (Wᵀ for a Linear applied to
    the identity matrix, the table for an Embedding applied to every id), after which ``module(check)``
    must equal ``lookup(check, that weight)``, so the values read are the ones forward uses."""
    table = call_learner(ex, module, identity, arg_names=(arg,))
    expect(ex, isinstance(table, torch.Tensor) and tuple(table.shape) == shape,
           f"{what} returned {tuple(table.shape) if isinstance(table, torch.Tensor) else describe(table)}, "
           f"expected shape {shape}")
    got = call_learner(ex, module, check, arg_names=(arg,))
    expect_close(ex, got, lookup(check, table.detach()), f"a fresh module's outputs are not {what}'s rows "
                 "combined as the handout says: forward must use the weight it owns, and nothing else",
                 atol=ATOL, shape_hint="the output has the wrong shape")
    return table.detach()


def _init_statistics(ex: str, w: torch.Tensor, std: float, formula: str, others: dict[str, float]) -> None:
    """A freshly initialised weight (read from outputs) looks like N(0, std²) truncated at ±3·std."""
    w = w.double().flatten()
    finite = bool(torch.isfinite(w).all())
    measured, largest = (float(w.std()), float(w.abs().max())) if finite else (0.0, 0.0)
    expect(ex, finite and measured > 0, "the fresh weight is not filled with random numbers "
           "(torch.empty leaves whatever was in memory): initialise it with nn.init.trunc_normal_")
    expected = std * TRUNCATED_STD
    if largest <= 2 * std * (1 + 1e-4) and abs(measured / (std * TRUNCATED_AT_2_STD) - 1) < 0.05:
        raise Hint(ex, f"the fresh weight is cut at |w| = {largest:.4g} ≈ 2σ, not 3σ: trunc_normal_'s a and b are "
                       "absolute cut-offs, and their defaults are −2 and 2")
    if abs(measured / expected - 1) > 0.05:
        named = next((f" — that is {name}" for name, value in others.items()
                      if abs(measured / (value * TRUNCATED_STD) - 1) < 0.05
                      or abs(measured / value - 1) < 0.05), "")
        raise Hint(ex, f"the fresh weight's standard deviation is {measured:.4g}, expected ≈ {expected:.4g}: "
                       f"{formula}, truncated at ±3σ{named}")
    expect(ex, largest <= 3 * std * (1 + 1e-4), f"the fresh weight reaches |w| = {largest:.4g} > 3σ = "
           f"{3 * std:.4g}: it is not truncated at ±3σ (trunc_normal_'s a and b are absolute cut-offs, "
           "not multiples of std)")
    mean_error = abs(float(w.mean())) / (measured / math.sqrt(w.numel()))
    expect(ex, mean_error < 6, f"the fresh weight's mean is {float(w.mean()):.3g}, expected 0")


def _expect_trains(ex: str, module: Any, library: nn.Module, x: torch.Tensor, after: torch.Tensor,
                   what: str, lr: float = TRAIN_LR, deep: bool = False) -> None:
    """``core.expect_trains`` with ``library`` (holding the weights the learner's module was given) as the
    reference, run on its parameters through ``torch.func.functional_call``; ``after`` may be token ids.

    ``deep`` (a block, a model): after the step a correct float32 module written another way (einsum,
    complex RoPE) lands up to ≈ 1 × ATOL + 1e-4·|out| from the reference (worst of 100 models of 3-4
    layers over 96 positions); a weight the step misses lands ≥ 500 × that away. So deep modules are
    compared 10 × looser, and with the room rounding needs on the draw (``_rounding``, the whole step
    run again in float64 and with a float32 RoPE table): a step's outputs can be large, and without the
    room 6.7 told a correct model it was wrong in 4 of 20,000 drawn checks, in the logits and after the
    step (``make false-hints``; the three it listed are replayed in tests/course/test_false_hints.py)."""
    def room(before: torch.Tensor, direction: torch.Tensor, inputs: torch.Tensor) -> float:
        """``_rounding`` of the whole step: the gradient, the step and the output on ``inputs`` afterwards."""
        def run(reference: nn.Module, dtype: torch.dtype) -> torch.Tensor:
            moving = {name: w.detach().to(dtype).requires_grad_(True) for name, w in library.named_parameters()}
            (functional_call(reference, moving, _in(dtype, (before,))) * direction.to(dtype)).sum().backward()
            with torch.no_grad():
                stepped = {name: w - lr * w.grad for name, w in moving.items()}
                return functional_call(reference, stepped, _in(dtype, (inputs,)))

        return _rounding(library, run, run(library, torch.float32))

    expect_trains(ex, module, module, lambda inputs, **weights: functional_call(library, weights, (inputs,)),
                  dict(library.named_parameters()), x,
                  f"after one gradient step the output is wrong — every weight ({what}) must be an nn.Parameter of "
                  "the module (module.parameters() is what the optimiser trains) that forward uses, each its own",
                  lr=lr, after=after, atol=10 * ATOL if deep else ATOL, rtol=1e-3 if deep else 1e-4,
                  room=room if deep else None)


RANKS_HINT = ("the handout's modules take inputs of any number of batch dimensions, or none: (..., T, d) — write "
              "forward with x.shape[-1] and x.shape[-2], not B, T, d = x.shape")


def _call_ranked(ex: str, module: Any, args: tuple, label: str, arg: str = "x") -> Any:
    """The learner's module on ``args``; a crash on an input that is not 3-D gets the batch-dimensions hint."""
    try:
        return call_learner(ex, module, *args, arg_names=(arg, "token_positions"))
    except Hint as hint:
        x, usual = args[0], 2 if arg == "token_ids" else 3
        if "your code raised" in hint.hint and isinstance(x, torch.Tensor) and x.ndim != usual:
            raise Hint(ex, f"{hint.hint} — {RANKS_HINT} [case: {label}]") from None
        raise


def _expect_cases(ex: str, module: Any, library: nn.Module, cases: list[tuple[str, torch.Tensor]],
                  mistakes: Callable[[torch.Tensor], list] | None = None, arg: str = "x", again: bool = False) -> None:
    """The module's output on each ``(label, input)`` equals the library's (``again``: a repeated call, so a module
    right only on its first calls shows, after the library's weights are loaded once more: the gradient step moved
    them); ``mistakes(x)`` names typical wrong outputs for an input."""
    if again:
        error = probe(module, load_state, module, state_dict_of(library))
        expect(ex, not error, f"the library's state dict no longer loads into your module: {error}")
        probe(module, set_eval, module)
    for label, x in cases:
        label = f"{label}{', called again after the others' if again else ''}"
        got = _call_ranked(ex, module, (x,), label, arg)
        want, atol = _answer(library, x)
        _compare(ex, got, want, label, [] if mistakes is None else mistakes(x), atol=atol)


# --- the contract of a module: batch ranks, both modes, the input's gradient, dtype= and device= ---------


def _ranks(gen: torch.Generator, T: int, d: int) -> list[tuple[str, torch.Tensor]]:
    """x of three batch ranks: (B, T, d), (T, d) and (2, B, T, d); a module right only for 3-D input shows."""
    B = _between(gen, 2, 3)
    return [(f"x ({B}, {T}, {d})", torch.randn(B, T, d, generator=gen)),
            (f"x ({T}, {d}), no batch dimension", torch.randn(T, d, generator=gen)),
            (f"x (2, {B}, {T}, {d}), two batch dimensions", torch.randn(2, B, T, d, generator=gen))]


def _close(got: Any, want: torch.Tensor, atol: float = ATOL, rtol: float = 1e-4) -> bool:
    return (isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
            and bool(torch.allclose(got.detach().double(), want.detach().double(), atol=atol, rtol=rtol)))


MODES_HINT = ("in training mode (module.train(), which every training loop sets) the output differs from evaluation "
              "mode: the handout's modules have no dropout and nothing else that depends on the mode — the causal "
              "mask, too, applies in both")
GRADIENT_HINT = ("the gradient with respect to the input differs from the library's: forward cuts x off from "
                 "autograd somewhere (x.detach(), x.data, torch.no_grad(), a NumPy round trip) — gradients must "
                 "flow back through the input, the residual path included")


def _expect_modes_and_gradient(ex: str, module: Any, reference: Callable[..., torch.Tensor], args: tuple, label: str,
                               train_mistakes: list[tuple[Callable[[], torch.Tensor], str]] = (),
                               float_input: bool = True, atol: float = ATOL) -> None:
    """In training mode ``module(*args)`` equals ``reference(*args)`` (eval and train mode alike), and, for a float
    input, so does the gradient with respect to it. The module is left in training mode (for the gradient step)."""
    probe(module, set_train, module)
    got = call_learner(ex, module, *args, arg_names=("x", "token_positions"))
    with torch.no_grad():
        want = reference(*args)
    if not _close(got, want, atol):
        hint = next((h for variant, h in train_mistakes if _close(got, variant(), atol)), MODES_HINT)
        expect_close(ex, got, want, f"{hint} [case: {label}, module.train()]", atol=atol,
                     shape_hint=f"{MODES_HINT} [case: {label}, module.train()]",
                     dtype_hint=f"{MODES_HINT} [case: {label}, module.train()]")
    if not float_input:
        return
    direction = torch.randn(want.shape, generator=fresh_generator())
    x = args[0].detach().clone().requires_grad_(True)
    (reference(x, *args[1:]) * direction).sum().backward()
    grad = probe(module, input_gradient, module, args, direction)
    expect(ex, not isinstance(grad, str), f"the gradient with respect to the input could not be computed: your code "
           f"raised {grad} [case: {label}]")
    expect(ex, isinstance(grad, torch.Tensor), f"{GRADIENT_HINT}: no gradient reached x [case: {label}]")
    expect_close(ex, grad, x.grad, f"{GRADIENT_HINT} [case: {label}]", atol=max(1e-4, atol), rtol=1e-3,
                 shape_hint=f"{GRADIENT_HINT} [case: {label}]", dtype_hint=f"{GRADIENT_HINT} [case: {label}]")


DTYPE_HINT = ("the constructor's dtype= is ignored: create every parameter with dtype=dtype (and device=device), "
              "as the handout's interface asks")
DEVICE_HINT = ("the constructor's device= is ignored: create every parameter and buffer on device (the 'meta' "
               "device here, one without memory, as a GPU would be another)")


def _build_on(ex: str, cls: Any, args: tuple, **where: Any) -> Any:
    """``cls(*args, **where)`` with ``dtype=`` or ``device=``; a constructor without them is a hint."""
    try:
        return call_learner(ex, cls, *args, **where)
    except Hint as hint:
        if "unexpected keyword argument" in hint.hint:
            raise Hint(ex, f"the constructor takes no {next(iter(where))}= ({hint.hint}); the handout's modules take "
                           "device=None and dtype=None (RoPE: device=None)") from None
        raise


def _expect_dtypes(ex: str, cls: Any, args: tuple, library: nn.Module, inputs: tuple, label: str,
                   with_dtype: bool = True, atol: float = ATOL) -> None:
    """In float64 and in bfloat16 the module keeps the input's dtype and the library's values.

    Built with ``dtype=`` (unless ``with_dtype`` is False: RoPE takes none, its tables are derived) and
    given the library's weights in that dtype, on ``inputs`` in that dtype (token ids stay ids), the output
    has the dtype and equals, within the dtype's rounding, the library's computed in float64 from the same
    rounded weights and inputs.
    """
    x, rest = inputs[0], inputs[1:]
    for dtype, name in ((torch.float64, "float64"), (torch.bfloat16, "bfloat16")):
        case = f"{label}, {name}" + (f", built with dtype=torch.{name}" if with_dtype else "")
        weights = {k: v.to(dtype) for k, v in library.state_dict().items()}
        if with_dtype:
            module = _build_on(ex, cls, args, dtype=dtype)
            wrong = [n for n, kind, _, role in probe(module, tensor_kinds, module)
                     if role == "parameter" and kind != str(dtype)]
            expect(ex, not wrong, f"{DTYPE_HINT}: {wrong[0] if wrong else ''} is not {name} [case: {case}]")
            error = probe(module, load_state, module, weights)
            expect(ex, not error, f"the library's {name} state dict does not load into your module: {error}")
        else:
            module = call_learner(ex, cls, *args)
        probe(module, set_eval, module)
        x_in = x.to(dtype) if x.is_floating_point() else x
        reference = copy.deepcopy(library).double()
        if with_dtype:
            reference.load_state_dict({k: v.double() for k, v in weights.items()})
        with torch.no_grad():
            want = reference(x_in.double() if x.is_floating_point() else x_in, *rest)
        got = call_learner(ex, module, x_in, *rest, arg_names=("x", "token_positions"))
        keep = f"keep the input's dtype: a {name} input gives a {name} output [case: {case}]"
        if dtype is torch.float64:
            expect_close(ex, got, want, f"the output differs from the library's with the same weights [case: {case}]",
                         atol=atol, shape_hint=f"the output has the wrong shape [case: {case}]", dtype_hint=keep)
            continue
        expect(ex, isinstance(got, torch.Tensor) and got.dtype == dtype, f"returned "
               f"{str(got.dtype).removeprefix('torch.') if isinstance(got, torch.Tensor) else describe(got)} — {keep}")
        expect(ex, got.shape == want.shape, f"the output has the wrong shape [case: {case}]")
        error = float((got.detach().double() - want).norm() / want.norm().clamp_min(1e-12))
        expect(ex, math.isfinite(error) and error < BF16_RELATIVE, f"in {name} the output is {error:.1%} away from "
               f"the library's (relative), more than {name}'s rounding explains [case: {case}]")


def _expect_device(ex: str, cls: Any, args: tuple) -> None:
    """Built with ``device="meta"``, every parameter and buffer is on the meta device."""
    module = _build_on(ex, cls, args, device="meta")
    elsewhere = [f"{n} ({role}) is on {device}" for n, _, device, role in probe(module, tensor_kinds, module)
                 if device != "meta"]
    expect(ex, not elsewhere, f"{DEVICE_HINT}: {elsewhere[0] if elsewhere else ''}")


# ---------------------------------------------------------------------------------------
# 6.1 Linear and 6.2 Embedding
# ---------------------------------------------------------------------------------------


def _linear_sizes(gen: torch.Generator) -> tuple[int, int]:
    """(in_features, out_features): one 64 … 128, the other 1.6 … 2.4 times as large, in either order.

    Thousands of weights measure the initial σ to about 1 %; the two widths far apart tell
    2/(in + out) from 1/in_features and 1/out_features; neither is 256 or 384 (the sizes the
    check used to send), and their sum never 640, so σ written in for those fails.
    """
    small = _between(gen, 64, 128)
    large = int(small * (1.6 + 0.8 * float(torch.rand((), generator=gen))))
    return (small, large) if bool(torch.rand((), generator=gen) < 0.5) else (large, small)


@exercise(LINEAR)
def linear(cls: type) -> None:
    """Exercise 6.1: ``cls(in_features, out_features)`` is the handout's bias-free Linear."""
    refuse_library_object(LINEAR, cls, EXERCISES[LINEAR].refuses, EXERCISES[LINEAR].task)
    gen = fresh_generator()
    d_in, d_out = _linear_sizes(gen)
    module = _build(LINEAR, cls, d_in, d_out)
    library = _seeded(gen, lambda: Linear(d_in, d_out))
    _expect_names(LINEAR, module, library, "a bias-free Linear owns one parameter, `weight`")
    fresh = _fresh_weight(LINEAR, module, torch.eye(d_in), (d_in, d_out), f"Linear({d_in}, {d_out}) applied to the "
                          f"({d_in}, {d_in}) identity matrix", torch.randn(3, d_in, generator=gen),
                          lambda x, w_t: x @ w_t, "x")
    std = math.sqrt(2 / (d_in + d_out))
    _init_statistics(LINEAR, fresh, std, f"σ² = 2 / (in_features + out_features) = 2 / {d_in + d_out}",
                     {"N(0, 1)": 1.0, "σ² = 1/in_features": d_in**-0.5, "σ² = 1/out_features": d_out**-0.5,
                      "σ = 2 / (in + out), a standard deviation where the handout means a variance":
                      2 / (d_in + d_out)})
    _load_both_ways(LINEAR, module, library)
    cases = [*_ranks(gen, _between(gen, 2, 6), d_in), (f"x ({d_in},)", torch.randn(d_in, generator=gen))]
    _expect_cases(LINEAR, module, library, cases)
    _expect_modes_and_gradient(LINEAR, module, library, (cases[0][1],), cases[0][0])
    _expect_trains(LINEAR, module, library, torch.randn(4, d_in, generator=gen),
                   torch.randn(2, 3, d_in, generator=gen), "weight")
    _expect_cases(LINEAR, module, library, cases[:1], again=True)
    _expect_dtypes(LINEAR, cls, (d_in, d_out), library, (cases[0][1],), cases[0][0])
    _expect_device(LINEAR, cls, (d_in, d_out))
    passed(LINEAR, "weight (out, in), no bias, N(0, 2/(in+out)) truncated at ±3σ; y = x Wᵀ with the library's "
           "weights, for drawn widths and 1 to 4 dimensions, in train and eval mode, float32, float64 and bfloat16, "
           "on any device; the input's gradient and one gradient step match")


@exercise(EMBEDDING)
def embedding(cls: type) -> None:
    """Exercise 6.2: ``cls(num_embeddings, embedding_dim)`` is the handout's Embedding."""
    refuse_library_object(EMBEDDING, cls, EXERCISES[EMBEDDING].refuses, EXERCISES[EMBEDDING].task)
    gen = fresh_generator()  # 200 … 400 rows of 32 … 64: never the 512 × 96 the check used to send
    vocab, dim = _between(gen, 200, 400), _between(gen, 32, 64)
    module = _build(EMBEDDING, cls, vocab, dim)
    library = _seeded(gen, lambda: Embedding(vocab, dim))
    _expect_names(EMBEDDING, module, library, "an Embedding owns one parameter, `weight`, "
                  "(num_embeddings, embedding_dim)")
    fresh = _fresh_weight(EMBEDDING, module, torch.arange(vocab), (vocab, dim), f"Embedding({vocab}, {dim}) applied "
                          f"to every id 0 … {vocab - 1}", torch.randint(vocab, (2, 5), generator=gen),
                          lambda ids, table: table[ids], "token_ids")
    _init_statistics(EMBEDDING, fresh, 1.0, "N(0, 1)",
                     {"Linear's σ² = 2 / (in + out)": math.sqrt(2 / (vocab + dim)), "σ² = 1/embedding_dim":
                      dim**-0.5})
    _load_both_ways(EMBEDDING, module, library)
    repeats = torch.tensor([3, 3, 0, vocab - 1, 3])
    batch, T = _between(gen, 1, 3), _between(gen, 3, 12)
    cases = [(f"token_ids ({batch}, {T})", torch.randint(vocab, (batch, T), generator=gen)),
             ("token_ids (5,) with repeats and the first and last id", repeats),
             (f"token_ids (2, {batch}, {T})", torch.randint(vocab, (2, batch, T), generator=gen))]
    _expect_cases(EMBEDDING, module, library, cases, arg="token_ids")
    _expect_modes_and_gradient(EMBEDDING, module, library, (cases[0][1],), cases[0][0], float_input=False)
    # every id once in the step (in a shuffled order), so a row that cannot learn (padding_idx) shows afterwards
    _expect_trains(EMBEDDING, module, library, torch.randperm(vocab, generator=gen).view(1, vocab),
                   torch.cat((torch.arange(vocab), repeats)), "weight, every row of it: a row that never learns, "
                   "as padding_idx makes one, shows here")
    _expect_cases(EMBEDDING, module, library, cases[:1], arg="token_ids", again=True)
    _expect_dtypes(EMBEDDING, cls, (vocab, dim), library, (cases[0][1],), cases[0][0])
    _expect_device(EMBEDDING, cls, (vocab, dim))
    passed(EMBEDDING, "weight (num_embeddings, embedding_dim), N(0, 1) truncated at ±3; rows looked up with the "
           "library's table, for drawn sizes and 1 to 3 dimensions, in train and eval mode, float64 and bfloat16, "
           "on any device; one gradient step over every id matches")


# ---------------------------------------------------------------------------------------
# 6.3 SwiGLU
# ---------------------------------------------------------------------------------------


@exercise(SWIGLU)
def swiglu(cls: type) -> None:
    """Exercise 6.3: ``cls(d_model, d_ff)`` owns w1, w2, w3 and computes w2(SiLU(w1 x) ⊙ w3 x)."""
    refuse_library_object(SWIGLU, cls, EXERCISES[SWIGLU].refuses, EXERCISES[SWIGLU].task)
    gen = fresh_generator()
    s = _sizes(gen)
    module = _build(SWIGLU, cls, s.d_model, s.d_ff)
    library = _seeded(gen, lambda: SwiGLU(s.d_model, s.d_ff))
    _expect_names(SWIGLU, module, library, "the handout's names are w1 (the gate, (d_ff, d_model)), w2 (the way "
                  "down, (d_model, d_ff)) and w3 (the value, (d_ff, d_model)), each a bias-free Linear")
    _load_both_ways(SWIGLU, module, library)
    w1, w2, w3 = library.w1.weight, library.w2.weight, library.w3.weight
    silu = torch.nn.functional.silu

    def mistakes(x: torch.Tensor) -> list[tuple[Callable[[], torch.Tensor], str]]:
        return [
            (lambda: functional.swiglu(x, w3, w2, w1),
             "the SiLU gates w3's output: the handout gates w1's, w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda: (x @ w1.T * (x @ w3.T)) @ w2.T, "the SiLU is missing: w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda: silu(x @ w1.T * (x @ w3.T)) @ w2.T,
             "the SiLU was applied to the product; it acts on the gate alone: SiLU(w1 x) ⊙ w3 x"),
            (lambda: silu(x @ w1.T) @ w2.T, "w3 is never used: the value w3 x multiplies the gate"),
        ]

    cases = [*_ranks(gen, _between(gen, 2, 6), s.d_model), (f"x (3, {s.d_model}) with RMS 2",
                                                            2 * torch.randn(3, s.d_model, generator=gen))]
    _expect_cases(SWIGLU, module, library, cases, mistakes=mistakes)
    _expect_modes_and_gradient(SWIGLU, module, library, (cases[0][1],), cases[0][0])
    _expect_trains(SWIGLU, module, library, torch.randn(2, 3, s.d_model, generator=gen),
                   torch.randn(2, 3, s.d_model, generator=gen), "w1, w2 and w3")
    _expect_cases(SWIGLU, module, library, cases[:1], again=True)
    _expect_dtypes(SWIGLU, cls, (s.d_model, s.d_ff), library, (cases[0][1],), cases[0][0])
    _expect_device(SWIGLU, cls, (s.d_model, s.d_ff))
    passed(SWIGLU, "w1, w2, w3 with the handout's shapes; w2(SiLU(w1 x) ⊙ w3 x) with the library's weights, for "
           "drawn d_model and d_ff and 2 to 4 dimensions, in train and eval mode, float64 and bfloat16, on any "
           "device; the input's gradient and one gradient step match")


# ---------------------------------------------------------------------------------------
# 6.4 the RoPE module
# ---------------------------------------------------------------------------------------


def _rotated(x: torch.Tensor, positions: torch.Tensor, theta: float, max_seq_len: int,
             pairing: str = "interleaved", sign: float = 1.0) -> torch.Tensor:
    angles = sign * functional.rope_angles(theta, x.shape[-1], max_seq_len)[positions]  # (..., T, d_k/2)
    return functional.apply_rope(x, angles.cos(), angles.sin(), pairing)


def _table_tolerance(x: torch.Tensor, positions: torch.Tensor) -> float:
    """How far a correct RoPE module may rotate ``x`` from the exact rotation: its table may be float32 from end to
    end, as the handout writes it (and Hugging Face's Llama builds it), not float64 cast once as the library's is.

    With u float32's unit roundoff, a float32 angle p·θ^(−2k/d) is off by about u·p from the product's rounding
    and as much again from θ^(−2k/d)'s (the fastest pair turns one radian per position), and the rotation's
    arithmetic adds at most 6u of the pair's length (see 3.2's bound): ‖(x₁, x₂)‖·u·(3p + 6) bounds both
    with room (3,000 draws of the handout's form at 96 positions: at most a fifth of it). Never below ATOL.
    """
    u = torch.finfo(torch.float32).eps / 2
    largest_pair = float(x.detach().double().unflatten(-1, (-1, 2)).norm(dim=-1).amax())
    return max(ATOL, largest_pair * u * (3 * float(positions.max()) + 6))


TABLE_HINT = ("a position reached past your cos/sin table: build it with max_seq_len rows (positions 0 … "
              "max_seq_len − 1), from the max_seq_len you are given")


@exercise(ROPE)
def rope(cls: type) -> None:
    """Exercise 6.4: ``cls(theta, d_k, max_seq_len)``: cos/sin buffers not in the state dict, sliced by positions.

    θ, d_k (4 … 16, even, never 8) and max_seq_len (33 … 96, never 16 or 32) are drawn; positions
    come sorted, shuffled and offset to the end of the table, for 2 to 4 dimensions. Whether cos and sin
    are parameters, saved or kept in buffers is what the kernel reports: hints that can only fail; the
    rotations decide a pass.
    """
    refuse_library_object(ROPE, cls, EXERCISES[ROPE].refuses, EXERCISES[ROPE].task)
    gen = fresh_generator()
    s = _sizes(gen)
    d_k = _pick(gen, (4, 6, 10, 12, 14, 16))
    module = _build(ROPE, cls, s.theta, d_k, s.max_seq_len)
    facts = object_facts(module)
    expect(ROPE, not facts["parameters"], f"the module has parameters ({', '.join(n for n, _ in facts['parameters'])}):"
           " cos and sin are fixed by θ, so keep them in buffers (self.register_buffer), not nn.Parameter — the "
           "optimizer would train them")
    saved = sorted(probe(module, state_dict_of, module))
    expect(ROPE, not saved, f"the state dict holds {', '.join(saved)}: register the cos/sin buffers with "
           "persistent=False — they are derived from θ, and the handout's state dicts have no such entries")
    expect(ROPE, bool(probe(module, buffers_of, module)), "the module has no buffer: compute cos and sin once in "
           "__init__, (max_seq_len, d_k/2) each, and keep them with self.register_buffer(..., persistent=False)")
    n, T = s.max_seq_len, _length(gen, s.max_seq_len)
    batch, heads = _between(gen, 2, 3), _between(gen, 2, 4)
    rows = torch.stack([_positions(gen, T, n) for _ in range(batch)])
    library = RotaryPositionalEmbedding(s.theta, d_k, n)
    cases = [
        (f"x ({T}, {d_k}), positions 0 … {T - 1}", torch.randn(T, d_k, generator=gen), torch.arange(T)),
        (f"x ({batch}, {T}, {d_k}), token_positions ({T},), not consecutive",
         torch.randn(batch, T, d_k, generator=gen), _positions(gen, T, n)),
        (f"x ({batch}, {T}, {d_k}), token_positions ({batch}, {T}), one row per sequence",
         torch.randn(batch, T, d_k, generator=gen), rows),
        (f"x ({batch}, {heads}, {T}, {d_k}) ({heads} heads), token_positions ({batch}, 1, {T})",
         torch.randn(batch, heads, T, d_k, generator=gen), rows[:, None, :]),
        (f"x ({T}, {d_k}), token_positions ({T},) shuffled", torch.randn(T, d_k, generator=gen),
         torch.randperm(n, generator=gen)[:T]),
        (f"x ({batch}, {T}, {d_k}), token_positions {n - T} … {n - 1}, to the end of the table",
         torch.randn(batch, T, d_k, generator=gen), torch.arange(n - T, n)),
    ]
    for label, x, positions in cases:
        label = f"{label}; theta={s.theta:g}, d_k={d_k}, max_seq_len={n}"
        try:
            got = call_learner(ROPE, module, x, positions, arg_names=("x", "token_positions"))
        except Hint as hint:
            if "IndexError" in hint.hint or "out of bounds" in hint.hint:
                raise Hint(ROPE, f"{TABLE_HINT} ({hint.hint}) [case: {label}]") from None
            raise
        _compare(ROPE, got, _rotated(x, positions, s.theta, n), label, [
            (lambda x=x, p=positions: _rotated(x, p, s.theta, n, "half"),
             "you rotated the pairs (k, k + d_k/2); the handout pairs neighbours (2k, 2k + 1)"),
            (lambda x=x, p=positions: _rotated(x, p, s.theta, n, sign=-1.0),
             "the rotation goes the wrong way: (x₀, x₁) → (x₀ cos − x₁ sin, x₀ sin + x₁ cos)"),
            (lambda x=x: _rotated(x, torch.arange(x.shape[-2]), s.theta, n),
             "token_positions was ignored: slice cos and sin by token_positions (cos[token_positions]), "
             "not by 0 … T−1"),
            (lambda x=x, p=positions: _rotated(x, p, 10000.0, n),
             "the rotation uses θ = 10000, not the theta argument: build cos and sin from the theta you are given"),
        ], atol=_table_tolerance(x, positions))
    refuse_library_calls(ROPE, cls, EXERCISES[ROPE].refused_calls, EXERCISES[ROPE].task)
    label, x, positions = cases[1]
    _expect_modes_and_gradient(ROPE, module, library, (x, positions), label, atol=_table_tolerance(x, positions))
    _expect_dtypes(ROPE, cls, (s.theta, d_k, n), library, (x, positions), label, with_dtype=False,
                   atol=_table_tolerance(x, positions))
    _expect_device(ROPE, cls, (s.theta, d_k, n))
    passed(ROPE, "no parameters, cos/sin in buffers outside the state dict; rotations match at given, shuffled and "
           "offset positions up to max_seq_len, per sequence and broadcast over heads, for drawn θ, d_k and "
           "max_seq_len, in train and eval mode, float64 and bfloat16, on any device; the input's gradient matches")


# ---------------------------------------------------------------------------------------
# 6.5 causal multi-head self-attention
# ---------------------------------------------------------------------------------------

ATTENTION_NAMES = ("the handout's names are q_proj, k_proj, v_proj and output_proj, each a bias-free "
                   "(d_model, d_model) Linear; RoPE owns nothing that is saved")


def _sized(s: Sizes) -> str:
    return f"d_model={s.d_model}, {s.num_heads} heads, max_seq_len={s.max_seq_len}, theta={s.theta:g}"


def _projections(library: nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """The four projection weights of a library attention module, by the names 4.4's catalogue uses."""
    return {name: getattr(library, name).weight.detach() for name in ("q_proj", "k_proj", "v_proj", "output_proj")}


def _attention_hint(got: Any, x: torch.Tensor, library: nn.Module, s: Sizes, at: torch.Tensor | None,
                    theta: float | None = None) -> str | None:
    """4.4's catalogue of attention mistakes (shared, ``checks.attention.attention_mistake``) on this case."""
    T = x.shape[-2]
    positions = torch.arange(T) if at is None else (at.unsqueeze(-2) if at.ndim > 1 else at)
    layer = Layer(s.d_model, s.num_heads, s.max_seq_len, s.theta if theta is None else theta)
    hint = attention_mistake(got, x, _projections(library), positions, layer)
    return None if hint is None else hint.replace("rope_theta", "theta")  # 6.5's and 6.6's argument: theta


def _attention_cases(gen: torch.Generator, s: Sizes) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """Three batch ranks, positions given per sequence, shuffled, and a whole context of max_seq_len tokens."""
    T = _length(gen, s.max_seq_len)
    batch = 3 if s.num_heads == 2 else 2  # never the head count: positions not broadcast over heads then fail
    d, n = s.d_model, s.max_seq_len
    rows = torch.stack([_positions(gen, T, n) for _ in range(batch)])
    return [
        (f"x ({batch}, {T}, {d}), token_positions None", torch.randn(batch, T, d, generator=gen), None),
        (f"x ({T}, {d}), no batch dimension, token_positions None", torch.randn(T, d, generator=gen), None),
        (f"x ({batch}, {T}, {d}), token_positions ({batch}, {T}), not consecutive",
         torch.randn(batch, T, d, generator=gen), rows),
        (f"x ({T}, {d}), token_positions ({T},) shuffled", torch.randn(T, d, generator=gen),
         torch.randperm(n, generator=gen)[:T]),
        (f"x (2, {batch}, {n}, {d}), the whole context, token_positions None",
         torch.randn(2, batch, n, d, generator=gen), None),
    ]


def _call_attention(ex: str, module: Any, x: torch.Tensor, at: torch.Tensor | None, label: str = "") -> Any:
    args = (x,) if at is None else (x, at)
    try:
        return _call_ranked(ex, module, args, label)
    except Hint as hint:
        if at is None or at.ndim < 2 or RANKS_HINT in hint.hint:
            raise
        raise Hint(ex, f"with token_positions of shape (batch, T) = {tuple(at.shape)} your module failed "
                   f"({hint.hint}). The heads add a dimension: q is (batch, heads, T, d_head), so the positions must "
                   "broadcast over the heads — pass token_positions.unsqueeze(-2), (batch, 1, T), to RoPE") from None


@exercise(ATTENTION)
def attention(cls: type) -> None:
    """Exercise 6.5: ``cls(d_model, num_heads, max_seq_len, theta)`` is causal MHSA with RoPE on q and k.

    Every attention mistake of exercise 4.4's catalogue is named here too (one catalogue, in
    ``checks.attention``); ``theta=None`` is attention without RoPE (the handout's
    ``run_multihead_self_attention``).
    """
    refuse_library_object(ATTENTION, cls, EXERCISES[ATTENTION].refuses, EXERCISES[ATTENTION].task)
    gen = fresh_generator()
    s = _sizes(gen)
    module = _build(ATTENTION, cls, s.d_model, s.num_heads, s.max_seq_len, s.theta)
    library = _seeded(gen, lambda: MultiHeadSelfAttention(s.d_model, s.num_heads, s.max_seq_len,
                                                          rope_theta=s.theta))
    _expect_names(ATTENTION, module, library, ATTENTION_NAMES)
    _load_both_ways(ATTENTION, module, library)
    cases = _attention_cases(gen, s)
    for label, x, at in cases:
        label = f"{label}; {_sized(s)}"
        got = _call_attention(ATTENTION, module, x, at, label)
        with torch.no_grad():
            want = library(x, at)
        if not _close(got, want):
            hint = _attention_hint(got, x, library, s, at)
            if at is not None and hint is None and _close(got, library(x)):
                hint = "token_positions was ignored: pass them on to RoPE"
            if at is not None and hint is None and _close(got, _mask_from_positions(x, library, at)):
                hint = ("the causal mask was built from token_positions: it follows the order of the tokens in x "
                        "(token i sees tokens 0 … i whatever their positions); the positions only turn RoPE's angles")
            if hint is not None:
                raise Hint(ATTENTION, f"{hint} [case: {label}]")
        _compare(ATTENTION, got, want, label)
    label, x, at = cases[0]
    label = f"{label}; {_sized(s)}"
    _expect_modes_and_gradient(ATTENTION, module, library, (x,), label,
                               train_mistakes=[(lambda: _mhsa_unmasked(x, library, s), "in training mode the causal "
                                                "mask is missing: mask the future in both modes — the training loop "
                                                "runs the model in training mode, and the model then reads the "
                                                "answer it is asked to predict")])
    _expect_trains(ATTENTION, module, library, torch.randn(2, x.shape[-2], s.d_model, generator=gen),
                   torch.randn(2, x.shape[-2], s.d_model, generator=gen), "q_proj, k_proj, v_proj and output_proj")
    _expect_cases(ATTENTION, module, library, [(label, x)], again=True)
    _expect_dtypes(ATTENTION, cls, (s.d_model, s.num_heads, s.max_seq_len, s.theta), library, (x,), label)
    _expect_device(ATTENTION, cls, (s.d_model, s.num_heads, s.max_seq_len, s.theta))
    # theta=None: the handout's run_multihead_self_attention, no RoPE
    plain = _build(ATTENTION, cls, s.d_model, s.num_heads, s.max_seq_len, None)
    unrotated = MultiHeadSelfAttention(s.d_model, s.num_heads).eval()
    unrotated.load_state_dict(library.state_dict())
    error = probe(plain, load_state, plain, state_dict_of(unrotated))
    expect(ATTENTION, not error, f"built with theta=None, the library's state dict does not load: {error}")
    probe(plain, set_eval, plain)
    label = f"{cases[2][0]}; theta=None (no RoPE: the handout's run_multihead_self_attention)"
    got = _call_attention(ATTENTION, plain, cases[2][1], cases[2][2])
    with torch.no_grad():
        want = unrotated(cases[2][1])
    _compare(ATTENTION, got, want, label, [(lambda: library(cases[2][1], cases[2][2]),
                                            "with theta=None the module must not rotate: theta=None means no RoPE "
                                            "(the handout's run_multihead_self_attention)")])
    refuse_library_calls(ATTENTION, cls, EXERCISES[ATTENTION].refused_calls, EXERCISES[ATTENTION].task)
    passed(ATTENTION, "q_proj, k_proj, v_proj, output_proj with the library's weights; causal, RoPE at given and "
           "shuffled positions broadcast over the heads, for drawn d_model, heads, max_seq_len and θ, 2 to 4 "
           "dimensions and the whole context, in train and eval mode, float64 and bfloat16, on any device, and "
           "without RoPE for theta=None; the input's gradient and one gradient step match")


def _mask_from_positions(x: torch.Tensor, library: nn.Module, at: torch.Tensor) -> torch.Tensor:
    """The library's attention with the mask built from the positions (query p sees keys at positions ≤ p)."""
    q, k = library.queries_and_keys(x, at.unsqueeze(-2) if at.ndim > 1 else at)
    v = library.split_heads(library.v_proj(x))
    future = at[..., None, :] > at[..., :, None]  # (..., T, T)
    if at.ndim > 1:
        future = future.unsqueeze(-3)  # over the heads
    scores = (q @ k.transpose(-2, -1) / math.sqrt(library.d_head)).masked_fill(future, float("-inf"))
    return library.output_proj((torch.softmax(scores, dim=-1) @ v).transpose(-3, -2).flatten(-2))


def _mhsa_unmasked(x: torch.Tensor, library: nn.Module, s: Sizes) -> torch.Tensor:
    """The library's attention with every token seeing every other one (no causal mask)."""
    q, k = library.queries_and_keys(x)
    v = library.split_heads(library.v_proj(x))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(library.d_head), dim=-1)
    return library.output_proj((weights @ v).transpose(-3, -2).flatten(-2))


# ---------------------------------------------------------------------------------------
# 6.6 the pre-norm block
# ---------------------------------------------------------------------------------------

BLOCK_NAMES = ("the handout's names are ln1, attn (q_proj, k_proj, v_proj, output_proj), ln2 and ffn (w1, w2, w3)")


def _library_block(gen: torch.Generator, s: Sizes) -> TransformerBlock:
    block = _seeded(gen, lambda: TransformerBlock(s.d_model, s.num_heads, s.d_ff, s.max_seq_len, rope_theta=s.theta))
    with torch.no_grad():  # gains far from 1 and from each other, so every norm's place shows
        block.ln1.weight.copy_(1 + 0.5 * torch.randn(s.d_model, generator=gen))
        block.ln2.weight.copy_(0.3 + 0.5 * torch.randn(s.d_model, generator=gen).abs())
    return block


def _expect_parts(ex: str, module: Any, library: nn.Module, s: Sizes, x: torch.Tensor, at: torch.Tensor | None,
                  label: str, where: str = "") -> None:
    """Name the part of a block that is wrong: its attention (with 6.5's catalogue) or its feed-forward.

    Called when a block's (or a model's) output differs and no wiring mistake explains it; the
    learner's ``attn`` and ``ffn`` (reached by a probe, as handles) run on the inputs the library's
    block gives them, with the weights the check loaded.
    """
    h = library.ln1(x)
    attn = probe(module, submodule, module, f"{where}attn")
    if attn is not None:
        got = _call_attention(ex, attn, h, at)
        with torch.no_grad():
            want = library.attn(h, at)
        if not _close(got, want):
            mistake = _attention_hint(got, h, library.attn, s, at) or "it differs from the library's attention"
            raise Hint(ex, f"the error is in {where}attn, your attention: {mistake} — exercise 6.5's check names "
                           f"it too [case: {label}]")
    ffn = probe(module, submodule, module, f"{where}ffn")
    if ffn is not None:
        z = library.ln2(x + library.attn(h, at))
        got = call_learner(ex, ffn, z, arg_names=("x",))
        with torch.no_grad():
            want = library.ffn(z)
        expect(ex, _close(got, want), f"the error is in {where}ffn, your SwiGLU: it differs from the library's "
               f"with the same weights — exercise 6.3's check names the mistake [case: {label}]")


@exercise(BLOCK)
def block(cls: type) -> None:
    """Exercise 6.6: ``cls(d_model, num_heads, d_ff, max_seq_len, theta)`` is the pre-norm block."""
    refuse_library_object(BLOCK, cls, EXERCISES[BLOCK].refuses, EXERCISES[BLOCK].task)
    gen = fresh_generator()
    s = _sizes(gen)
    args = (s.d_model, s.num_heads, s.d_ff, s.max_seq_len, s.theta)
    module = _build(BLOCK, cls, *args)
    library = _library_block(gen, s)
    _expect_names(BLOCK, module, library, BLOCK_NAMES)
    _load_both_ways(BLOCK, module, library)
    cases = [(f"{label} (RMS 3)", 3 * x, at) if i == 0 else (label, x, at)
             for i, (label, x, at) in enumerate(_attention_cases(gen, s))]
    atols = []  # each case's, the first for the same input in training mode
    for label, x, at in cases:
        label = f"{label}; {_sized(s)}, d_ff={s.d_ff}"
        got = _call_attention(BLOCK, module, x, at, label)
        parts = (library.ln1, lambda t, at=at: library.attn(t, at), library.ln2, library.ffn)
        want, atol = _answer(library, x, at)
        atols.append(atol)
        with torch.no_grad():
            mistakes = [(f(x, *parts), hint) for f, hint in PRE_NORM_MISTAKES.values()]
        if not _close(got, want, atol):
            hint = next((h for other, h in mistakes if _close(got, other)), None)
            if hint is not None:
                raise Hint(BLOCK, f"{hint} [case: {label}]")
            if isinstance(got, torch.Tensor) and got.shape == want.shape:
                with torch.no_grad():
                    _expect_parts(BLOCK, module, library, s, x, at, label)
        _compare(BLOCK, got, want, label, atol=atol)
    label, x, _ = cases[0]
    label = f"{label}; {_sized(s)}, d_ff={s.d_ff}"
    _expect_modes_and_gradient(BLOCK, module, library, (x,), label, atol=atols[0])
    _expect_trains(BLOCK, module, library, torch.randn(2, x.shape[-2], s.d_model, generator=gen),
                   torch.randn(2, x.shape[-2], s.d_model, generator=gen), "ln1, attn, ln2 and ffn", deep=True)
    _expect_cases(BLOCK, module, library, [(label, x)], again=True)
    _expect_dtypes(BLOCK, cls, args, library, (x,), label)
    _expect_device(BLOCK, cls, args)
    passed(BLOCK, "ln1, attn, ln2, ffn with the library's weights; x + attn(ln1(x)), then h + ffn(ln2(h)), with and "
           "without token_positions, for drawn sizes, 2 to 4 dimensions and the whole context, in train and eval "
           "mode, float64 and bfloat16, on any device; the input's gradient and one gradient step match")


# ---------------------------------------------------------------------------------------
# 6.7 the language model
# ---------------------------------------------------------------------------------------

LM_NAMES = ("the handout's names are token_embeddings, layers.0 … layers.{num_layers−1}, ln_final and lm_head")
SHARED_HINT = ("the layers share one block: nn.ModuleList([block] * num_layers) holds one module num_layers times, "
               "so loading layers.0 … layers.{n−1} leaves every layer with the last one's weights — build a new "
               "block for each layer")


@exercise(LM)
def language_model(cls: type) -> None:
    """Exercise 6.7: ``cls(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)``.

    ``num_layers`` is 3 or 4, each layer loaded with weights of its own: layers that are one block
    (``[block] * n``) cannot match, and the hint names them.
    """
    refuse_library_object(LM, cls, EXERCISES[LM].refuses, EXERCISES[LM].task)
    gen = fresh_generator()
    s = _sizes(gen)
    args = (s.vocab, s.max_seq_len, s.d_model, s.num_layers, s.num_heads, s.d_ff, s.theta)
    module = _build(LM, cls, *args)
    expect(LM, not probe(module, shares_weight, module, "lm_head.weight", "token_embeddings.weight"),
           "lm_head.weight is token_embeddings.weight (tied): the handout's model has its own output matrix, "
           "lm_head = Linear(d_model, vocab_size)")
    expect(LM, not probe(module, shares_weight, module, "layers.0.ffn.w1.weight", "layers.1.ffn.w1.weight"),
           SHARED_HINT)
    library = _seeded(gen, lambda: TransformerLM(*args))
    with torch.no_grad():
        library.ln_final.weight.copy_(0.5 + torch.rand(s.d_model, generator=gen))
        for layer in library.layers:
            layer.ln1.weight.copy_(0.5 + torch.rand(s.d_model, generator=gen))
    _expect_names(LM, module, library, LM_NAMES)
    _load_both_ways(LM, module, library)
    shared = copy.deepcopy(library)
    for layer in shared.layers:
        layer.load_state_dict(library.layers[-1].state_dict())

    def without_final_norm(ids: torch.Tensor) -> torch.Tensor:
        x = library.token_embeddings(ids)
        for layer in library.layers:
            x = layer(x)
        return library.lm_head(x)

    def tied(ids: torch.Tensor) -> torch.Tensor:
        x = library.token_embeddings(ids)
        for layer in library.layers:
            x = layer(x)
        return library.ln_final(x) @ library.token_embeddings.weight.T

    T = _length(gen, s.max_seq_len)
    sized = (f"vocab_size={s.vocab}, context_length={s.max_seq_len}, d_model={s.d_model}, "
             f"num_layers={s.num_layers}, {s.num_heads} heads, d_ff={s.d_ff}, rope_theta={s.theta:g}")
    cases = [(f"token_ids (2, {T})", torch.randint(s.vocab, (2, T), generator=gen)),
             (f"token_ids ({s.max_seq_len},), the whole context", torch.randint(s.vocab, (s.max_seq_len,),
                                                                                 generator=gen)),
             (f"token_ids (2, 2, {T})", torch.randint(s.vocab, (2, 2, T), generator=gen))]
    atols = []  # each case's, the first for the same ids in training mode
    for label, ids in cases:
        label = f"{label}; {sized}"
        got = call_learner(LM, module, ids, arg_names=("token_ids",))
        want, atol = _answer(library, ids)
        atols.append(atol)
        if not _close(got, want, atol) and isinstance(got, torch.Tensor) and got.shape == want.shape:
            with torch.no_grad():
                named = [(shared(ids), SHARED_HINT),
                         (without_final_norm(ids), "the final norm is missing: lm_head(ln_final(x)) — a pre-norm "
                          "stack never normalises its stream, so the head needs one norm at the end"),
                         (tied(ids), "the output uses the embedding matrix (a tied head): the handout's model has "
                          "its own lm_head"),
                         (torch.softmax(want, dim=-1), "you returned probabilities: return the logits, the loss "
                          "applies the (log-)softmax itself")]
            hint = next((h for other, h in named if _close(got, other)), None)
            if hint is not None:
                raise Hint(LM, f"{hint} [case: {label}]")
            with torch.no_grad():  # the first block's input is the embedding: is the fault in a layer's part?
                _expect_parts(LM, module, library.layers[0], s, library.token_embeddings(ids), None, label,
                              where="layers.0.")
        _compare(LM, got, want, label, atol=atol)
    _expect_modes_and_gradient(LM, module, library, (cases[0][1],), cases[0][0], float_input=False, atol=atols[0])
    _expect_trains(LM, module, library, torch.randint(s.vocab, (2, T), generator=gen),
                   torch.randint(s.vocab, (2, T), generator=gen), "token_embeddings, the layers, ln_final and lm_head",
                   deep=True)
    _expect_cases(LM, module, library, cases[:1], arg="token_ids", again=True)
    _expect_dtypes(LM, cls, args, library, (cases[0][1],), cases[0][0])
    _expect_device(LM, cls, args)
    passed(LM, "token_embeddings, layers (each its own), ln_final, lm_head with the library's weights; logits match "
           "for drawn sizes, θ and context, for 1 to 3 dimensions and the whole context, in train and eval mode, "
           "float64 and bfloat16, on any device; one gradient step matches")


# ---------------------------------------------------------------------------------------
# 6.8 parameters and forward FLOPs, counted by hand (the handout's transformer_accounting)
# ---------------------------------------------------------------------------------------



def _accounting_shapes(gen: torch.Generator) -> list[Any]:
    """Three shapes drawn over the contract: 1 … 5 layers (never all equal), 1 … 8 heads of 2 … 24 channels (even),
    any d_ff, a vocabulary of 50 … 5000 and a context of 8 … 200 tokens, so no two parts scale alike."""
    shapes = []
    for layers in (_between(gen, 1, 2), _between(gen, 3, 5), _between(gen, 2, 5)):
        heads = _between(gen, 1, 8)
        d_model = heads * 2 * _between(gen, 1, 12)  # d_head even, for RoPE
        shapes.append(Shape(_between(gen, 50, 5000), _between(gen, 8, 200), d_model, layers, heads,
                            _between(gen, 8, 4 * d_model + 8)))
    return shapes


def _as_count(value: Any) -> float | None:
    number = finite_number(value)
    return None if number is None or number < 0 else number


def _same_count(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-9 * max(abs(want), 1.0)


def _parameter_mistakes(s: Any, want: int) -> list[tuple[int, str]]:
    V, T, d, L, _, f = s
    return [
        (want - V * d, "one (vocab_size × d_model) matrix is missing: the embedding and lm_head are two matrices "
                       "(the handout's head is not tied to the embedding), both counted"),
        (want - (2 * L + 1) * d, "the RMSNorm gains are missing: ln1 and ln2 in every block and ln_final at the "
                                 "end, d_model each"),
        (want - d, "ln_final's d_model gains are missing"),
        (want - 2 * L * d, "ln1's and ln2's gains are missing: d_model each, in every block"),
        (want + T * d, "you counted a position-embedding matrix (context_length × d_model): RoPE has no "
                       "parameters, its cos and sin follow from θ"),
        (want - L * d * f, "the feed-forward has three matrices in SwiGLU (w1, w3: d_model → d_ff; w2: d_ff → "
                           "d_model), not two"),
        (want + L * (4 * d + 2 * f + d), "you counted biases: the handout's Linear has none"),
    ]


def _flop_mistakes(part: str, s: Any, want: float) -> list[tuple[float, str]]:
    _, T, _, L, H, _ = s
    common = [(want / 2, "one multiply-add is 2 FLOPs: an (m×n)·(n×p) product costs 2mnp, the handout's rule"),
              (want / L, f"that is one block's {part}: there are num_layers of them") if part != "lm_head" else None]
    own = {
        "projections": [(want * 3 / 4, "four projections in every block: q_proj, k_proj, v_proj and output_proj"),
                        (want / T, "each projection multiplies every one of the context_length tokens")],
        "attention": [(want / 2, "the weighted sum of the values, (T×T)·(T×d_head) per head, costs as much as "
                                 "the scores Q Kᵀ: count both"),
                      (want * H, "each head's scores use d_head = d_model / num_heads channels, so all heads "
                                 "together cost 2·T²·d_model for Q Kᵀ, not num_heads times that"),
                      (want / T, "the scores are T × T: each of the T queries meets each of the T keys")],
        "feed-forward": [(want * 2 / 3, "SwiGLU has three matrices: w1 and w3 (d_model → d_ff), w2 (d_ff → d_model)")],
        "lm_head": [(0, "lm_head is a matrix multiply too: (T × d_model)·(d_model × vocab_size)")],
    }[part]
    return [m for m in (*own, *common) if m is not None]  # its own first: half the attention is the values


@exercise(ACCOUNTING)
def accounting(count_parameters: Callable, forward_flops: Callable) -> None:
    """Exercise 6.8: ``count_parameters(*shape)`` and ``forward_flops(*shape)`` agree with the library's model.

    The references are measured, not a second hand count: ``num_parameters()`` of the library's
    ``TransformerLM`` of the drawn shape and ``FlopCounterMode`` over its forward pass (on the
    ``meta`` device, so any shape costs no memory), both in the grader.
    """
    for fn in (count_parameters, forward_flops):
        refuse_library_object(ACCOUNTING, fn, EXERCISES[ACCOUNTING].refuses, EXERCISES[ACCOUNTING].task)
    names = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff")
    for s in _accounting_shapes(fresh_generator()):
        label = ", ".join(f"{n}={v}" for n, v in zip(names, s, strict=True))
        want = measured_parameters(s)
        got = _as_count(call_learner(ACCOUNTING, count_parameters, *s, arg_names=names))
        expect(ACCOUNTING, got is not None, f"count_parameters returned {describe(got)}: return one whole number "
               f"[case: {label}]")
        if not _same_count(got, want):
            hint = next((h for value, h in _parameter_mistakes(s, want) if _same_count(got, value)), None)
            hint = hint or ("the count differs from the library's TransformerLM: embedding, the blocks' attention "
                            "and SwiGLU matrices and norm gains, ln_final, lm_head")
            raise Hint(ACCOUNTING, f"{hint}; got {got:,.0f}, the library's model has {want:,} [case: {label}]")
        measured = measured_flops(s)
        flops = call_learner(ACCOUNTING, forward_flops, *s, arg_names=names)
        expect(ACCOUNTING, isinstance(flops, dict) and set(flops) == set(FLOP_PARTS),
               f"forward_flops must return a dict with the keys {', '.join(map(repr, FLOP_PARTS))}, got "
               f"{sorted(flops) if isinstance(flops, dict) else describe(flops)}")
        for part, value in measured.items():
            mine = _as_count(flops[part])
            expect(ACCOUNTING, mine is not None, f"forward_flops()[{part!r}] is {describe(flops[part])}: give a "
                   f"number of FLOPs [case: {label}]")
            if _same_count(mine, value):
                continue
            hint = next((h for v, h in _flop_mistakes(part, s, value) if _same_count(mine, v)), None)
            raise Hint(ACCOUNTING, f"{part}: " + (hint or f"{FLOP_PARTS[part]} — count their matrix multiplies, "
                       "2mnp each") + f"; got {mine:,.0f}, torch's FlopCounterMode counts {value:,} [case: {label}]")
    for fn in (count_parameters, forward_flops):
        refuse_library_calls(ACCOUNTING, fn, EXERCISES[ACCOUNTING].refused_calls, EXERCISES[ACCOUNTING].task)
    passed(ACCOUNTING, "parameters equal the library model's num_parameters() and the FLOPs of each part "
           "torch's FlopCounterMode, for three drawn shapes")


# ---------------------------------------------------------------------------------------
# 6.9 grouped-query attention with a KV cache
# ---------------------------------------------------------------------------------------


class CachedSizes(NamedTuple):
    """The constructor arguments of one 6.9 check: ``cls(d_model, num_heads, max_seq_len, theta, num_kv_heads)``."""

    d_model: int
    num_heads: int
    max_seq_len: int
    theta: float
    num_kv_heads: int


def _cached_sizes(gen: torch.Generator) -> CachedSizes:
    """4 or 6 query heads of 4, 6 or 8 channels sharing 2 or 3 key/value heads: never as many as query heads (a
    module that ignores num_kv_heads shows) and never one (with one key/value head, .repeat and repeat_interleave
    agree, so heads shared the wrong way would not show); a context of 20 … 32, θ drawn as for 6.5."""
    heads = _pick(gen, (4, 6))
    kv = _pick(gen, tuple(k for k in range(2, heads) if heads % k == 0))
    return CachedSizes(heads * _pick(gen, (4, 6, 8)), heads, _between(gen, 20, 32), _theta(gen), kv)


def _cached_attention(x: torch.Tensor, w: dict[str, torch.Tensor], s: CachedSizes, chunks: list[int],
                      mistake: str = "") -> torch.Tensor:
    """GQA with RoPE run chunk by chunk through a KV cache, in float64; ``mistake`` names a typical one.

    ``x`` (B, T, d_model) is cut into ``chunks`` (sizes summing to T); the output rows of every chunk are
    concatenated. Without a mistake this is the whole sequence's causal attention, whatever the chunks.
    """
    x = x.double()
    w = {k: v.double() for k, v in w.items()}
    H, kv, d_head = s.num_heads, s.num_kv_heads, s.d_model // s.num_heads

    def rope(t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        angles = functional.rope_angles(s.theta, d_head, s.max_seq_len)[positions]
        return functional.apply_rope(t, angles.cos(), angles.sin())

    def heads(t: torch.Tensor, n: int) -> torch.Tensor:  # (B, T, n·d_head) → (B, n, T, d_head)
        return t.unflatten(-1, (n, d_head)).transpose(-3, -2)

    keys = values = None
    outputs, start = [], 0
    for size in chunks:
        piece = x[..., start:start + size, :]
        at = torch.arange(size) if mistake == "positions_restart" else torch.arange(start, start + size)
        q = rope(heads(piece @ w["q_proj"].T, H), at)
        k = rope(heads(piece @ w["k_proj"].T, kv), at)
        v = heads(piece @ w["v_proj"].T, kv)
        if mistake != "cache_unused" and keys is not None:
            k, v = torch.cat((keys, k), dim=-2), torch.cat((values, v), dim=-2)
        keys, values = k, v
        if mistake == "repeat":  # key head j serves query heads j, j + kv, j + 2kv, …
            k, v = k.repeat(1, H // kv, 1, 1), v.repeat(1, H // kv, 1, 1)
        else:
            k, v = k.repeat_interleave(H // kv, dim=-3), v.repeat_interleave(H // kv, dim=-3)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, size, keys)
        past = k.shape[-2] - size
        if mistake == "mask_top_left":  # tril of the (size, keys) rectangle: query i sees keys 0 … i
            allowed = torch.ones(size, k.shape[-2], dtype=torch.bool).tril()
        elif mistake == "no_mask_after_cache" and past:
            allowed = torch.ones(size, k.shape[-2], dtype=torch.bool)
        else:
            allowed = torch.arange(k.shape[-2]) <= torch.arange(past, past + size)[:, None]
        out = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v  # (B, H, size, d_head)
        outputs.append(out.transpose(-3, -2).flatten(-2) @ w["output_proj"].T)
        start += size
    return torch.cat(outputs, dim=-2)


CACHED_MISTAKES = {
    "repeat": "the key/value heads were shared with .repeat: key head j serves the query heads of its own group, "
              "j·g … j·g + g − 1 (g = num_heads / num_kv_heads) — repeat_interleave along the head axis",
    "positions_restart": "with a cache the new tokens were rotated as if they were at 0, 1, …: their positions "
                         "continue after the cached ones (self.kv_cache.length + 0, 1, …)",
    "cache_unused": "the new tokens attended only to themselves: with a cache, append their keys and values with "
                    "self.kv_cache.update(k, v) and attend to everything it returns",
    "mask_top_left": "the causal mask was cut from the top-left corner: with a cache, query i is at position "
                     "past + i and may attend to keys 0 … past + i, not 0 … i",
    "no_mask_after_cache": "after the first call the mask was left out: queries of a chunk of new tokens must "
                           "not see the later ones of the same chunk",
}
CACHED_NAMES = ("q_proj and output_proj are (d_model, d_model); k_proj and v_proj are (num_kv_heads·d_head, d_model), "
                "d_head = d_model / num_heads")


def _cached_chunks(gen: torch.Generator, T: int) -> list[int]:
    """A prompt of 3 … T/2 tokens, then single tokens, a chunk of 2 or 3, and single tokens to T."""
    prompt = _between(gen, 3, T // 2)
    middle = _between(gen, 2, 3)
    singles = T - prompt - middle
    first = singles // 2
    return [prompt, *([1] * first), middle, *([1] * (singles - first))]


@exercise(CACHED)
def cached_attention(cls: type) -> None:
    """Exercise 6.9: ``cls(d_model, num_heads, max_seq_len, theta, num_kv_heads=None)``, GQA with a KV cache.

    Without a cache it must equal the library's grouped-query attention with the same weights; with
    the library's ``KVCache`` in ``module.kv_cache`` (set here by a probe, as ``kv_caching`` does), a
    prompt, then single tokens and a chunk of two or three, must give the rows of the whole sequence.
    """
    refuse_library_object(CACHED, cls, EXERCISES[CACHED].refuses, EXERCISES[CACHED].task)
    gen = fresh_generator()
    s = _cached_sizes(gen)
    label = (f"d_model={s.d_model}, {s.num_heads} heads sharing {s.num_kv_heads} key/value heads, "
             f"max_seq_len={s.max_seq_len}, theta={s.theta:g}")
    mha = _build(CACHED, cls, s.d_model, s.num_heads, s.max_seq_len, s.theta)
    d_head = s.d_model // s.num_heads
    expect(CACHED, [shape for name, shape in object_facts(mha)["parameters"] if name == "k_proj.weight"]
           == [[s.d_model, s.d_model]], f"built without num_kv_heads, k_proj.weight must be (d_model, d_model) = "
           f"({s.d_model}, {s.d_model}): num_kv_heads=None means one key/value head per query head [case: {label}]")
    module = _build(CACHED, cls, *s)
    library = _seeded(gen, lambda: MultiHeadSelfAttention(s.d_model, s.num_heads, s.max_seq_len, rope_theta=s.theta,
                                                          num_kv_heads=s.num_kv_heads))
    _expect_names(CACHED, module, library, CACHED_NAMES)
    _load_both_ways(CACHED, module, library)
    w = {name.removesuffix(".weight"): value for name, value in library.state_dict().items()}
    T = _between(gen, 10, s.max_seq_len)
    x = torch.randn(2, T, s.d_model, generator=gen)
    with torch.no_grad():
        want = library(x)
    got = call_learner(CACHED, module, x, arg_names=("x",))
    _compare(CACHED, got, want, f"x (2, {T}, {s.d_model}), no cache; {label}",
             [(lambda: _cached_attention(x, w, s, [T], "repeat").float(), CACHED_MISTAKES["repeat"])])
    chunks = _cached_chunks(gen, T)
    probe(module, start_kv_cache, module)
    try:
        pieces, start = [], 0
        for size in chunks:
            pieces.append(call_learner(CACHED, module, x[:, start:start + size], arg_names=("x",)))
            start += size
        shapes = [tuple(p.shape) if isinstance(p, torch.Tensor) else describe(p) for p in pieces]
        expect(CACHED, all(isinstance(p, torch.Tensor) and p.shape == (2, n, s.d_model)
                           for p, n in zip(pieces, chunks, strict=True)),
               f"with a cache, each call returns its own tokens' rows, (batch, new tokens, d_model); got {shapes} "
               f"for chunks of {chunks} tokens [case: {label}]")
        cached = probe(module, cached_keys_shape, module)
    finally:
        probe(module, stop_kv_cache, module)
    _compare(CACHED, torch.cat(pieces, dim=-2), want,
             f"x (2, {T}, {s.d_model}) fed through the cache in chunks of {chunks}; {label}",
             [(lambda m=m: _cached_attention(x, w, s, chunks, m).float(), hint) for m, hint in CACHED_MISTAKES.items()])
    expect(CACHED, cached == [2, s.num_kv_heads, T, d_head], f"after {T} tokens the cached keys are {cached}, "
           f"expected (batch, num_kv_heads, T, d_head) = (2, {s.num_kv_heads}, {T}, {d_head}): cache the "
           "num_kv_heads key heads — repeat them for the query heads after the cache, or the cache loses what "
           f"sharing saves [case: {label}]")
    _expect_trains(CACHED, module, library, torch.randn(2, T, s.d_model, generator=gen),
                   torch.randn(2, T, s.d_model, generator=gen), "q_proj, k_proj, v_proj and output_proj")
    refuse_library_calls(CACHED, cls, EXERCISES[CACHED].refused_calls, EXERCISES[CACHED].task)
    passed(CACHED, "k_proj and v_proj shared by groups of query heads; without a cache the library's grouped-query "
           "attention, and through the cache, a prompt then single tokens and a chunk give the whole sequence's "
           "rows; the cache holds num_kv_heads heads; one gradient step matches")
