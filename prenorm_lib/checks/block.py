"""Checkers for notebook 05 (pre-norm vs post-norm).

The two block exercises hand the learner the four submodules of a block (``ln1``,
``attn``, ``ln2``, ``ffn``) and ask for the forward pass. A wrong block is compared with
small *wrong* blocks built from the same submodules, each embodying one typical mistake
(the norm inside the residual, a residual forgotten, ln2 applied to the wrong tensor,
...). The two norms get different random gains, so every variant gives a different
output and a match names the mistake.

- Exercise 5.1 ``pre_norm_forward(fn)``: ``fn(x, ln1, attn, ln2, ffn)`` →
  ``h = x + attn(ln1(x))``, ``y = h + ffn(ln2(h))``.
- Exercise 5.2 ``post_norm_forward(fn)``: ``fn(x, ln1, attn, ln2, ffn)`` →
  ``z = ln1(x + attn(x))``, ``y = ln2(z + ffn(z))``.
- Exercise 5.3 ``divergence_prediction(prediction)``: does each placement train, stall
  at the unigram loss, or diverge? Checked against the recorded runs (``warmup_grid``,
  read where the checker runs: in the grader, never from the learner's kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from prenorm_lib.block import NORM_PLACEMENTS, TransformerBlock
from prenorm_lib.checks.catalogue import EXERCISES
from prenorm_lib.checks.core import (
    Hint,
    call_learner,
    dense_tensor,
    describe,
    exercise,
    expect,
    expect_close,
    fresh_generator,
    passed,
    probe,
    refuse_library_calls,
    refuse_library_object,
)
from prenorm_lib.checks.probes import BLOCK_PARTS as PARTS
from prenorm_lib.checks.probes import call_counts, counted_parts
from prenorm_lib.lab import experiments
from prenorm_lib.lab.experiments import warmup_grid
from prenorm_lib.lab.train import OUTCOMES

__all__ = ["divergence_prediction", "post_norm_forward", "pre_norm_forward"]

MAX_SEQ_LEN = 16


class Sizes(NamedTuple):
    """The widths of one check's test block, drawn afresh (``_sizes``): TransformerBlock's first three arguments."""

    d_model: int
    num_heads: int
    d_ff: int


def _sizes(gen: torch.Generator) -> Sizes:
    """2 or 3 heads of 4, 6 or 10 channels (d_model 8 … 30, never the notebook's 16), and a d_ff of 2 … 4 times
    d_model: a forward pass that writes in a width instead of letting the submodules carry it fails."""
    num_heads = (2, 3)[int(torch.randint(2, (), generator=gen))]
    d_model = num_heads * (4, 6, 10)[int(torch.randint(3, (), generator=gen))]
    return Sizes(d_model, num_heads, d_model * int(torch.randint(2, 5, (), generator=gen)))

Variant = Callable[..., torch.Tensor]  # (x, ln1, attn, ln2, ffn) -> y


def _test_block(sizes: Sizes | None = None) -> TransformerBlock:
    """A small block, drawn afresh (its sizes too, unless given), whose two norms have different gains."""
    gen = fresh_generator()
    sizes = _sizes(gen) if sizes is None else sizes
    with torch.random.fork_rng(devices=[]):  # the block's own initialisation, without touching the caller's RNG
        torch.manual_seed(int(torch.randint(2**62, (), generator=gen)))
        block = TransformerBlock(*sizes, MAX_SEQ_LEN, norm="pre")
    with torch.no_grad():
        block.ln1.weight.copy_(1 + 0.5 * torch.randn(sizes.d_model, generator=gen))
        block.ln2.weight.copy_(0.3 + 0.5 * torch.rand(sizes.d_model, generator=gen))
    return block.eval()


def _parts_for(fn: Callable, block: TransformerBlock) -> tuple:
    """The block's submodules, counting their calls, where the learner's function lives."""
    sizes = [block.ln1.weight.shape[0], block.attn.num_heads, block.ffn.w1.weight.shape[0]]
    return tuple(probe(fn, counted_parts, sizes, dict(block.state_dict()), MAX_SEQ_LEN))


def _cases(d_model: int) -> dict[str, torch.Tensor]:
    """Inputs of several shapes; the stream gets an RMS far from 1 so norms are visible."""
    gen = fresh_generator()
    d, n = d_model, MAX_SEQ_LEN
    return {
        f"a batch (2, 5, {d})": 3 * torch.randn(2, 5, d, generator=gen),
        f"one unbatched sequence (7, {d})": 0.4 * torch.randn(7, d, generator=gen),
        f"a single token (1, 1, {d})": 2 * torch.randn(1, 1, d, generator=gen),
        f"the full context (3, {n}, {d})": torch.randn(3, n, d, generator=gen),
    }


def _matches(got: object, want: torch.Tensor) -> bool:
    if not dense_tensor(got) or got.shape != want.shape:
        return False
    return bool(torch.allclose(got.detach().double(), want.double(), atol=1e-5, rtol=1e-4))


BLOCK_ARGS = ("x", *PARTS)
BLOCK_IN_PLACE = {"x": "the residual was added in place (x += … or x.add_(…)), which also changes the caller's "
                       "tensor: the residual stream must still hold x when the branch output is added."}


def _check_block(
    ex: str,
    fn: Callable,
    reference: Variant,
    variants: Mapping[str, tuple[Variant, str]],
    formula: str,
) -> None:
    """Run ``fn`` on every case and seed; name the mistake when a wrong variant matches."""
    for _ in range(2):
        block = _test_block()
        parts = (block.ln1, block.attn, block.ln2, block.ffn)
        for label, x in _cases(block.ln1.weight.shape[0]).items():
            counted = _parts_for(fn, block)
            with torch.no_grad():
                want = reference(x, *parts)  # before the learner's call, which gets a copy of x
                got = call_learner(ex, fn, x, *counted, arg_names=BLOCK_ARGS, in_place=BLOCK_IN_PLACE)
            if _matches(got, want):
                continue
            with torch.no_grad():
                for variant, hint in variants.values():
                    if _matches(got, variant(x, *parts)):
                        raise Hint(ex, hint)
            calls = probe(fn, call_counts, *counted)
            never = [name for name, n in zip(PARTS, calls, strict=True) if n == 0]
            detail = f" ({', '.join(never)} {'was' if len(never) == 1 else 'were'} never called)" if never else ""
            expect_close(ex, got, want, f"the output differs from {formula} for {label}{detail}",
                         shape_hint="a block maps (..., T, d_model) to the same shape.",
                         dtype_hint="keep the input's dtype: add tensors, don't convert them.")


# ---------------------------------------------------------------------------------------
# Exercise 5.1: the pre-norm forward pass
# ---------------------------------------------------------------------------------------


def _pre(x, ln1, attn, ln2, ffn):
    h = x + attn(ln1(x))
    return h + ffn(ln2(h))


def _post(x, ln1, attn, ln2, ffn):
    z = ln1(x + attn(x))
    return ln2(z + ffn(z))


PRE_NORM_MISTAKES: dict[str, tuple[Variant, str]] = {
    "post_norm": (
        _post,
        "this is the post-norm block: your norms sit on the residual stream and normalise each sum. In "
        "pre-norm the stream is never normalised; a norm only prepares the input one branch reads.",
    ),
    "norm_inside_residual_attn": (
        lambda x, ln1, attn, ln2, ffn: (h := ln1(x + attn(x))) + ffn(ln2(h)),
        "the first norm is applied to the residual sum after attention — post-norm's placement. In pre-norm "
        "a norm only touches what a branch reads, never the stream.",
    ),
    "norm_inside_residual_both": (
        lambda x, ln1, attn, ln2, ffn: ln2((h := ln1(x + attn(ln1(x)))) + ffn(ln2(h))),
        "a norm is wrapped around a residual sum. In pre-norm the norms sit inside the branches, on what "
        "each branch reads; the sums themselves stay unnormalised.",
    ),
    "forgot_attn_residual": (
        lambda x, ln1, attn, ln2, ffn: (h := attn(ln1(x))) + ffn(ln2(h)),
        "the attention residual is missing: the attention output replaces the stream instead of being added "
        "to it, so the block throws its input away.",
    ),
    "forgot_ffn_residual": (
        lambda x, ln1, attn, ln2, ffn: ffn(ln2(x + attn(ln1(x)))),
        "the FFN residual is missing: the FFN output replaces the stream instead of being added to it.",
    ),
    "forgot_both_residuals": (
        lambda x, ln1, attn, ln2, ffn: ffn(ln2(attn(ln1(x)))),
        "both residual connections are missing: each branch's output replaces the stream instead of being "
        "added to it.",
    ),
    "normalised_stream": (
        lambda x, ln1, attn, ln2, ffn: (h := (n := ln1(x)) + attn(n)) + ffn(ln2(h)),
        "the residual stream itself was normalised: the attention output was added to the normalised input "
        "instead of to the input. Only the branch should see the normalised tensor.",
    ),
    "normalised_stream_both": (
        lambda x, ln1, attn, ln2, ffn: (m := ln2((n := ln1(x)) + attn(n))) + ffn(m),
        "the residual stream itself was normalised (the stream was overwritten with its normalised copy). "
        "Only the branches should see normalised tensors; the stream keeps its values.",
    ),
    "ln2_on_x": (
        lambda x, ln1, attn, ln2, ffn: x + attn(ln1(x)) + ffn(ln2(x)),
        "the FFN branch reads the block's input, so it never sees what attention added: it must read the "
        "stream as it is after the attention residual.",
    ),
    "second_residual_from_x": (
        lambda x, ln1, attn, ln2, ffn: x + ffn(ln2(x + attn(ln1(x)))),
        "the FFN output is added to the block's input, the stream from before attention, which drops the "
        "attention output from the stream.",
    ),
    "ln1_for_both": (
        lambda x, ln1, attn, ln2, ffn: (h := x + attn(ln1(x))) + ffn(ln1(h)),
        "ln1 is used for both branches and ln2 never: each branch has its own norm with its own gain.",
    ),
    "norms_swapped": (
        lambda x, ln1, attn, ln2, ffn: (h := x + attn(ln2(x))) + ffn(ln1(h)),
        "ln1 and ln2 are swapped: the attention branch reads ln2's output and the FFN branch ln1's.",
    ),
    "no_norms": (
        lambda x, ln1, attn, ln2, ffn: (h := x + attn(x)) + ffn(h),
        "no norm is applied anywhere: that is the unnormalised block. In pre-norm each branch reads a "
        "normalised copy of the stream.",
    ),
}


@exercise("5.1")
def pre_norm_forward(fn: Callable) -> None:
    """Exercise 5.1: check ``fn(x, ln1, attn, ln2, ffn)`` is the pre-norm block."""
    refuse_library_object("5.1", fn, EXERCISES["5.1"].refuses, EXERCISES["5.1"].task)
    _check_block("5.1", fn, _pre, PRE_NORM_MISTAKES,
                 "the pre-norm block (each branch reads a normalised copy of the stream, whose sums stay "
                 "unnormalised)")
    refuse_library_calls("5.1", fn, EXERCISES["5.1"].refused_calls, EXERCISES["5.1"].task)
    passed("5.1", "pre-norm block matches TransformerBlock.pre_norm_forward on 4 shapes × 2 seeds")


# ---------------------------------------------------------------------------------------
# Exercise 5.2: the post-norm forward pass
# ---------------------------------------------------------------------------------------

_POST_NORM_MISTAKES: dict[str, tuple[Variant, str]] = {
    "pre_norm": (
        _pre,
        "this is the pre-norm block: your norms sit inside the branches and the stream is never normalised. "
        "Post-norm normalises the stream itself, after each residual sum.",
    ),
    "norms_swapped": (
        lambda x, ln1, attn, ln2, ffn: ln1((z := ln2(x + attn(x))) + ffn(z)),
        "the norms are in the wrong order: the sum after attention went through ln2 and the sum after the "
        "FFN through ln1.",
    ),
    "missing_second_norm": (
        lambda x, ln1, attn, ln2, ffn: (z := ln1(x + attn(x))) + ffn(z),
        "the second norm is missing: the sum after the FFN is returned unnormalised, but post-norm "
        "normalises after each residual sum.",
    ),
    "missing_first_norm": (
        lambda x, ln1, attn, ln2, ffn: ln2((z := x + attn(x)) + ffn(z)),
        "the first norm is missing: the sum after attention reaches the FFN unnormalised.",
    ),
    "residual_after_norm": (
        lambda x, ln1, attn, ln2, ffn: (z := x + ln1(attn(x))) + ln2(ffn(z)),
        "the norm sits on the branch output, before the residual is added: then only the branch is "
        "normalised and the stream never is. Post-norm normalises the sum.",
    ),
    "ffn_on_x": (
        lambda x, ln1, attn, ln2, ffn: ln2(ln1(x + attn(x)) + ffn(x)),
        "the FFN reads the block's input instead of the normalised result of the attention sub-layer.",
    ),
    "second_residual_from_x": (
        lambda x, ln1, attn, ln2, ffn: ln2(x + ffn(ln1(x + attn(x)))),
        "the FFN output is added to the block's input instead of to the normalised result of the attention "
        "sub-layer.",
    ),
    "forgot_attn_residual": (
        lambda x, ln1, attn, ln2, ffn: ln2((z := ln1(attn(x))) + ffn(z)),
        "the attention residual is missing: the first norm receives the attention output alone, not its sum "
        "with the input.",
    ),
    "forgot_ffn_residual": (
        lambda x, ln1, attn, ln2, ffn: ln2(ffn(ln1(x + attn(x)))),
        "the FFN residual is missing: the second norm receives the FFN output alone, not its sum with the "
        "stream.",
    ),
    "ln1_for_both": (
        lambda x, ln1, attn, ln2, ffn: ln1((z := ln1(x + attn(x))) + ffn(z)),
        "ln1 normalises both sums and ln2 is never used: each sub-layer has its own norm with its own gain.",
    ),
    "no_norms": (
        lambda x, ln1, attn, ln2, ffn: (h := x + attn(x)) + ffn(h),
        "no norm is applied: that is the unnormalised block. Post-norm normalises each residual sum.",
    ),
}


@exercise("5.2")
def post_norm_forward(fn: Callable) -> None:
    """Exercise 5.2: check ``fn(x, ln1, attn, ln2, ffn)`` is the post-norm block."""
    refuse_library_object("5.2", fn, EXERCISES["5.2"].refuses, EXERCISES["5.2"].task)
    _check_block("5.2", fn, _post, _POST_NORM_MISTAKES,
                 "the post-norm block (each branch reads the stream as it is, and each residual sum is normalised)")
    refuse_library_calls("5.2", fn, EXERCISES["5.2"].refused_calls, EXERCISES["5.2"].task)
    passed("5.2", "post-norm block matches TransformerBlock.post_norm_forward on 4 shapes × 2 seeds")


# ---------------------------------------------------------------------------------------
# Exercise 5.3: predict what each configuration does, then run it
# ---------------------------------------------------------------------------------------


_WHY = {
    ("pre", "trains"): "pre-norm keeps an identity path from the embeddings to the final norm and every "
    "branch reads a normalised input, so even Adam's first full-size steps change the output only a little",
    ("pre", "stalls"): "even pre-norm stalled here: the learning rate is too high for this model",
    ("pre", "diverges"): "even pre-norm blew up here: the learning rate is far too high for this model",
    ("post", "trains"): "post-norm coped here: the learning rate is low enough that its first steps do no harm",
    ("post", "stalls"): "not because its gradients pile up next to the output — with SwiGLU they fall towards "
    "it (section 3) — but because Adam's first steps move every weight by about the full learning rate "
    "whatever its gradient, and post-norm turns weight changes of that size into large changes of its output "
    "(section 6's measurement, Liu et al. 2020's account); the stack collapses and the model falls back on "
    "word frequencies (loss ≈ unigram loss); warmup keeps those first steps small",
    ("post", "diverges"): "post-norm blew up here: the learning rate is far too high for it",
    ("none", "trains"): "the unnormalised model survived here, which needs a shallow stack or a small scale",
    ("none", "stalls"): "the unnormalised model stalled: nothing keeps its residual stream in range",
    ("none", "diverges"): "without any norm nothing keeps the residual stream in range: it is already "
    "astronomically large at initialisation (section 5 shows its stream there), so are the logits and the "
    "loss, and the first updates push it to inf/NaN",
}


def _judge_prediction(prediction: Any, actual: Mapping[str, str]) -> None:
    """Compare a prediction with the actual outcome of each placement."""
    ex = "5.3"
    expect(ex, isinstance(prediction, Mapping),
           f"prediction must be a dict with the keys 'pre', 'post' and 'none', each mapped to 'trains', 'stalls' "
           f"or 'diverges'; got {describe(prediction)}")
    expect(ex, set(prediction) == set(NORM_PLACEMENTS),
           f"prediction needs exactly the keys 'pre', 'post', 'none', got {sorted(map(repr, prediction))}")
    for name, guess in prediction.items():
        expect(ex, isinstance(guess, str) and guess.strip().lower() in OUTCOMES,
               f"prediction[{name!r}] = {guess!r} is not one of 'trains', 'stalls', 'diverges'")
    summary = ", ".join(f"{name} {actual[name]}" for name in NORM_PLACEMENTS)
    wrong = [name for name in NORM_PLACEMENTS if prediction[name].strip().lower() != actual[name]]
    if wrong:
        reasons = "; ".join(
            f"{name} {actual[name]} (you said {prediction[name].strip().lower()}): {_WHY[(name, actual[name])]}"
            for name in wrong
        )
        raise Hint(ex, f"not quite — {reasons}.")
    passed(ex, f"you predicted all three runs ({summary})")


# 5.3's three runs: the 6-block models at lr 1e-2 without warmup, seed 0 of the experiment record behind
# notebook 05's grid (its cells at this lr and warmup are the runs the notebook repeats live after the check).
RECORD, LR, WARMUP, SEED = "warmup_grid", 1e-2, 0, 0


def recorded_outcomes(record: experiments.Record) -> dict[str, str]:
    """Each placement's outcome in ``record`` (a ``warmup_grid`` record): what 5.3 asks the learner to predict.

    From the record, not from runs in the notebook: a grade must not rest on data the
    learner's kernel computed (it could be made to agree with any prediction), nor need
    the block's forward passes there (they are the answers to 5.1 and 5.2, withheld).
    """
    cells = record.runs[str(SEED)]["cells"]
    return {name: cells[warmup_grid.cell_key(name, LR, WARMUP)]["outcome"] for name in NORM_PLACEMENTS}


@exercise("5.3")
def divergence_prediction(prediction: Any) -> None:
    """Exercise 5.3: compare the predicted outcome of each placement with its recorded run.

    ``prediction`` maps "pre", "post" and "none" to one of "trains", "stalls",
    "diverges"; the outcomes come from the ``warmup_grid`` record (``recorded_outcomes``).
    """
    _judge_prediction(prediction, recorded_outcomes(experiments.load(RECORD)))
