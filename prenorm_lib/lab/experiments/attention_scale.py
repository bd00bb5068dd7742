"""Vaswani et al.'s 1/√d_k, trained both ways: the course's tiny LM with and without the scale.

Notebook 04's reproduction. Each seed trains the same model twice — same initial weights,
same batches in the same order — once as the library computes attention,
softmax(q·k/√d_head), and once without the division, softmax(q·k). The second model is
the first with every query multiplied by √d_head (:func:`remove_score_scale`), which is
exactly the unscaled score: (√d·q)·k/√d = q·k. Nothing else changes, so the paired
difference of the two runs is the effect of the scale alone.

Vaswani §3.2.1 says that without the scale large d_k pushes the softmax "into regions
where it has extremely small gradients". The record therefore keeps, besides the loss
and the agreement probe, the attention entropy of both models at initialisation and after
training: a saturated softmax has a low entropy (one key takes all the weight).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import NOUNS, Corpus, generate_sentences, get_batch, make_corpus
from prenorm_lib.lab.probes import evaluating, hooks
from prenorm_lib.lab.train import TrainConfig, build_model, train

DESCRIPTION = "softmax(q·k/√d_head) against softmax(q·k): the tiny LM trained both ways, paired seeds"

CONFIG: dict[str, Any] = {
    "seeds": list(range(8)),
    "variants": ["scaled", "unscaled"],
    "d_model": 64,
    "num_heads": 2,  # d_head = 32: large enough for the unscaled scores to spread (std √32 ≈ 5.7 at init)
    "steps": 300,
    "lr": 1e-2,
    "eval_every": 50,
    "probe_sentences": 256,
    "entropy_windows": 32,
    "subject_sentences": 128,
}

# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "steps": 6, "eval_every": 3, "probe_sentences": 16,
                               "entropy_windows": 4,
                               "subject_sentences": 8}

ENTROPY_SEED = 77  # the validation windows on which attention entropy is measured
SUBJECT_SEED = 4242  # the sentences on which attention to the subject noun is measured
_NOUN_WORDS = frozenset(word for pair in NOUNS for word in pair)


def remove_score_scale(model: nn.Module) -> nn.Module:
    """Make every attention layer of ``model`` compute softmax(q·k) instead of softmax(q·k/√d_head).

    A forward hook multiplies each ``q_proj`` output by √d_head, so the library's division
    by √d_head cancels and the scores are the raw dot products. Parameters, their names
    and their initial values are untouched. Returns ``model`` (changed in place).
    """
    for module in model.modules():
        if hasattr(module, "q_proj") and hasattr(module, "d_head"):
            factor = math.sqrt(module.d_head)
            module.q_proj.register_forward_hook(lambda _m, _inputs, out, factor=factor: out * factor)
    return model


def attention_probabilities(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Every layer's attention weights on ``ids`` (B, T): (num_layers, B, H, T, T), causal.

    Each layer's attention input is caught with a hook, and the layer computes the weights it
    averages its values with (``attention_weights``: scores projected, rotated, divided by
    √d_head — or not, after :func:`remove_score_scale` — masked, softmax). Rows sum to 1, or
    to less with a learned sink (:mod:`attention_sinks`).
    """
    inputs: list[torch.Tensor] = []
    with evaluating(model), hooks([layer.attn for layer in model.layers],
                                  lambda _m, args: inputs.append(args[0]), pre=True):
        model(ids)
        return torch.stack([layer.attn.attention_weights(x) for layer, x in zip(model.layers, inputs, strict=True)])


def mean_entropy(probabilities: torch.Tensor) -> float:
    """Mean entropy (nats) of the attention rows, over rows that can look at 2 or more keys."""
    p = probabilities[..., 1:, :]  # row 0 sees one key only: entropy 0 whatever the model
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(dim=-1)  # (..., T-1)
    return float(entropy.mean())


def attractor_sentences(n: int, min_distance: int = 4) -> list[tuple[list[str], int, int]]:
    """``n`` grammar sentences whose main verb has an attractor between it and its subject.

    Each item is ``(words, subject, verb)``: the words with ``<eos>`` in front (as the model
    reads them), the index of the subject's head noun, and the index of the main verb, at
    least ``min_distance`` words after the subject. The subject is the sentence's first
    noun (sentences with an attractor never have a coordinated subject).
    """
    found = []
    for sentence in generate_sentences(40 * n, SUBJECT_SEED):
        verb = next(a for a in sentence.agreements if a.position == sentence.main_verb)
        subject = next(i for i, word in enumerate(sentence.words) if word in _NOUN_WORDS)
        if verb.attractor and verb.position - subject >= min_distance:
            found.append((["<eos>", *sentence.words], subject + 1, verb.position + 1))
            if len(found) == n:
                break
    return found


def subject_attention(model: nn.Module, corpus: Corpus, n_sentences: int) -> list[list[float]]:
    """Mean attention weight on the subject noun, seen from the word just before the main verb.

    That word's output predicts the verb, whose number is the subject's: a head that helps
    must look back past the attractor to the subject. One number per (layer, head),
    averaged over ``n_sentences`` attractor sentences.
    """
    total = None
    for words, subject, verb in attractor_sentences(n_sentences):
        ids = torch.tensor([corpus.tokenizer.encode(" ".join(words))])  # (1, T)
        maps = attention_probabilities(model, ids)[:, 0]  # (L, H, T, T)
        weight = maps[:, :, verb - 1, subject]  # (L, H)
        total = weight if total is None else total + weight
    return [[round(float(w), 4) for w in row] for row in total / n_sentences]


@lru_cache(maxsize=1)
def grammar_corpus() -> Corpus:
    """The grammar corpus of notebooks 03 to 05, made once per process."""
    return make_corpus()


def build(config: dict[str, Any], variant: str, seed: int, corpus: Corpus | None = None) -> nn.Module:
    """The tiny LM of ``variant`` ("scaled" or "unscaled"), initialised from ``seed``."""
    if variant not in ("scaled", "unscaled"):
        raise ValueError(f"variant must be 'scaled' or 'unscaled', got {variant!r}")
    corpus = grammar_corpus() if corpus is None else corpus
    model = build_model(corpus, seed=seed, d_model=config["d_model"], num_heads=config["num_heads"])
    return remove_score_scale(model) if variant == "unscaled" else model


def entropy_windows(config: dict[str, Any], corpus: Corpus | None = None) -> torch.Tensor:
    """The validation windows (entropy_windows, 32) on which attention entropy is measured."""
    corpus = grammar_corpus() if corpus is None else corpus
    x, _ = get_batch(corpus.val_ids, config["entropy_windows"], 32, torch.Generator().manual_seed(ENTROPY_SEED))
    return x


def train_variant(config: dict[str, Any], variant: str, seed: int) -> tuple[nn.Module, dict[str, Any]]:
    """Train one variant for one seed; return the model and its numbers (what the record stores)."""
    corpus = grammar_corpus()
    model = build(config, variant, seed, corpus)
    windows = entropy_windows(config, corpus)
    entropy_start = mean_entropy(attention_probabilities(model, windows))
    n = config["probe_sentences"]
    run = TrainConfig(steps=config["steps"], lr=config["lr"], seed=seed, eval_every=config["eval_every"])
    history = train(model, corpus, run, progress=False, on_eval=lambda m: {
        "attractor": probes.agreement_accuracy(m, corpus, n_sentences=n, attractors_only=True)})
    return model, {
        "val_steps": history.val_steps,
        "val_loss": [round(v, 5) for v in history.val_loss],
        "attractor": [round(v, 4) for v in history.metrics["attractor"]],
        "diverged_at": history.diverged_at,
        "entropy_start": round(entropy_start, 4),
        "entropy_end": round(mean_entropy(attention_probabilities(model, windows)), 4),
        "subject_attention": subject_attention(model, corpus, config["subject_sentences"]),
    }


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Both variants with the same seed: the same initial weights and the same batches."""
    return {variant: train_variant(config, variant, seed)[1] for variant in config["variants"]}


def finals(record, key: str = "val_loss") -> dict[str, list[float]]:
    """The last value of ``key`` for each variant, one entry per seed in the record's order."""
    out: dict[str, list[float]] = {}
    for _, result in record.by_seed():
        for variant, numbers in result.items():
            value = numbers[key]
            out.setdefault(variant, []).append(value[-1] if isinstance(value, list) else value)
    return out
