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
from prenorm_lib.checks.block import PRE_NORM_MISTAKES
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    Hint,
    call_learner,
    describe,
    exercise,
    expect,
    expect_close,
    expect_trains,
    fresh_generator,
    object_facts,
    passed,
    probe,
    refuse_library_object,
)
from prenorm_lib.checks.probes import MODULE_CLASS, buffers_of, load_state, set_eval, shares_weight, state_dict_of
from prenorm_lib.ffn import SwiGLU
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM

__all__ = ["attention", "block", "embedding", "language_model", "linear", "rope", "swiglu"]

LINEAR, EMBEDDING, SWIGLU, ROPE, ATTENTION, BLOCK, LM = "6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7"

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
    transposed weight shows in its shape), a context of 20 … 32 positions (an input reaches
    position 16 or beyond), 40 … 90 tokens, 1 or 3 layers.
    """
    num_heads, d_head = _pick(gen, (2, 4, 5)), _pick(gen, (4, 6, 8))
    while num_heads * d_head == 24:
        num_heads, d_head = _pick(gen, (2, 4, 5)), _pick(gen, (4, 6, 8))
    d_model = num_heads * d_head
    d_ff = 40
    while d_ff == 40:
        d_ff = d_model + _between(gen, 8, d_model + 24)
    return Sizes(d_model, num_heads, d_ff, _between(gen, 20, 32), _theta(gen), _between(gen, 40, 90),
                 _pick(gen, (1, 3)))


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


def _compare(ex: str, got: Any, want: torch.Tensor, label: str,
             mistakes: list[tuple[Callable[[], torch.Tensor], str]] = ()) -> None:
    """``got`` equals ``want``; if not, the first mistake whose output it matches is the hint."""
    close = isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype and \
        bool(torch.allclose(got.detach().double(), want.double(), atol=ATOL, rtol=1e-4))
    if not close and isinstance(got, torch.Tensor):
        for variant, hint in mistakes:
            with torch.no_grad():
                other = variant()
            if got.shape == other.shape and bool(torch.allclose(got.detach().double(), other.double(),
                                                                atol=ATOL, rtol=1e-4)):
                raise Hint(ex, f"{hint} [case: {label}]")
    expect_close(ex, got, want, f"the output differs from the library's with the same weights [case: {label}]",
                 atol=ATOL, shape_hint=f"the output has the wrong shape [case: {label}]",
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
                   what: str, lr: float = TRAIN_LR) -> None:
    """``core.expect_trains`` with ``library`` (holding the weights the learner's module was given) as the
    reference, run on its parameters through ``torch.func.functional_call``; ``after`` may be token ids."""
    expect_trains(ex, module, module, lambda inputs, **weights: functional_call(library, weights, (inputs,)),
                  dict(library.named_parameters()), x,
                  f"after one gradient step the output is wrong — every weight ({what}) must be an nn.Parameter of "
                  "the module (module.parameters() is what the optimiser trains) that forward uses, each its own",
                  lr=lr, after=after, atol=ATOL)


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
    batch, T = _between(gen, 1, 3), _between(gen, 2, 6)
    for label, x in ((f"x ({batch}, {T}, {d_in})", torch.randn(batch, T, d_in, generator=gen)),
                     (f"x ({d_in},)", torch.randn(d_in, generator=gen))):
        with torch.no_grad():
            want = library(x)
        _compare(LINEAR, call_learner(LINEAR, module, x, arg_names=("x",)), want, label)
    _expect_trains(LINEAR, module, library, torch.randn(4, d_in, generator=gen),
                   torch.randn(2, 3, d_in, generator=gen), "weight")
    passed(LINEAR, "weight (out, in), no bias, N(0, 2/(in+out)) truncated at ±3σ; y = x Wᵀ with the library's "
           "weights, for drawn widths; one gradient step matches")


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
    for label, ids in ((f"token_ids ({batch}, {T})", torch.randint(vocab, (batch, T), generator=gen)),
                       ("token_ids (5,) with repeats", repeats)):
        with torch.no_grad():
            want = library(ids)
        _compare(EMBEDDING, call_learner(EMBEDDING, module, ids, arg_names=("token_ids",)), want, label)
    ids = torch.randint(vocab, (2, 6), generator=gen)
    _expect_trains(EMBEDDING, module, library, ids, torch.cat((ids.flatten(), repeats)), "weight")
    passed(EMBEDDING, "weight (num_embeddings, embedding_dim), N(0, 1) truncated at ±3; rows looked up with the "
           "library's table, for drawn sizes; one gradient step matches")


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
    batch, T = _between(gen, 1, 3), _between(gen, 2, 6)
    for label, x in ((f"x ({batch}, {T}, {s.d_model})", torch.randn(batch, T, s.d_model, generator=gen)),
                     (f"x (3, {s.d_model})", 2 * torch.randn(3, s.d_model, generator=gen))):
        with torch.no_grad():
            want = library(x)
        _compare(SWIGLU, call_learner(SWIGLU, module, x, arg_names=("x",)), want, label, [
            (lambda x=x: functional.swiglu(x, w3, w2, w1),
             "the SiLU gates w3's output: the handout gates w1's, w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda x=x: (x @ w1.T * (x @ w3.T)) @ w2.T, "the SiLU is missing: w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda x=x: silu(x @ w1.T * (x @ w3.T)) @ w2.T,
             "the SiLU was applied to the product; it acts on the gate alone: SiLU(w1 x) ⊙ w3 x"),
            (lambda x=x: silu(x @ w1.T) @ w2.T, "w3 is never used: the value w3 x multiplies the gate"),
        ])
    _expect_trains(SWIGLU, module, library, torch.randn(2, 3, s.d_model, generator=gen),
                   torch.randn(2, 3, s.d_model, generator=gen), "w1, w2 and w3")
    passed(SWIGLU, "w1, w2, w3 with the handout's shapes; w2(SiLU(w1 x) ⊙ w3 x) with the library's weights, for "
           "drawn d_model and d_ff; one gradient step matches")


# ---------------------------------------------------------------------------------------
# 6.4 the RoPE module
# ---------------------------------------------------------------------------------------


def _rotated(x: torch.Tensor, positions: torch.Tensor, theta: float, max_seq_len: int,
             pairing: str = "interleaved", sign: float = 1.0) -> torch.Tensor:
    angles = sign * functional.rope_angles(theta, x.shape[-1], max_seq_len)[positions]  # (..., T, d_k/2)
    return functional.apply_rope(x, angles.cos(), angles.sin(), pairing)


@exercise(ROPE)
def rope(cls: type) -> None:
    """Exercise 6.4: ``cls(theta, d_k, max_seq_len)``: cos/sin buffers not in the state dict, sliced by positions.

    θ, d_k (4 … 16, even, never 8) and max_seq_len (20 … 32, never 16) are drawn; every case but
    the first reaches the last position. Whether cos and sin are parameters, saved or kept in
    buffers is what the kernel reports: hints that can only fail; the rotations decide a pass.
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
    cases = (
        (f"x ({T}, {d_k}), positions 0 … {T - 1}", torch.randn(T, d_k, generator=gen), torch.arange(T)),
        (f"x ({batch}, {T}, {d_k}), token_positions ({T},), not consecutive",
         torch.randn(batch, T, d_k, generator=gen), _positions(gen, T, n)),
        (f"x ({batch}, {T}, {d_k}), token_positions ({batch}, {T}), one row per sequence",
         torch.randn(batch, T, d_k, generator=gen), rows),
        (f"x ({batch}, {heads}, {T}, {d_k}) ({heads} heads), token_positions ({batch}, 1, {T})",
         torch.randn(batch, heads, T, d_k, generator=gen), rows[:, None, :]),
    )
    for label, x, positions in cases:
        label = f"{label}; theta={s.theta:g}, d_k={d_k}, max_seq_len={n}"
        got = call_learner(ROPE, module, x, positions, arg_names=("x", "token_positions"))
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
        ])
    passed(ROPE, "no parameters, cos/sin in buffers outside the state dict; rotations match at given positions, "
           "per sequence and broadcast over heads, for drawn θ, d_k and max_seq_len")


# ---------------------------------------------------------------------------------------
# 6.5 causal multi-head self-attention
# ---------------------------------------------------------------------------------------

ATTENTION_NAMES = ("the handout's names are q_proj, k_proj, v_proj and output_proj, each a bias-free "
                   "(d_model, d_model) Linear; RoPE owns nothing that is saved")


def _sized(s: Sizes) -> str:
    return f"d_model={s.d_model}, {s.num_heads} heads, max_seq_len={s.max_seq_len}, theta={s.theta:g}"


@exercise(ATTENTION)
def attention(cls: type) -> None:
    """Exercise 6.5: ``cls(d_model, num_heads, max_seq_len, theta)`` is causal MHSA with RoPE on q and k."""
    refuse_library_object(ATTENTION, cls, EXERCISES[ATTENTION].refuses, EXERCISES[ATTENTION].task)
    gen = fresh_generator()
    s = _sizes(gen)
    module = _build(ATTENTION, cls, s.d_model, s.num_heads, s.max_seq_len, s.theta)
    library = _seeded(gen, lambda: MultiHeadSelfAttention(s.d_model, s.num_heads, s.max_seq_len,
                                                          rope_theta=s.theta))
    _expect_names(ATTENTION, module, library, ATTENTION_NAMES)
    _load_both_ways(ATTENTION, module, library)
    unrotated = MultiHeadSelfAttention(s.d_model, s.num_heads).eval()
    unrotated.load_state_dict(library.state_dict())
    usual_theta = MultiHeadSelfAttention(s.d_model, s.num_heads, s.max_seq_len, rope_theta=10000.0).eval()
    usual_theta.load_state_dict(library.state_dict())
    T = _length(gen, s.max_seq_len)
    batch = 3 if s.num_heads == 2 else 2  # never the head count: positions not broadcast over heads then fail
    positions = torch.stack([_positions(gen, T, s.max_seq_len) for _ in range(batch)])
    cases = (
        (f"x ({batch}, {T}, {s.d_model}), token_positions None", torch.randn(batch, T, s.d_model, generator=gen),
         None),
        (f"x ({batch}, {T}, {s.d_model}), token_positions ({batch}, {T}), not consecutive",
         torch.randn(batch, T, s.d_model, generator=gen), positions),
    )
    for label, x, at in cases:
        label = f"{label}; {_sized(s)}"
        args = (x,) if at is None else (x, at)
        try:
            got = call_learner(ATTENTION, module, *args, arg_names=("x", "token_positions"))
        except Hint as hint:
            if at is None:
                raise
            raise Hint(ATTENTION, f"with token_positions of shape (batch, T) = {tuple(at.shape)} your module "
                       f"failed ({hint.hint}). The heads add a dimension: q is (batch, heads, T, d_head), so the "
                       "positions must broadcast over the heads — pass token_positions.unsqueeze(-2), "
                       "(batch, 1, T), to RoPE") from None
        with torch.no_grad():
            want = library(x, at)
        _compare(ATTENTION, got, want, label, [
            (lambda x=x: library(x), "token_positions was ignored: pass them on to RoPE"),
            (lambda x=x: unrotated(x), "no RoPE: rotate each head's queries and keys before the scores"),
            (lambda x=x, at=at: usual_theta(x, at), "the rotation uses θ = 10000, not the theta argument: build "
             "the RoPE from the theta you are given"),
        ])
    _expect_trains(ATTENTION, module, library, torch.randn(2, T, s.d_model, generator=gen),
                   torch.randn(2, T, s.d_model, generator=gen), "q_proj, k_proj, v_proj and output_proj")
    passed(ATTENTION, "q_proj, k_proj, v_proj, output_proj with the library's weights; causal, RoPE at given "
           "positions broadcast over the heads, for drawn d_model, heads, max_seq_len and θ; one gradient step matches")


# ---------------------------------------------------------------------------------------
# 6.6 the pre-norm block
# ---------------------------------------------------------------------------------------

BLOCK_NAMES = ("the handout's names are ln1, attn (q_proj, k_proj, v_proj, output_proj), ln2 and ffn (w1, w2, w3)")


def _library_block(gen: torch.Generator, s: Sizes) -> TransformerBlock:
    block = _seeded(gen, lambda: TransformerBlock(s.d_model, s.num_heads, s.d_ff, s.max_seq_len, rope_theta=s.theta))
    with torch.no_grad():  # gains far from 1 and from each other, so every norm's place shows
        block.ln1.weight.copy_(1 + 0.5 * torch.randn(s.d_model, generator=gen))
        block.ln2.weight.copy_(0.3 + 0.5 * torch.rand(s.d_model, generator=gen))
    return block


@exercise(BLOCK)
def block(cls: type) -> None:
    """Exercise 6.6: ``cls(d_model, num_heads, d_ff, max_seq_len, theta)`` is the pre-norm block."""
    refuse_library_object(BLOCK, cls, EXERCISES[BLOCK].refuses, EXERCISES[BLOCK].task)
    gen = fresh_generator()
    s = _sizes(gen)
    module = _build(BLOCK, cls, s.d_model, s.num_heads, s.d_ff, s.max_seq_len, s.theta)
    library = _library_block(gen, s)
    _expect_names(BLOCK, module, library, BLOCK_NAMES)
    _load_both_ways(BLOCK, module, library)
    T = _length(gen, s.max_seq_len)
    positions = _positions(gen, T, s.max_seq_len)
    for label, x, at in ((f"x (2, {T}, {s.d_model}) with RMS 3", 3 * torch.randn(2, T, s.d_model, generator=gen),
                          None),
                         (f"x (2, {T}, {s.d_model}), token_positions ({T},)",
                          torch.randn(2, T, s.d_model, generator=gen), positions)):
        label = f"{label}; {_sized(s)}, d_ff={s.d_ff}"
        args = (x,) if at is None else (x, at)
        got = call_learner(BLOCK, module, *args, arg_names=("x", "token_positions"))
        parts = (library.ln1, lambda t, at=at: library.attn(t, at), library.ln2, library.ffn)
        mistakes = [(lambda x=x, f=f, parts=parts: f(x, *parts), hint) for f, hint in PRE_NORM_MISTAKES.values()]
        with torch.no_grad():
            want = library(x, at)
        _compare(BLOCK, got, want, label, mistakes)
    _expect_trains(BLOCK, module, library, torch.randn(2, T, s.d_model, generator=gen),
                   torch.randn(2, T, s.d_model, generator=gen), "ln1, attn, ln2 and ffn")
    passed(BLOCK, "ln1, attn, ln2, ffn with the library's weights; x + attn(ln1(x)), then h + ffn(ln2(h)), with and "
           "without token_positions, for drawn sizes; one gradient step matches")


# ---------------------------------------------------------------------------------------
# 6.7 the language model
# ---------------------------------------------------------------------------------------

LM_NAMES = ("the handout's names are token_embeddings, layers.0 … layers.{num_layers−1}, ln_final and lm_head")


@exercise(LM)
def language_model(cls: type) -> None:
    """Exercise 6.7: ``cls(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)``."""
    refuse_library_object(LM, cls, EXERCISES[LM].refuses, EXERCISES[LM].task)
    gen = fresh_generator()
    s = _sizes(gen)
    args = (s.vocab, s.max_seq_len, s.d_model, s.num_layers, s.num_heads, s.d_ff, s.theta)
    module = _build(LM, cls, *args)
    expect(LM, not probe(module, shares_weight, module, "lm_head.weight", "token_embeddings.weight"),
           "lm_head.weight is token_embeddings.weight (tied): the handout's model has its own output matrix, "
           "lm_head = Linear(d_model, vocab_size)")
    library = _seeded(gen, lambda: TransformerLM(*args))
    with torch.no_grad():
        library.ln_final.weight.copy_(0.5 + torch.rand(s.d_model, generator=gen))
    _expect_names(LM, module, library, LM_NAMES)
    _load_both_ways(LM, module, library)

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
    for label, ids in ((f"token_ids (2, {T})", torch.randint(s.vocab, (2, T), generator=gen)),
                       (f"token_ids ({s.max_seq_len},), the whole context",
                        torch.randint(s.vocab, (s.max_seq_len,), generator=gen))):
        got = call_learner(LM, module, ids, arg_names=("token_ids",))
        with torch.no_grad():
            want = library(ids)
        _compare(LM, got, want, f"{label}; {sized}", [
            (lambda ids=ids: without_final_norm(ids), "the final norm is missing: lm_head(ln_final(x)) — a "
             "pre-norm stack never normalises its stream, so the head needs one norm at the end"),
            (lambda ids=ids: tied(ids), "the output uses the embedding matrix (a tied head): the handout's model "
             "has its own lm_head"),
            (lambda want=want: torch.softmax(want, dim=-1), "you returned probabilities: return the logits, "
             "the loss applies the (log-)softmax itself"),
        ])
    _expect_trains(LM, module, library, torch.randint(s.vocab, (2, T), generator=gen),
                   torch.randint(s.vocab, (2, T), generator=gen), "token_embeddings, the layers, ln_final and lm_head")
    passed(LM, "token_embeddings, layers, ln_final, lm_head with the library's weights; logits match for drawn "
           "sizes, θ and context; one gradient step matches")
