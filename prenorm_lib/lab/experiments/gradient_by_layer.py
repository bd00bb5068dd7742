"""Mix-LN and LayerNorm Scaling on the gradient-by-layer probe, beside pre- and post-norm (notebook 05, §8).

Li et al. (2024, Mix-LN) write that Pre-LN "leads to diminished gradient norms in its deeper
layers" and Post-LN has "vanishing gradients in earlier layers"; Mix-LN (post-norm in the first
⌊αL⌋ blocks, α = 0.25, pre-norm after) is to give "more uniform gradient norms across layers".
Sun et al. (2025, LayerNorm Scaling) scale each pre-norm's output by 1/√ℓ in block ℓ against
pre-LN's depth-growing output variance. Here 12-block models of the course's width (d_model 64,
SwiGLU, RoPE) with the four placements are measured on the gradient-by-layer probe: each
block's gradient norm (all of its parameters), at initialisation as the norm of the gradient
averaged over ``init_batches`` mini-batches (:func:`prenorm_lib.lab.probes.expected_grad_norms_by_layer`),
and during training at three learning rates (200 updates) as one batch's gradient before
clipping every ``record_every`` updates (the training loop's ``record_norms_every``). For one
seed every placement starts from the same embeddings and reads the same batches.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import data, probes, train

DESCRIPTION = ("pre, post, Mix-LN and LayerNorm Scaling, 12 blocks: each block's gradient norm at init "
               "(8-batch mean) and during 200 updates at 3 learning rates, paired seeds")

CONFIG: dict[str, Any] = {
    "placements": {"pre-norm": {"norm": "pre"}, "post-norm": {"norm": "post"}, "Mix-LN": {"norm": "mix_ln"},
                   "LayerNorm Scaling": {"norm": "layernorm_scaling"}},
    "num_layers": 12,
    "lrs": [3e-3, 1e-2, 3e-2],
    "steps": 200,
    "warmup_steps": 20,
    "batch_size": 16,
    "context_length": 32,
    "eval_every": 50,
    "eval_batches": 4,
    "record_every": 50,
    "init_batches": 8,
    "seeds": [0, 1, 2, 3],  # cut from 5 for this machine's budget (2 cores): 4 paired seeds
}

FINGERPRINT: dict[str, Any] = {"seeds": [0], "lrs": [3e-3], "steps": 6, "warmup_steps": 2, "eval_every": 3,
                               "record_every": 3, "init_batches": 2}


def blocks(norms: dict[str, float], num_layers: int) -> list[float]:
    """The blocks' entries of a per-layer dict, input side first."""
    return [norms[f"layers.{i}"] for i in range(num_layers)]


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Per placement: ``"init"`` (per block) and, per learning rate, the loss and the blocks' gradient norms."""
    corpus = data.make_corpus()
    init_batches = data.paired_batches(corpus.train_ids, config["init_batches"], config["batch_size"],
                                       config["context_length"], 40_000 + seed)
    result: dict[str, Any] = {}
    for placement, options in config["placements"].items():
        model = train.build_model(corpus, seed, num_layers=config["num_layers"],
                                  context_length=config["context_length"], **options)
        entry: dict[str, Any] = {
            "init": [round(v, 6) for v in blocks(probes.expected_grad_norms_by_layer(model, init_batches),
                                                 config["num_layers"])],
        }
        for lr in config["lrs"]:
            run_config = train.TrainConfig(
                steps=config["steps"], batch_size=config["batch_size"], context_length=config["context_length"],
                lr=lr, warmup_steps=config["warmup_steps"], eval_every=config["eval_every"],
                eval_batches=config["eval_batches"], seed=seed, record_norms_every=config["record_every"],
            )
            model = train.build_model(corpus, seed, num_layers=config["num_layers"],
                                      context_length=config["context_length"], **options)
            history = train.train(model, corpus, run_config, progress=False)
            entry[f"{lr:g}"] = {
                "final_val_loss": round(history.final_val_loss, 4) if history.diverged_at is None else None,
                "diverged_at": history.diverged_at,
                "val_loss": [round(v, 4) for v in history.val_loss],
                "norm_steps": history.norm_steps,
                "grad_norms": [[round(history.grad_norms[f"layers.{i}"][k], 6) for i in range(config["num_layers"])]
                               for k in range(len(history.norm_steps))],
            }
        result[placement] = entry
    return result
