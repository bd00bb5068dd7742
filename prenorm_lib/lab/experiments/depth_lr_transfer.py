"""Tune small, train large? The best learning rate against depth, under three depth parametrisations (notebook 05, §8).

Depth-μP (Yang et al. 2023) multiplies each residual branch by a/√L and, under Adam, sets the
blocks' learning rate to η/√L; CompleteP (Dey et al. 2025) multiplies by 1/L and keeps η.
Both are meant to let one learning rate, tuned on a shallow model, serve a deep one; under the
standard parametrisation the best learning rate may move with depth. Here the course's
pre-norm LM (d_model 64, SwiGLU, RoPE; 300 updates with 20 warmup steps) is trained at
L = 2, 4 and 8 blocks, at five peak learning rates, in each parametrisation (the library's
``residual_scaling``, with the base depth L₀ = 2: at L₀ the multiplier, the learning rate and
Adam's ε of the three are the standard ones, so the 2-block runs are the standard model's,
trained once and stored for each). For one seed every cell starts from the same embeddings
and reads the same batches.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import data, train

DESCRIPTION = ("best learning rate against depth (L = 2, 4, 8) under the standard parametrisation, depth-μP "
               "(1/√L) and CompleteP (1/L), pre-norm, 5 learning rates, 300 updates, paired seeds")

CONFIG: dict[str, Any] = {
    "parametrisations": {
        "standard": {},
        "depth-μP (1/√L)": {"residual_scaling": "depth_mup", "base_depth": 2},
        "CompleteP (1/L)": {"residual_scaling": "completep", "base_depth": 2},
    },
    "depths": [2, 4, 8],
    "lrs": [3e-3, 1e-2, 3e-2, 1e-1, 3e-1],
    "steps": 300,
    "warmup_steps": 20,
    "batch_size": 16,
    "context_length": 32,
    "eval_every": 100,
    "eval_batches": 4,
    "seeds": [0, 1, 2],  # cut from 4 for this machine's budget (2 cores): 3 paired seeds
}

FINGERPRINT: dict[str, Any] = {"seeds": [0], "depths": [2, 4], "lrs": [3e-3], "steps": 8, "warmup_steps": 2,
                               "eval_every": 4}


def cell_key(parametrisation: str, depth: int, lr: float) -> str:
    """The record's key of one run, e.g. "standard|8|0.03"."""
    return f"{parametrisation}|{depth}|{lr:g}"


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every parametrisation × depth × learning rate with seed ``seed``: final loss and the loss curve."""
    corpus = data.make_corpus()
    runs: dict[str, Any] = {}
    standard = next(name for name, options in config["parametrisations"].items() if not options)
    for name, options in config["parametrisations"].items():
        for depth in config["depths"]:
            for lr in config["lrs"]:
                if options and depth == options["base_depth"]:  # (L/L₀)^… = 1: the standard model itself
                    runs[cell_key(name, depth, lr)] = runs[cell_key(standard, depth, lr)]
                    continue
                run_config = train.TrainConfig(
                    steps=config["steps"], batch_size=config["batch_size"],
                    context_length=config["context_length"], lr=lr, warmup_steps=config["warmup_steps"],
                    eval_every=config["eval_every"], eval_batches=config["eval_batches"], seed=seed,
                )
                model = train.build_model(corpus, seed, num_layers=depth, context_length=config["context_length"],
                                          **options)
                history = train.train(model, corpus, run_config, progress=False)
                runs[cell_key(name, depth, lr)] = {
                    "final_val_loss": round(history.final_val_loss, 4) if history.diverged_at is None else None,
                    "diverged_at": history.diverged_at,
                    "val_loss": [round(v, 4) for v in history.val_loss],
                }
    return runs
