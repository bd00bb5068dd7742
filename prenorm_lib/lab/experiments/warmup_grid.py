"""Does it train? Norm placement × learning rate × warmup, 50 updates, paired seeds (notebook 05, §5).

Six-block models of the course's size (d_model 64, SwiGLU, RoPE) that differ only in the
block: pre-norm, post-norm, no norm, and three controls — post-norm and no norm with the
branches' last matrices initialised down by 1/√(2L) (``scaled_init``), and DeepNorm.
Post-norm is also run with 4 and 5 blocks, and pre-norm with 4: Nguyen & Salazar (2019),
Table 5 (no warmup), report post-norm training at 4 layers, below pre-norm there, and failing
at 5 and 6. Every cell of the grid uses the same seeds, so seed s of every variant starts from
the same batches in the same order.

A run ends in one of three outcomes (the rule of exercise 5.3,
:func:`prenorm_lib.lab.train.outcome_of`): it *trains* (final validation loss well
below the unigram loss), *stalls* (within 0.1 nats of it) or *diverges* (inf/NaN or a
loss blow-up; the step is recorded).
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import data, train
from prenorm_lib.lab.train import outcome_of

DESCRIPTION = ("LMs of 6 blocks: pre/post/no norm, and controls (scaled init for post and no norm, DeepNorm, "
               "post-norm with 4 and 5 blocks, pre-norm with 4) × lr × warmup, 50 updates, paired seeds")

CONFIG: dict[str, Any] = {
    "blocks": {
        "pre": {"norm": "pre"},
        "post": {"norm": "post"},
        "none": {"norm": "none"},
        "post, scaled init": {"norm": "post", "scaled_init": True},
        "none, scaled init": {"norm": "none", "scaled_init": True},
        "deepnorm": {"norm": "deepnorm"},
        "post, 4 blocks": {"norm": "post", "num_layers": 4},
        "post, 5 blocks": {"norm": "post", "num_layers": 5},
        "pre, 4 blocks": {"norm": "pre", "num_layers": 4},
    },
    "num_layers": 6,
    "lrs": [3e-3, 1e-2, 3e-2],
    "warmups": [0, 20],
    "steps": 50,
    "batch_size": 16,
    "context_length": 16,
    "eval_every": 10,
    "eval_batches": 4,
    "seeds": [0, 1, 2, 3, 4],
    # Depth or run length? Section 8's 2-block post-norm trains at lr 0.03 over 300 updates on
    # windows of 32 tokens, where this grid's 6-block post-norm stalls over 50 on windows of 16.
    # These cells change one of the three at a time, on every seed of the grid.
    "depth_vs_length": {
        "lr": 3e-2,
        "seeds": [0, 1, 2, 3, 4],
        "runs": {"post, 2 blocks": {"num_layers": 2, "steps": 50},
                 "post, 300 updates": {"num_layers": 6, "steps": 300},
                 "post, context 32": {"num_layers": 6, "steps": 50, "context_length": 32}},
    },
}


# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "lrs": [3e-2], "warmups": [0], "steps": 6, "eval_every": 3,
                               "depth_vs_length": {"lr": 3e-2, "seeds": [], "runs": {}}}


def unigram_loss(corpus: data.Corpus) -> float:
    """Entropy of the training words' frequencies: the loss of a model that ignores the context."""
    counts = corpus.train_ids.bincount(minlength=corpus.vocab_size).double()
    freq = counts[counts > 0] / counts.sum()
    return -(freq * freq.log()).sum().item()


def cell_key(block: str, lr: float, warmup: int) -> str:
    """The record's key of one grid cell, e.g. "post|0.01|0"."""
    return f"{block}|{lr:g}|{warmup}"


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every cell of the grid with seed ``seed``: outcome, final loss, divergence step, validation curve."""
    corpus = data.make_corpus()
    reference = unigram_loss(corpus)
    cells: dict[str, Any] = {}
    for block, options in config["blocks"].items():
        options = {"num_layers": config["num_layers"], **options}
        for warmup in config["warmups"]:
            for lr in config["lrs"]:
                run_config = train.TrainConfig(
                    steps=config["steps"], batch_size=config["batch_size"], context_length=config["context_length"],
                    lr=lr, warmup_steps=warmup, eval_every=config["eval_every"], eval_batches=config["eval_batches"],
                    seed=seed,
                )
                model = train.build_model(corpus, seed, context_length=config["context_length"], **options)
                history = train.train(model, corpus, run_config, progress=False)
                cells[cell_key(block, lr, warmup)] = _cell(history, reference)
    extra = config.get("depth_vs_length", {"runs": {}})
    for name, options in extra["runs"].items() if seed in extra.get("seeds", config["seeds"]) else ():
        context_length = options.get("context_length", config["context_length"])
        for warmup in config["warmups"]:
            run_config = train.TrainConfig(
                steps=options["steps"], batch_size=config["batch_size"], context_length=context_length,
                lr=extra["lr"], warmup_steps=warmup, eval_every=config["eval_every"],
                eval_batches=config["eval_batches"], seed=seed,
            )
            model = train.build_model(corpus, seed, norm="post", num_layers=options["num_layers"],
                                      context_length=context_length)
            cells[cell_key(name, extra["lr"], warmup)] = _cell(train.train(model, corpus, run_config, progress=False),
                                                               reference)
    return {"unigram_loss": round(reference, 5), "cells": cells}


def _cell(history: train.History, reference: float) -> dict[str, Any]:
    return {
        "outcome": outcome_of(history, reference),
        "final_val_loss": round(history.final_val_loss, 4) if history.diverged_at is None else None,
        "diverged_at": history.diverged_at,
        "val_steps": history.val_steps,
        "val_loss": [round(v, 4) for v in history.val_loss],
    }
