"""No false hints: how often does a checker tell a correct answer it is wrong? (issue 36, item 6)

For every checker of the course (1.1 … 6.9), several correct answers -- the handout's formula,
the library's, another association of the same arithmetic, a half-precision path where the
exercise has one; for notebook 06 three whole learners (``false_hints_06``: the notebook's own
solution cells, a handout-style learner and one that reassociates everything) -- are checked
over many drawn checks, in this process (the checker's own logic, not a kernel per draw: the
kernel only carries values). A drawn check is one whole call of the checker, as a learner's
check cell makes it, with every size and input drawn afresh. A hint on any correct form is a
false hint; the benchmark reads 0 for every checker, or it names the form, the hint and the
draw's seed so the draw can be replayed (``--seed``).

    python -m prenorm_course.exercises.false_hints               # 20,000 drawn checks per checker
    python -m prenorm_course.exercises.false_hints --draws 200 --only 1.1 4.1
    python -m prenorm_course.exercises.false_hints --seconds 400 --jobs 2   # each checker at most 400 s

``make false-hints`` runs it (``DRAWS=``, ``ONLY=``, ``SEED=``, ``SECONDS=``, ``JOBS=``); a run of
every checker writes its table to ``docs/measurements.md#false-hints`` (``--into`` another file).
A small fixed sample runs in CI (``tests/course/test_false_hints.py``). Draws are made
reproducible by seeding each check's ``fresh_generator`` from ``--seed`` and the draw's number.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import math
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from prenorm_course import measurements
from prenorm_course.exercises import false_hints_06
from prenorm_lib.checks import Hint, attention, block, core, ffn, model, rmsnorm, rope
from prenorm_lib.layers import Linear

# --- correct answers, each written as a learner might ---------------------------------------------


def rms_handout(x, weight, eps=1e-5):  # the handout: x / sqrt(mean(x²) + eps) · g, in float32
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def rms_library_formula(x, weight, eps=1e-5):  # the library's: rsqrt
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def rms_weight_first(x, weight, eps=1e-5):  # another association: (x · g) / rms
    x32 = x.to(torch.float32)
    rms = torch.sqrt((x32 * x32).sum(-1, keepdim=True) / x.shape[-1] + eps)
    return ((x32 * weight.to(torch.float32)) / rms).to(x.dtype)


def rms_half_path(x, weight, eps=1e-5):  # the mean of squares in float32, the rest in x's own dtype
    scale = torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)
    return x * scale * weight


my_rms_norm = rms_handout  # what 1.2's forward calls, by 1.1's name


class NormHandout(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        return my_rms_norm(x, self.weight, self.eps)


class NormKeywords(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.empty(d_model, device=device, dtype=dtype).fill_(1.0))

    def forward(self, x):
        return my_rms_norm(x=x, weight=self.weight, eps=self.eps)


def silu_sigmoid(x):
    return x * torch.sigmoid(x)


def silu_exp(x):  # σ(x) = 1 / (1 + exp(−x)): exp(−x) = inf only makes σ = 0
    return x / (1 + torch.exp(-x))


def silu_tanh(x):  # σ(x) = (1 + tanh(x/2)) / 2
    return x * (1 + torch.tanh(x / 2)) / 2


def silu_float32(x):  # computed in float32, cast back
    x32 = x.float()
    return (x32 * torch.sigmoid(x32)).to(x.dtype)


def swiglu_handout(x, w1, w2, w3):
    gate = x @ w1.T
    return (gate * torch.sigmoid(gate) * (x @ w3.T)) @ w2.T


def swiglu_linear(x, w1, w2, w3):
    linear = torch.nn.functional.linear
    a = linear(x, w1)
    return linear(a * torch.sigmoid(a) * linear(x, w3), w2)


def swiglu_einsum(x, w1, w2, w3):
    a, b = torch.einsum("...d,fd->...f", x, w1), torch.einsum("...d,fd->...f", x, w3)
    return torch.einsum("...f,df->...d", a * torch.sigmoid(a) * b, w2)


def width_round(d_model):
    return max(64, round(8 * d_model / 3 / 64) * 64)


def width_integer(d_model):  # in integers: nearest multiple of 64 of 8·d/3
    return max(64, (8 * d_model + 96) // 192 * 64)


def cache_outer(theta, d_k, max_seq_len):
    speeds = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), speeds)
    return angles.cos().float(), angles.sin().float()


def cache_broadcast(theta, d_k, max_seq_len):
    k = torch.arange(d_k // 2, dtype=torch.float32)
    angles = torch.arange(max_seq_len, dtype=torch.float32)[:, None] / theta ** (2 * k / d_k)[None, :]
    return torch.cos(angles), torch.sin(angles)


def rotate_stack(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def rotate_interleave(x, cos, sin):  # cos, sin expanded to every channel; the partner with its sign
    c, s = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return (x.float() * c + partner.float() * s).to(x.dtype)


def rotate_float32(x, cos, sin):
    x32 = x.float()
    out = torch.empty_like(x32)
    out[..., 0::2] = x32[..., 0::2] * cos - x32[..., 1::2] * sin
    out[..., 1::2] = x32[..., 0::2] * sin + x32[..., 1::2] * cos
    return out.to(x.dtype)


def stable_handout(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def stable_float32(x, dim):
    wide = x if x.dtype == torch.float64 else x.float()
    e = torch.exp(wide - wide.max(dim=dim, keepdim=True).values)
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def stable_logsumexp(x, dim):
    wide = x if x.dtype == torch.float64 else x.float()
    return torch.exp(wide - torch.logsumexp(wide, dim=dim, keepdim=True)).to(x.dtype)


def attention_handout(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return stable_handout(scores, -1) @ V


def attention_where(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) * Q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    return torch.einsum("...qk,...kv->...qv", stable_float32(scores, -1), V)


def attention_scaled_queries(Q, K, V, mask=None):  # the scale on the queries, before the product
    scores = (Q / math.sqrt(Q.shape[-1])) @ K.mT
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    return stable_logsumexp(scores, -1) @ V


def _rope_pairs(t, positions, theta):
    d = t.shape[-1]
    speeds = theta ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * speeds  # (T, d/2)
    return rotate_stack(t, angles.cos(), angles.sin())


class AttentionHandout(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, rope_theta):
        super().__init__()
        self.num_heads, self.theta = num_heads, rope_theta
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)

    def forward(self, x, token_positions=None):
        T, d = x.shape[-2:]
        positions = torch.arange(T) if token_positions is None else token_positions

        def heads(t):  # (..., T, d) -> (..., H, T, d/H)
            return t.unflatten(-1, (self.num_heads, d // self.num_heads)).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        q, k = _rope_pairs(q, positions, self.theta), _rope_pairs(k, positions, self.theta)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        out = attention_handout(q, k, v, mask)  # (..., H, T, d/H)
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


class AttentionReshaped(AttentionHandout):
    def forward(self, x, token_positions=None):
        T, d, H = x.shape[-2], x.shape[-1], self.num_heads
        positions = torch.arange(T) if token_positions is None else token_positions
        q, k, v = (p(x).reshape(*x.shape[:-1], H, d // H).movedim(-2, -3)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = _rope_pairs(q, positions, self.theta), _rope_pairs(k, positions, self.theta)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        out = attention_where(q, k, v, ~future)
        return self.output_proj(out.movedim(-3, -2).reshape(x.shape))


def pre_handout(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln2(h))


def pre_one_line(x, ln1, attn, ln2, ffn):
    return (h := x + attn(ln1(x))) + ffn(ln2(h))


def post_handout(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(z + ffn(z))


def post_renamed(x, ln1, attn, ln2, ffn):
    after_attention = attn(x) + x
    z = ln1(after_attention)
    return ln2(ffn(z) + z)


# --- the benchmark ------------------------------------------------------------------------------------


@dataclass
class Checker:
    """One checker and the correct answers it must never hint at: ``forms`` name -> the arguments of its call."""

    exercise: str
    check: Callable
    forms: dict[str, tuple]


CHECKERS = [
    Checker("1.1", rmsnorm.rms_norm, {f.__name__: (f,) for f in (rms_handout, rms_library_formula, rms_weight_first,
                                                                  rms_half_path)}),
    Checker("1.2", rmsnorm.rms_norm_module, {c.__name__: (c,) for c in (NormHandout, NormKeywords)}),
    Checker("1.3", rmsnorm.fp16_prediction, {"words": ("inf", "0"), "numbers": (float("inf"), 0)}),
    Checker("2.1", ffn.silu, {f.__name__: (f,) for f in (silu_sigmoid, silu_exp, silu_tanh, silu_float32)}),
    Checker("2.2", ffn.swiglu, {f.__name__: (f,) for f in (swiglu_handout, swiglu_linear, swiglu_einsum)}),
    Checker("2.3", ffn.hidden_dim, {f.__name__: (f,) for f in (width_round, width_integer)}),
    Checker("3.1", rope.cos_sin_cache, {f.__name__: (f,) for f in (cache_outer, cache_broadcast)}),
    Checker("3.2", rope.rotate_pairs, {f.__name__: (f,) for f in (rotate_stack, rotate_interleave, rotate_float32)}),
    Checker("3.3", rope.long_range_pair, {"index": (rope.first_slow_pair(),)}),
    Checker("4.1", attention.stable_softmax, {f.__name__: (f,) for f in (stable_handout, stable_float32,
                                                                          stable_logsumexp)}),
    Checker("4.2", attention.score_spread, {"eight": (8,), "root": (math.sqrt(64),)}),
    Checker("4.3", attention.attention, {f.__name__: (f,) for f in (attention_handout, attention_where,
                                                                     attention_scaled_queries)}),
    Checker("4.4", attention.causal_self_attention, {c.__name__: (c,) for c in (AttentionHandout, AttentionReshaped)}),
    Checker("5.1", block.pre_norm_forward, {f.__name__: (f,) for f in (pre_handout, pre_one_line)}),
    Checker("5.2", block.post_norm_forward, {f.__name__: (f,) for f in (post_handout, post_renamed)}),
    Checker("5.3", block.divergence_prediction, {"record": ({"pre": "trains", "post": "stalls", "none": "diverges"},)}),
    *(Checker(exercise_id, check, false_hints_06.forms(exercise_id)) for exercise_id, check in (
        ("6.1", model.linear), ("6.2", model.embedding), ("6.3", model.swiglu), ("6.4", model.rope),
        ("6.5", model.attention), ("6.6", model.block), ("6.7", model.language_model), ("6.8", model.accounting),
        ("6.9", model.cached_attention))),
]
CHECKER_MODULES = (core, rmsnorm, ffn, rope, attention, block, model)


@contextlib.contextmanager
def seeded_draws(seed: int) -> Iterator[Callable[[], int]]:
    """Every check's ``fresh_generator`` seeded from ``seed`` and a counter; yields the next seed to be used."""
    counter = itertools.count()
    current = [seed]

    def fresh_generator() -> torch.Generator:
        current[0] = seed * 1_000_003 + next(counter)
        return torch.Generator().manual_seed(current[0])

    saved = {module: module.fresh_generator for module in CHECKER_MODULES if hasattr(module, "fresh_generator")}
    for module in saved:
        module.fresh_generator = fresh_generator
    try:
        yield lambda: current[0]
    finally:
        for module, original in saved.items():
            module.fresh_generator = original


@dataclass
class Outcome:
    exercise: str
    forms: int = 0
    draws: int = 0
    seconds: float = 0.0
    false_hints: list[str] = field(default_factory=list)
    stopped: bool = False  # the time limit ended the draws before --draws

    @property
    def rate(self) -> float:
        return len(self.false_hints) / self.draws if self.draws else 0.0


def measure(checker: Checker, draws: int, seed: int, seconds: float | None = None) -> Outcome:
    """``draws`` checks of ``checker``, the forms in turn, each on fresh drawn inputs; every hint recorded.

    A draw is one whole check, as a learner's check cell runs it (every size, weight and input it
    draws). ``seconds`` stops the draws early (``Outcome.stopped``). A check that neither hints nor
    prints its pass line is an error, not a pass.
    """
    outcome = Outcome(checker.exercise, len(checker.forms))
    forms = list(checker.forms.items())
    start = time.perf_counter()
    with seeded_draws(seed) as last_seed:
        for i in range(draws):
            if seconds is not None and i and time.perf_counter() - start > seconds:
                outcome.stopped = True
                break
            name, args = forms[i % len(forms)]
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    checker.check.core(*args)
            except Hint as hint:
                outcome.false_hints.append(f"{name} (draw {i}, generator seed {last_seed()}): {hint}")
            else:
                if f"Exercise {checker.exercise} passed" not in printed.getvalue():
                    raise RuntimeError(f"{checker.exercise}'s checker returned without passing {name} "
                                       f"(draw {i}): {printed.getvalue()!r}")
            outcome.draws += 1
    outcome.seconds = time.perf_counter() - start
    return outcome


def _measure_one(job: tuple[Checker | str, int, int, float | None]) -> Outcome:
    """``measure`` in a worker process (one torch thread; the checker named by its exercise id)."""
    exercise, draws, seed, seconds = job
    torch.set_num_threads(1)
    return measure(next(c for c in CHECKERS if c.exercise == exercise), draws, seed, seconds)


def measure_all(chosen: list[Checker], draws: int, seed: int, seconds: float | None = None,
                jobs: int = 1) -> Iterator[Outcome]:
    """``measure`` for each checker, in order, in ``jobs`` worker processes (1: in this one)."""
    work = [(c.exercise, draws, seed, seconds) for c in chosen]
    if jobs <= 1:
        yield from map(_measure_one, work)
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        yield from pool.imap(_measure_one, work)


def markdown(outcomes: list[Outcome], draws: int, seed: int, seconds: float | None) -> str:
    """The section of docs/measurements.md: one row per checker, then what a draw is."""
    rows = ["| exercise | correct forms | drawn checks | false hints | seconds | per check |",
            "|---|---:|---:|---:|---:|---:|"]
    for o in outcomes:
        short = f" (of {draws:,}: the time limit)" if o.stopped else ""
        rows.append(f"| {o.exercise} | {o.forms} | {o.draws:,}{short} | {len(o.false_hints)} | {o.seconds:.0f} | "
                    f"{o.seconds / max(o.draws, 1) * 1e3:.1f} ms |")
    hinted = [line for o in outcomes for line in (f"{o.exercise} {h}" for h in o.false_hints[:3])]
    short = [o.exercise for o in outcomes if o.draws < draws]
    notes = [
        "",
        f"A drawn check is one whole call of the exercise's checker on one correct form, exactly as a learner's "
        f"check cell runs it: every size, weight, position and input it draws is drawn afresh (seed {seed}), so "
        "a 06 check is one module built, loaded, compared over all its cases, modes and dtypes and stepped once, "
        "and a 6.8 check compares three drawn shapes. The forms take turns; each is a correct answer written "
        "as a learner writes it (`prenorm_course/exercises/false_hints.py`, `false_hints_06.py`). A false hint is "
        "any hint on any of them.",
    ]
    if seconds is not None:
        notes += ["", f"Each checker ran until {draws:,} checks or {seconds:.0f} s, whichever came first."]
    if short:
        notes += ["", f"Short of {draws:,} drawn checks: {', '.join(short)}."]
    if hinted:
        notes += ["", "False hints (first three per checker):", "", *(f"- {line}" for line in hinted)]
    return "\n".join([*rows, *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.exercises.false_hints", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=20_000, help="checks per checker (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0)")
    parser.add_argument("--only", nargs="*", metavar="N.M", help="these exercises only (then nothing is written)")
    parser.add_argument("--seconds", type=float, help="stop a checker's draws after this long (default: no limit)")
    parser.add_argument("--jobs", type=int, default=1, help="checkers measured side by side (default 1)")
    parser.add_argument("--into", type=Path, help="the measurements document to write (default docs/measurements.md)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only or ()) - {c.exercise for c in CHECKERS})
    if unknown or args.draws < 1 or args.jobs < 1 or (args.seconds is not None and args.seconds <= 0):
        parser.error(f"--only takes exercise ids of {', '.join(c.exercise for c in CHECKERS)} (got {unknown}); "
                     f"--draws, --jobs and --seconds are positive (got {args.draws}, {args.jobs}, {args.seconds})")
    torch.set_num_threads(1)
    # stopped by a signal (kill, a CI runner's timeout) as by Ctrl-C: the pool's workers stop with this process
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    chosen = [c for c in CHECKERS if not args.only or c.exercise in args.only]
    print(f"false hints over {args.draws} drawn checks per checker, seed {args.seed}; torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start")
    print(f"{'exercise':<9}{'forms':>6}{'draws':>8}{'hints':>7}{'rate':>10}{'seconds':>10}")
    outcomes = []
    with measurements.LoadWatch() as load:
        for outcome in measure_all(chosen, args.draws, args.seed, args.seconds, args.jobs):
            outcomes.append(outcome)
            print(f"{outcome.exercise:<9}{outcome.forms:>6}{outcome.draws:>8}{len(outcome.false_hints):>7}"
                  f"{outcome.rate:>10.2g}{outcome.seconds:>10.0f}" + ("  (time limit)" if outcome.stopped else ""),
                  flush=True)
            for line in outcome.false_hints[:3]:
                print(f"    {line}")
    total = sum(len(o.false_hints) for o in outcomes)
    print(f"load {os.getloadavg()[0]:.1f} at the end; {total} false hints in all")
    if args.only:
        print("(some exercises named: docs/measurements.md keeps the run of them all, `make false-hints`)")
    else:
        command = "make false-hints" + "".join(f" {k}={v}" for k, v in (
            ("DRAWS", args.draws if args.draws != 20_000 else None), ("SEED", args.seed or None),
            ("SECONDS", f"{args.seconds:g}" if args.seconds is not None else None),
            ("JOBS", args.jobs if args.jobs != 1 else None)) if v is not None)
        body = markdown(outcomes, args.draws, args.seed, args.seconds)
        print(f"wrote {measurements.write('false-hints', body, command=command, load=load, path=args.into)}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
