"""Wortsman et al.'s (2023) small-scale proxy: a learning-rate sweep per block type (notebook 05, §8).

Large runs become unstable in ways that reappear in small models trained at high learning
rates; one is the growth of attention logits, which QK-norm holds back. QK-norm comes in
two forms: OLMo 2's over the whole flattened projection (``qk_norm="flat"``) and Qwen3's per
head (``qk_norm="per_head"``); both are rows here. Here the course's LM
(2 blocks, d_model 64, SwiGLU, RoPE; 300 updates with 20 warmup steps) is trained with
each block type of the library at five learning rates, with the same seeds (and so the
same batches) for every block type. Recorded per run: the validation loss and the largest
attention logit |q·k/√d_head| (:func:`prenorm_lib.lab.probes.max_attention_logit`, on fixed
validation windows) at every evaluation.
"""

from __future__ import annotations

from typing import Any

import torch

from prenorm_lib.lab import data, probes, train

DESCRIPTION = ("LR sweep per block type (pre, per-head QK-norm, sandwich, OLMo 2 with flat QK-norm, DeepNorm, "
               "ReZero, post): loss and max logit")

CONFIG: dict[str, Any] = {
    "blocks": {
        "pre-norm": {"norm": "pre"},
        "pre-norm + per-head QK-norm (Qwen3)": {"norm": "pre", "qk_norm": "per_head"},
        "sandwich": {"norm": "sandwich"},
        "OLMo 2 (reordered + flat QK-norm)": {"norm": "reordered", "qk_norm": "flat"},
        "DeepNorm": {"norm": "deepnorm"},
        "ReZero": {"norm": "rezero"},
        "post-norm": {"norm": "post"},
    },
    "lrs": [3e-3, 1e-2, 3e-2, 1e-1, 3e-1],
    "num_layers": 2,
    "steps": 300,
    "warmup_steps": 20,
    "batch_size": 16,
    "context_length": 32,
    "eval_every": 50,
    "eval_batches": 4,
    "seeds": [0, 1, 2],
}


# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
# At the lowest learning rate: at lr 0.1 twelve updates already amplify the last bits of the
# arithmetic past the drift test's tolerance on another CPU (3.4741 stored vs 3.471 there).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "lrs": [3e-3], "steps": 12, "warmup_steps": 2, "eval_every": 6}

PROBE_SEED = 77  # the windows whose attention logits are followed, the same for every run


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every block type at every learning rate with seed ``seed``: loss and max-logit curves."""
    corpus = data.make_corpus()
    generator = torch.Generator().manual_seed(PROBE_SEED)
    probe_ids, _ = data.get_batch(corpus.val_ids, 16, config["context_length"], generator)  # (16, T)
    runs: dict[str, Any] = {}
    for block, options in config["blocks"].items():
        for lr in config["lrs"]:
            run_config = train.TrainConfig(
                steps=config["steps"], batch_size=config["batch_size"], context_length=config["context_length"],
                lr=lr, warmup_steps=config["warmup_steps"], eval_every=config["eval_every"],
                eval_batches=config["eval_batches"], seed=seed,
            )
            model = train.build_model(corpus, seed, num_layers=config["num_layers"],
                                      context_length=config["context_length"], **options)
            history = train.train(model, corpus, run_config, progress=False,
                                  on_eval=lambda m: {"max_logit": probes.max_attention_logit(m, probe_ids)})
            runs[f"{block}|{lr:g}"] = {
                "final_val_loss": round(history.final_val_loss, 4) if history.diverged_at is None else None,
                "diverged_at": history.diverged_at,
                "val_steps": history.val_steps,
                "val_loss": [round(v, 4) for v in history.val_loss],
                "max_logit": [round(v, 2) for v in history.metrics["max_logit"]],
            }
    return runs
