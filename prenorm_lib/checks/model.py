"""Checkers for notebook 06 (your Transformer): every module of the CS336 interface, built by the learner.

Each module check builds the learner's class with the handout's constructor arguments,
checks its parameter names and shapes (the state-dict names the handout grades), loads
the library's weights into it and compares outputs, then loads the learner's weights
into the library's module and compares again. A wrong output is compared with the same
weights run through a typical mistake (post-norm wiring, a missing final norm, RoPE
positions not broadcast over the heads, ...), and a match names that mistake.

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

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from prenorm_lib import functional
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.block import TransformerBlock
from prenorm_lib.checks.core import (
    MODULE_CLASS,
    Hint,
    call_learner,
    describe,
    exercise,
    expect,
    expect_close,
    fresh_generator,
    object_facts,
    passed,
    probe,
    refuse_library_object,
)
from prenorm_lib.ffn import SwiGLU
from prenorm_lib.layers import Embedding, Linear
from prenorm_lib.model import TransformerLM

__all__ = ["REIMPLEMENTS", "attention", "block", "embedding", "language_model", "linear", "rope", "swiglu"]

LINEAR, EMBEDDING, SWIGLU, ROPE, ATTENTION, BLOCK, LM = "6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7"

# What each exercise of notebook 06 re-implements: the grader withholds these from the graded kernel.
REIMPLEMENTS: dict[str, list[str]] = {
    LINEAR: ["prenorm_lib.layers.Linear"],
    EMBEDDING: ["prenorm_lib.layers.Embedding"],
    SWIGLU: ["prenorm_lib.ffn.SwiGLU"],
    ROPE: ["prenorm_lib.rope.RotaryPositionalEmbedding"],
    ATTENTION: ["prenorm_lib.attention.MultiHeadSelfAttention"],
    BLOCK: ["prenorm_lib.block.TransformerBlock"],
    LM: ["prenorm_lib.model.TransformerLM"],
}

D_MODEL, NUM_HEADS, D_FF, MAX_SEQ_LEN, THETA, VOCAB, NUM_LAYERS = 24, 3, 40, 16, 10000.0, 30, 2
TRUNCATED_STD = 0.98658  # the standard deviation of N(0, 1) truncated at ±3
TRUNCATED_AT_2_STD = 0.87962  # ... and at ±2 (trunc_normal_'s default cut-offs, for std = 1)
ATOL = 1e-5


# --- probes: they run where the learner's module lives and return plain data ------------------


def state_dict_of(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the module's state dict (a probe)."""
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def load_state(module: nn.Module, state: dict[str, torch.Tensor]) -> str:
    """``module.load_state_dict(state)``; "" on success, else the error's text (a probe)."""
    try:
        module.load_state_dict(state)
    except Exception as exc:  # a learner's module may fail to load in any way
        return f"{type(exc).__name__}: {exc}"[:600]
    return ""


def buffers_of(module: nn.Module) -> list[str]:
    """The names of the module's buffers, saved in the state dict or not (a probe)."""
    return [name for name, _ in module.named_buffers()]


def shares_weight(module: nn.Module, first: str, second: str) -> bool:
    """True when two dotted attributes are one tensor (a tied embedding and head; a probe)."""
    a, b = module, module
    for part in first.split("."):
        a = getattr(a, part, None)
    for part in second.split("."):
        b = getattr(b, part, None)
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.data_ptr() == b.data_ptr()


def set_eval(module: nn.Module) -> None:
    """Put the learner's module in eval mode (a probe)."""
    module.eval()


# --- shared steps ----------------------------------------------------------------------------


def _seeded(seed_from: torch.Generator, build: Callable[[], nn.Module]) -> nn.Module:
    """A library module initialised from a seed drawn from ``seed_from``, without touching the caller's RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**62, (), generator=seed_from)))
        return build().eval()


def _build(ex: str, cls: Any, *args: Any) -> Any:
    module = call_learner(ex, cls, *args)
    facts = object_facts(module)
    expect(ex, MODULE_CLASS in facts["types"], f"{describe(module)} is not an nn.Module — subclass nn.Module and "
           "call super().__init__() first")
    return module


def _expect_names(ex: str, module: Any, library: nn.Module, names_hint: str) -> None:
    """The learner's state dict has the library's names and shapes (the handout's)."""
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
    """The library's weights load into the learner's module, and the learner's into a library copy."""
    error = probe(module, load_state, module, state_dict_of(library))
    expect(ex, not error, f"the library's state dict does not load into your module: {error}")
    probe(module, set_eval, module)
    mine = probe(module, state_dict_of, module)
    error = load_state(library, mine)
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


def _init_statistics(ex: str, weight: Any, std: float, formula: str, others: dict[str, float]) -> None:
    """A freshly initialised weight looks like N(0, std²) truncated at ±3·std."""
    expect(ex, isinstance(weight, torch.Tensor), "the module has no `weight` tensor")
    w = weight.detach().double().flatten()
    measured, largest = float(w.std()), float(w.abs().max())
    expect(ex, bool(torch.isfinite(w).all()) and measured > 0, "the fresh weight is not filled with random numbers "
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


def _weight(module: Any, name: str = "weight") -> Any:
    facts = object_facts(module, [name])["attributes"].get(name)
    return None if facts is None else facts["tensor"]


# ---------------------------------------------------------------------------------------
# 6.1 Linear and 6.2 Embedding
# ---------------------------------------------------------------------------------------


@exercise(LINEAR)
def linear(cls: type) -> None:
    """Exercise 6.1: ``cls(in_features, out_features)`` is the handout's bias-free Linear."""
    refuse_library_object(LINEAR, cls, {"prenorm_lib.layers.Linear", "torch.nn.modules.linear.Linear"},
                          "this exercise asks you to write Linear yourself: an nn.Parameter and x @ W.T")
    d_in, d_out = 256, 384
    module = _build(LINEAR, cls, d_in, d_out)
    _expect_names(LINEAR, module, Linear(d_in, d_out), "a bias-free Linear owns one parameter, `weight`")
    std = math.sqrt(2 / (d_in + d_out))
    _init_statistics(LINEAR, _weight(module), std, "σ² = 2 / (in_features + out_features)",
                     {"N(0, 1)": 1.0, "σ² = 1/in_features": d_in**-0.5, "σ² = 1/out_features": d_out**-0.5,
                      "σ = 2 / (in + out), a standard deviation where the handout means a variance":
                      2 / (d_in + d_out)})
    gen = fresh_generator()
    small = _build(LINEAR, cls, 7, 5)
    library = _seeded(gen, lambda: Linear(7, 5))
    _load_both_ways(LINEAR, small, library)
    for label, x in (("x (2, 3, 7)", torch.randn(2, 3, 7, generator=gen)), ("x (7,)", torch.randn(7, generator=gen))):
        want = library(x)
        got = call_learner(LINEAR, small, x, arg_names=("x",))
        _compare(LINEAR, got, want, label)
    passed(LINEAR, "weight (out, in), no bias, N(0, 2/(in+out)) truncated at ±3σ; y = x Wᵀ with the library's weights "
           "both ways")


@exercise(EMBEDDING)
def embedding(cls: type) -> None:
    """Exercise 6.2: ``cls(num_embeddings, embedding_dim)`` is the handout's Embedding."""
    refuse_library_object(EMBEDDING, cls, {"prenorm_lib.layers.Embedding", "torch.nn.modules.sparse.Embedding"},
                          "this exercise asks you to write Embedding yourself: an nn.Parameter and indexing")
    vocab, dim = 512, 96
    module = _build(EMBEDDING, cls, vocab, dim)
    _expect_names(EMBEDDING, module, Embedding(vocab, dim), "an Embedding owns one parameter, `weight`, "
                  "(num_embeddings, embedding_dim)")
    _init_statistics(EMBEDDING, _weight(module), 1.0, "N(0, 1)",
                     {"Linear's σ² = 2 / (in + out)": math.sqrt(2 / (vocab + dim)), "σ² = 1/embedding_dim":
                      dim**-0.5})
    gen = fresh_generator()
    library = _seeded(gen, lambda: Embedding(vocab, dim))
    _load_both_ways(EMBEDDING, module, library)
    for label, ids in (("token_ids (2, 9)", torch.randint(vocab, (2, 9), generator=gen)),
                       ("token_ids (5,) with repeats", torch.tensor([3, 3, 0, vocab - 1, 3]))):
        got = call_learner(EMBEDDING, module, ids, arg_names=("token_ids",))
        _compare(EMBEDDING, got, library(ids), label)
    passed(EMBEDDING, "weight (num_embeddings, embedding_dim), N(0, 1) truncated at ±3; rows looked up with the "
           "library's table both ways")


# ---------------------------------------------------------------------------------------
# 6.3 SwiGLU
# ---------------------------------------------------------------------------------------


@exercise(SWIGLU)
def swiglu(cls: type) -> None:
    """Exercise 6.3: ``cls(d_model, d_ff)`` owns w1, w2, w3 and computes w2(SiLU(w1 x) ⊙ w3 x)."""
    refuse_library_object(SWIGLU, cls, {"prenorm_lib.ffn.SwiGLU", "prenorm_lib.ffn.GatedFeedForward"},
                          "this exercise asks you to write the module yourself from three of your Linears")
    module = _build(SWIGLU, cls, D_MODEL, D_FF)
    gen = fresh_generator()
    library = _seeded(gen, lambda: SwiGLU(D_MODEL, D_FF))
    _expect_names(SWIGLU, module, library, "the handout's names are w1 (the gate, (d_ff, d_model)), w2 (the way "
                  "down, (d_model, d_ff)) and w3 (the value, (d_ff, d_model)), each a bias-free Linear")
    _load_both_ways(SWIGLU, module, library)
    w1, w2, w3 = library.w1.weight, library.w2.weight, library.w3.weight
    silu = torch.nn.functional.silu
    for label, x in (("x (2, 5, 24)", torch.randn(2, 5, D_MODEL, generator=gen)),
                     ("x (3, 24)", 2 * torch.randn(3, D_MODEL, generator=gen))):
        got = call_learner(SWIGLU, module, x, arg_names=("x",))
        _compare(SWIGLU, got, library(x), label, [
            (lambda x=x: functional.swiglu(x, w3, w2, w1),
             "the SiLU gates w3's output: the handout gates w1's, w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda x=x: (x @ w1.T * (x @ w3.T)) @ w2.T, "the SiLU is missing: w2(SiLU(w1 x) ⊙ w3 x)"),
            (lambda x=x: silu(x @ w1.T * (x @ w3.T)) @ w2.T,
             "the SiLU was applied to the product; it acts on the gate alone: SiLU(w1 x) ⊙ w3 x"),
            (lambda x=x: silu(x @ w1.T) @ w2.T, "w3 is never used: the value w3 x multiplies the gate"),
        ])
    passed(SWIGLU, "w1, w2, w3 with the handout's shapes; w2(SiLU(w1 x) ⊙ w3 x) with the library's weights both ways")


# ---------------------------------------------------------------------------------------
# 6.4 the RoPE module
# ---------------------------------------------------------------------------------------

D_K = 8


def _rotated(x: torch.Tensor, positions: torch.Tensor, pairing: str = "interleaved", sign: float = 1.0):
    angles = sign * functional.rope_angles(THETA, D_K, MAX_SEQ_LEN)[positions]  # (..., T, d_k/2)
    return functional.apply_rope(x, angles.cos(), angles.sin(), pairing)


@exercise(ROPE)
def rope(cls: type) -> None:
    """Exercise 6.4: ``cls(theta, d_k, max_seq_len)``: cos/sin buffers not in the state dict, sliced by positions."""
    refuse_library_object(ROPE, cls, {"prenorm_lib.rope.RotaryPositionalEmbedding"},
                          "this exercise asks you to write the module yourself")
    module = _build(ROPE, cls, THETA, D_K, MAX_SEQ_LEN)
    facts = object_facts(module)
    expect(ROPE, not facts["parameters"], f"the module has parameters ({', '.join(n for n, _ in facts['parameters'])}):"
           " cos and sin are fixed by θ, so keep them in buffers (self.register_buffer), not nn.Parameter — the "
           "optimizer would train them")
    saved = sorted(probe(module, state_dict_of, module))
    expect(ROPE, not saved, f"the state dict holds {', '.join(saved)}: register the cos/sin buffers with "
           "persistent=False — they are derived from θ, and the handout's state dicts have no such entries")
    expect(ROPE, bool(probe(module, buffers_of, module)), "the module has no buffer: compute cos and sin once in "
           "__init__, (max_seq_len, d_k/2) each, and keep them with self.register_buffer(..., persistent=False)")
    gen = fresh_generator()
    spread = torch.randperm(MAX_SEQ_LEN, generator=gen)[:6].sort().values
    batch_positions = torch.stack([torch.randperm(MAX_SEQ_LEN, generator=gen)[:6].sort().values for _ in range(2)])
    cases = (
        ("x (6, 8), positions 0 … 5", torch.randn(6, D_K, generator=gen), torch.arange(6)),
        ("x (2, 6, 8), token_positions (6,), not consecutive", torch.randn(2, 6, D_K, generator=gen), spread),
        ("x (2, 6, 8), token_positions (2, 6), one row per sequence", torch.randn(2, 6, D_K, generator=gen),
         batch_positions),
        ("x (2, 3, 6, 8) (3 heads), token_positions (2, 1, 6)", torch.randn(2, 3, 6, D_K, generator=gen),
         batch_positions[:, None, :]),
    )
    for label, x, positions in cases:
        got = call_learner(ROPE, module, x, positions, arg_names=("x", "token_positions"))
        _compare(ROPE, got, _rotated(x, positions), label, [
            (lambda x=x, p=positions: _rotated(x, p, "half"),
             "you rotated the pairs (k, k + d_k/2); the handout pairs neighbours (2k, 2k + 1)"),
            (lambda x=x, p=positions: _rotated(x, p, sign=-1.0),
             "the rotation goes the wrong way: (x₀, x₁) → (x₀ cos − x₁ sin, x₀ sin + x₁ cos)"),
            (lambda x=x: _rotated(x, torch.arange(x.shape[-2])),
             "token_positions was ignored: slice cos and sin by token_positions (cos[token_positions]), "
             "not by 0 … T−1"),
        ])
    passed(ROPE, "no parameters, cos/sin in buffers outside the state dict; rotations match at given positions, "
           "per sequence and broadcast over heads")


# ---------------------------------------------------------------------------------------
# 6.5 causal multi-head self-attention
# ---------------------------------------------------------------------------------------

ATTENTION_NAMES = ("the handout's names are q_proj, k_proj, v_proj and output_proj, each a bias-free "
                   "(d_model, d_model) Linear; RoPE owns nothing that is saved")


@exercise(ATTENTION)
def attention(cls: type) -> None:
    """Exercise 6.5: ``cls(d_model, num_heads, max_seq_len, theta)`` is causal MHSA with RoPE on q and k."""
    refuse_library_object(ATTENTION, cls, {"prenorm_lib.attention.MultiHeadSelfAttention",
                                           "torch.nn.modules.activation.MultiheadAttention"},
                          "this exercise asks you to assemble attention from your Linear and RoPE")
    module = _build(ATTENTION, cls, D_MODEL, NUM_HEADS, MAX_SEQ_LEN, THETA)
    gen = fresh_generator()
    library = _seeded(gen, lambda: MultiHeadSelfAttention(D_MODEL, NUM_HEADS, MAX_SEQ_LEN, rope_theta=THETA))
    _expect_names(ATTENTION, module, library, ATTENTION_NAMES)
    _load_both_ways(ATTENTION, module, library)
    unrotated = MultiHeadSelfAttention(D_MODEL, NUM_HEADS).eval()
    unrotated.load_state_dict(library.state_dict())
    positions = torch.stack([torch.randperm(MAX_SEQ_LEN, generator=gen)[:6].sort().values for _ in range(2)])
    cases = (
        ("x (2, 6, 24), token_positions None", torch.randn(2, 6, D_MODEL, generator=gen), None),
        ("x (2, 6, 24), token_positions (2, 6), not consecutive", torch.randn(2, 6, D_MODEL, generator=gen),
         positions),
    )
    for label, x, at in cases:
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
        ])
    passed(ATTENTION, "q_proj, k_proj, v_proj, output_proj load both ways; causal, RoPE at given positions "
           "broadcast over the heads")


# ---------------------------------------------------------------------------------------
# 6.6 the pre-norm block
# ---------------------------------------------------------------------------------------

BLOCK_NAMES = ("the handout's names are ln1, attn (q_proj, k_proj, v_proj, output_proj), ln2 and ffn (w1, w2, w3)")


def _library_block(gen: torch.Generator) -> TransformerBlock:
    block = _seeded(gen, lambda: TransformerBlock(D_MODEL, NUM_HEADS, D_FF, MAX_SEQ_LEN, rope_theta=THETA))
    with torch.no_grad():  # gains far from 1 and from each other, so every norm's place shows
        block.ln1.weight.copy_(1 + 0.5 * torch.randn(D_MODEL, generator=gen))
        block.ln2.weight.copy_(0.3 + 0.5 * torch.rand(D_MODEL, generator=gen))
    return block


@exercise(BLOCK)
def block(cls: type) -> None:
    """Exercise 6.6: ``cls(d_model, num_heads, d_ff, max_seq_len, theta)`` is the pre-norm block."""
    # imported here, not at the top: a graded kernel's copy of checks.block keeps only its probes
    from prenorm_lib.checks.block import PRE_NORM_MISTAKES

    refuse_library_object(BLOCK, cls, {"prenorm_lib.block.TransformerBlock"},
                          "this exercise asks you to assemble the block from your attention and SwiGLU")
    module = _build(BLOCK, cls, D_MODEL, NUM_HEADS, D_FF, MAX_SEQ_LEN, THETA)
    gen = fresh_generator()
    library = _library_block(gen)
    _expect_names(BLOCK, module, library, BLOCK_NAMES)
    _load_both_ways(BLOCK, module, library)
    library = _library_block(gen)  # fresh weights for the outputs, loaded into the learner's module again
    error = probe(module, load_state, module, state_dict_of(library))
    expect(BLOCK, not error, f"the library's state dict does not load into your module: {error}")
    positions = torch.randperm(MAX_SEQ_LEN, generator=gen)[:5].sort().values
    for label, x, at in (("x (2, 5, 24) with RMS 3", 3 * torch.randn(2, 5, D_MODEL, generator=gen), None),
                         ("x (2, 5, 24), token_positions (5,)", torch.randn(2, 5, D_MODEL, generator=gen), positions)):
        args = (x,) if at is None else (x, at)
        got = call_learner(BLOCK, module, *args, arg_names=("x", "token_positions"))
        parts = (library.ln1, lambda t, at=at: library.attn(t, at), library.ln2, library.ffn)
        mistakes = [(lambda x=x, f=f, parts=parts: f(x, *parts), hint) for f, hint in PRE_NORM_MISTAKES.values()]
        with torch.no_grad():
            want = library(x, at)
        _compare(BLOCK, got, want, label, mistakes)
    passed(BLOCK, "ln1, attn, ln2, ffn load both ways; x + attn(ln1(x)), then h + ffn(ln2(h)), with and without "
           "token_positions")


# ---------------------------------------------------------------------------------------
# 6.7 the language model
# ---------------------------------------------------------------------------------------

LM_NAMES = ("the handout's names are token_embeddings, layers.0 … layers.{num_layers−1}, ln_final and lm_head")


@exercise(LM)
def language_model(cls: type) -> None:
    """Exercise 6.7: ``cls(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)``."""
    refuse_library_object(LM, cls, {"prenorm_lib.model.TransformerLM"},
                          "this exercise asks you to assemble the model from your embedding, blocks and Linear")
    args = (VOCAB, MAX_SEQ_LEN, D_MODEL, NUM_LAYERS, NUM_HEADS, D_FF, THETA)
    module = _build(LM, cls, *args)
    expect(LM, not probe(module, shares_weight, module, "lm_head.weight", "token_embeddings.weight"),
           "lm_head.weight is token_embeddings.weight (tied): the handout's model has its own output matrix, "
           "lm_head = Linear(d_model, vocab_size)")
    gen = fresh_generator()
    library = _seeded(gen, lambda: TransformerLM(*args))
    with torch.no_grad():
        library.ln_final.weight.copy_(0.5 + torch.rand(D_MODEL, generator=gen))
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

    for label, ids in (("token_ids (2, 7)", torch.randint(VOCAB, (2, 7), generator=gen)),
                       ("token_ids (16,), the whole context", torch.randint(VOCAB, (MAX_SEQ_LEN,), generator=gen))):
        got = call_learner(LM, module, ids, arg_names=("token_ids",))
        with torch.no_grad():
            want = library(ids)
        _compare(LM, got, want, label, [
            (lambda ids=ids: without_final_norm(ids), "the final norm is missing: lm_head(ln_final(x)) — a "
             "pre-norm stack never normalises its stream, so the head needs one norm at the end"),
            (lambda ids=ids: tied(ids), "the output uses the embedding matrix (a tied head): the handout's model "
             "has its own lm_head"),
            (lambda want=want: torch.softmax(want, dim=-1), "you returned probabilities: return the logits, "
             "the loss applies the (log-)softmax itself"),
        ])
    passed(LM, "token_embeddings, layers, ln_final, lm_head load both ways; logits match the library's with the "
           "same weights")
