"""Measurements taken inside a model: gradient norms, residual-stream norms, dead units.

Used by notebooks 02 (dead ReLU units) and 04 (Xiong et al. 2020: how pre-norm and
post-norm shape gradients and the residual stream at initialisation). Every probe leaves
the model as it found it: no parameter, gradient or hook is changed afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from prenorm_lib import validation
from prenorm_lib.data import Corpus, generate_sentences
from prenorm_lib.ffn import FeedForward, GatedFeedForward


def next_token_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the model's logits for ``x`` (B, T) against targets ``y`` (B, T)."""
    logits = model(x)  # (B, T, vocab_size)
    return nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())


def layer_name(parameter_name: str) -> str:
    """The layer a parameter belongs to: "layers.3.attn.q_proj.weight" → "layers.3".

    Parameters outside the block stack keep their top-level module's name
    ("token_embeddings", "ln_final", "lm_head").
    """
    parts = parameter_name.split(".")
    if parts[0] == "layers" and len(parts) > 1:
        return f"layers.{parts[1]}"
    return parts[0]


def gradient_norms_by_layer(model: nn.Module) -> dict[str, float]:
    """L2 norm of the gradients currently stored in ``.grad``, one total per layer."""
    squares: dict[str, float] = {}
    for name, parameter in model.named_parameters():
        if parameter.grad is not None:
            key = layer_name(name)
            squares[key] = squares.get(key, 0.0) + parameter.grad.detach().float().pow(2).sum().item()
    return {key: math.sqrt(value) for key, value in squares.items()}


def _gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """d loss / d parameter for one batch, without touching ``.grad`` (torch.autograd.grad)."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    loss = next_token_loss(model, x, y)
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return {name: (torch.zeros_like(p) if g is None else g) for (name, p), g in zip(named, grads, strict=True)}


def grad_norms_at_init(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Gradient norm of every parameter for one batch ``(x, y)``; no optimizer involved.

    Called on a freshly built model it measures the gradients at initialisation, the
    quantity Xiong et al. (2020) analyse. The model's ``.grad`` fields are not modified.
    """
    return {name: g.norm().item() for name, g in _gradients(model, x, y).items()}


def ffn_grad_norms_by_layer(model: nn.Module, x: torch.Tensor, y: torch.Tensor, weight: str = "all") -> list[float]:
    """Per block, the norm of the gradient of its feed-forward weights (Xiong et al. Fig. 3).

    ``weight="all"`` takes the norm over all of the block's FFN matrices together (w1, w2,
    and w3 for SwiGLU); ``weight="w1"`` or ``"w2"`` picks one matrix, as in the paper's
    per-matrix panels. Index i of the result is block i (input side first).
    """
    validation.choice("weight", weight, ("all", "w1", "w2", "w3"))
    gradients = _gradients(model, x, y)
    norms = []
    for i in range(len(model.layers)):
        prefix = f"layers.{i}.ffn."
        selected = [
            g for name, g in gradients.items()
            if name.startswith(prefix) and (weight == "all" or name == f"{prefix}{weight}.weight")
        ]
        if not selected:
            raise ValueError(f"block {i} has no FFN weight {weight!r}")
        norms.append(math.sqrt(sum(g.pow(2).sum().item() for g in selected)))
    return norms


def _check_stack(model: nn.Module, name: str = "model") -> None:
    if not (hasattr(model, "token_embeddings") and hasattr(model, "layers")):
        raise TypeError(
            f"{name} must have .token_embeddings and .layers like TransformerLM, got {type(model).__name__}"
        )


@contextmanager
def recording_residual_norms(model: nn.Module) -> Iterator[list[float]]:
    """While active, every forward pass appends the residual stream's mean squared norm.

    Yields a list that a forward pass fills with L + 1 numbers: after the embedding
    (depth 0) and after each of the L blocks. Hooks are removed on exit, even on error.
    """
    _check_stack(model)
    norms: list[float] = []

    def record(_module, _inputs, output):
        norms.append(output.detach().float().pow(2).sum(-1).mean().item())

    modules = [model.token_embeddings, *model.layers]
    handles = [module.register_forward_hook(record) for module in modules]
    try:
        yield norms
    finally:
        for handle in handles:
            handle.remove()


def residual_norms(model: nn.Module, token_ids: torch.Tensor) -> list[float]:
    """Mean squared L2 norm of the residual stream at depths 0 … L for ``token_ids``.

    Mean over batch and positions of ‖x_t‖². Xiong et al.'s Lemma 2: at initialisation a
    pre-norm stream's squared norm grows about linearly with depth (each block adds to
    it), while a post-norm block renormalises its output, so the norm stays ≈ d_model.
    """
    with torch.no_grad(), recording_residual_norms(model) as norms:
        model(token_ids)
    return norms


def _hidden_activations(ffn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The hidden layer of a feed-forward network, (..., d_ff), exactly as its forward makes it."""
    if isinstance(ffn, GatedFeedForward | FeedForward):
        return ffn.hidden(x)
    raise TypeError(f"model_or_ffn must be a TransformerLM, SwiGLU or FeedForward, got {type(ffn).__name__}")


def _dead_counts(ffn: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    hidden = _hidden_activations(ffn, x).reshape(-1, ffn.d_ff)  # (positions, d_ff)
    dead = (hidden == 0).all(dim=0)  # (d_ff,)
    return int(dead.sum()), dead.numel()


def dead_relu_fraction(model_or_ffn: nn.Module, x: torch.Tensor) -> float:
    """Fraction of FFN hidden units that output exactly zero at every position of ``x``.

    For a feed-forward module ``x`` is its input (..., d_model); for a TransformerLM ``x``
    is a batch of token ids and the count runs over the FFNs of all blocks, each seeing
    the input its block gives it. Only a ReLU (in ReLU's FFN or ReGLU's gate) outputs exact
    zeros over a whole batch: SiLU, SwiGLU and GEGLU units are never dead in this sense.
    """
    validation.tensor("x", x)
    with torch.no_grad():
        if isinstance(model_or_ffn, GatedFeedForward | FeedForward):
            dead, total = _dead_counts(model_or_ffn, x)
            return dead / total
        _check_stack(model_or_ffn, "model_or_ffn (a TransformerLM, SwiGLU or FeedForward)")
        ffn_inputs: list[tuple[nn.Module, torch.Tensor]] = []
        handles = [
            layer.ffn.register_forward_pre_hook(lambda module, args: ffn_inputs.append((module, args[0])))
            for layer in model_or_ffn.layers
        ]
        try:
            model_or_ffn(x)
        finally:
            for handle in handles:
                handle.remove()
        counts = [_dead_counts(ffn, ffn_input) for ffn, ffn_input in ffn_inputs]
    return sum(d for d, _ in counts) / sum(t for _, t in counts)


def agreement_accuracy(
    model: nn.Module, corpus: Corpus, n_sentences: int = 256, seed: int = 12345, attractors_only: bool = False
) -> float:
    """How often the model prefers the correctly agreeing main verb (sees vs see, is vs are).

    For fresh sentences from the corpus grammar, the model reads ``<eos>`` and the words
    before the main verb; it scores a hit when its logit for the correct form beats the
    logit for the same verb in the other number (Linzen et al. 2016's test). Chance is
    0.5. ``attractors_only`` keeps only sentences where a noun of the other number stands
    between the subject and the verb — the cases that need attention to the right word,
    not to the nearest one.
    """
    validation.positive_int("n_sentences", n_sentences)
    tokenizer = corpus.tokenizer
    rows, correct_ids, wrong_ids, last = [], [], [], []
    for sentence in generate_sentences(n_sentences * (8 if attractors_only else 1), seed):
        verb = next(a for a in sentence.agreements if a.position == sentence.main_verb)
        if attractors_only and not verb.attractor:
            continue
        prefix = [tokenizer.eos_id, *tokenizer.encode(" ".join(sentence.words[: verb.position]))]
        rows.append(prefix)
        last.append(len(prefix) - 1)
        correct_ids.append(tokenizer.word_to_id[verb.correct])
        wrong_ids.append(tokenizer.word_to_id[verb.wrong])
        if len(rows) == n_sentences:
            break
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), tokenizer.eos_id, dtype=torch.long)  # right padding: causal
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(ids)  # (N, width, vocab_size)
    model.train(was_training)
    at_verb = logits[torch.arange(len(rows)), torch.tensor(last)]  # (N, vocab_size)
    hits = at_verb[torch.arange(len(rows)), torch.tensor(correct_ids)] > at_verb[
        torch.arange(len(rows)), torch.tensor(wrong_ids)
    ]
    return hits.float().mean().item()
