"""Peri-LN's own quantity: the hidden state's variance by depth, for pre-, post- and peri-norm (notebook 05, §8).

Kim et al. (2025, arXiv 2502.02732) name "Peri-LN" the placement with a norm around each
sub-layer, before and after it (the course's ``norm="sandwich"``), and follow how the
variance of the hidden state grows with depth under each placement: they report that Peri-LN
"consistently achieves more balanced variance growth" than pre-LN, and pre-LN prone to
"massive activations". Here the course's LM with 6 blocks (d_model 64, SwiGLU, RoPE; 300
updates with 20 warmup steps) is trained with each of the three placements at five
learning rates (each placement is compared at every rate and at its own best one), with the
same seeds — so the same initial embeddings and batches — for every placement. At every
evaluation :func:`prenorm_lib.lab.probes.hidden_state_stats` records, on fixed validation
windows, the variance of the hidden state over its channels and its largest entry, after the
embedding and after each block.
"""

from __future__ import annotations

from typing import Any

import torch

from prenorm_lib.lab import data, probes, train

DESCRIPTION = ("pre-, post- and peri-norm (sandwich), 6 blocks × 5 learning rates, 300 updates, paired seeds: "
               "the hidden state's variance and largest entry by depth during training")

CONFIG: dict[str, Any] = {
    "placements": {"pre-norm": {"norm": "pre"}, "post-norm": {"norm": "post"},
                   "Peri-LN (sandwich)": {"norm": "sandwich"}},
    "lrs": [1e-3, 3e-3, 1e-2, 3e-2, 1e-1],
    "num_layers": 6,
    "steps": 300,
    "warmup_steps": 20,
    "batch_size": 16,
    "context_length": 32,
    "eval_every": 50,
    "eval_batches": 4,
    "seeds": [0, 1, 2, 3, 4],
}

# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "lrs": [1e-3], "steps": 12, "warmup_steps": 2, "eval_every": 6}

PROBE_SEED = 77  # the windows whose hidden states are measured, the same for every run


def run_key(placement: str, lr: float) -> str:
    """The record's key of one run, e.g. "pre-norm|0.01"."""
    return f"{placement}|{lr:g}"


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every placement at every learning rate with seed ``seed``: loss curve, variance and max by depth."""
    corpus = data.make_corpus()
    probe_ids, _ = data.get_batch(corpus.val_ids, 16, config["context_length"],
                                  torch.Generator().manual_seed(PROBE_SEED))  # (16, T)
    runs: dict[str, Any] = {}
    for placement, options in config["placements"].items():
        for lr in config["lrs"]:
            run_config = train.TrainConfig(
                steps=config["steps"], batch_size=config["batch_size"], context_length=config["context_length"],
                lr=lr, warmup_steps=config["warmup_steps"], eval_every=config["eval_every"],
                eval_batches=config["eval_batches"], seed=seed,
            )
            model = train.build_model(corpus, seed, num_layers=config["num_layers"],
                                      context_length=config["context_length"], **options)
            history = train.train(model, corpus, run_config, progress=False,
                                  on_eval=lambda m: _flatten(probes.hidden_state_stats(m, probe_ids)))
            depths = config["num_layers"] + 1
            runs[run_key(placement, lr)] = {
                "final_val_loss": round(history.final_val_loss, 4) if history.diverged_at is None else None,
                "diverged_at": history.diverged_at,
                "val_steps": history.val_steps,
                "val_loss": [round(v, 4) for v in history.val_loss],
                **{stat: [[_round(history.metrics[f"{stat}{d}"][i]) for d in range(depths)]
                          for i in range(len(history.val_steps))] for stat in ("variance", "max_abs")},
            }
    return runs


def _flatten(stats: dict[str, list[float]]) -> dict[str, float]:
    """{"variance0": …, "variance1": …, "max_abs0": …}: on_eval records named numbers."""
    return {f"{stat}{depth}": value for stat, values in stats.items() for depth, value in enumerate(values)}


def _round(value: float) -> float:
    """Four significant digits: the variances span orders of magnitude."""
    return float(f"{value:.4g}")
