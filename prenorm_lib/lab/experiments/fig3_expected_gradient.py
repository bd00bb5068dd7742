"""Xiong et al.'s Fig. 3 in the paper's own quantity, at three widths.

Notebook 05 §3 first measures one batch's gradient, summed over a block's FFN matrices. The
paper's Fig. 3 is something else: per weight matrix, the Frobenius norm of the *expected*
gradient at initialisation, the gradient averaged over mini-batches (§3.4, "we calculate
their expected gradients"). One batch's norm also carries that batch's noise, which does
not cancel; so this record averages over ``batches`` mini-batches and keeps W1 and W2 apart
(:func:`prenorm_lib.lab.probes.expected_ffn_grad_norms`), with the paper's ReLU FFN.

Fairness: for one seed, pre-norm and post-norm get the same initialisation seed and the same
mini-batches, so every comparison of the two is paired. The widths (d_model 64, 256, 512,
d_ff = 4·d_model, 6 blocks) ask whether pre-norm's falling profile is a finite-width effect;
the 256- and 512-wide models are what makes this a record rather than a notebook cell. The
norm of the first batch's gradient alone (``"one_batch"``) is kept beside the mean, so the
notebook can show how much the batch noise adds.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import make_corpus, paired_batches
from prenorm_lib.lab.train import build_model

DESCRIPTION = "Xiong et al. Fig. 3: norm of the expected FFN gradient per matrix at init, ReLU, widths 64–512"

CONFIG: dict[str, Any] = {
    "seeds": list(range(8)),
    "widths": [64, 256, 512],
    "placements": ["pre", "post"],
    "num_layers": 6,
    "num_heads": 4,
    "ffn": "relu",
    "batches": 24,
    "batch_size": 8,
    "context_length": 32,
}

FINGERPRINT: dict[str, Any] = {"seeds": [0], "widths": [64], "batches": 2}


# Seed s reads the mini-batches of generator seed BATCH_SEEDS + s, for every placement and width (paired).
BATCH_SEEDS = 20_000


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """``{"d64": {"pre": {"expected": {"w1": [...], "w2": [...]}, "one_batch": {...}}, "post": ...}, ...}``."""
    corpus = make_corpus()
    batches = paired_batches(corpus.train_ids, config["batches"], config["batch_size"], config["context_length"],
                             BATCH_SEEDS + seed)
    result: dict[str, Any] = {}
    for width in config["widths"]:
        for placement in config["placements"]:
            model = build_model(corpus, seed, norm=placement, ffn=config["ffn"], d_model=width,
                                num_layers=config["num_layers"], num_heads=config["num_heads"],
                                context_length=config["context_length"])
            expected = probes.expected_ffn_grad_norms(model, batches)
            one_batch = probes.expected_ffn_grad_norms(model, batches[:1])
            result.setdefault(f"d{width}", {})[placement] = {
                "expected": {m: [round(v, 6) for v in norms] for m, norms in expected.items()},
                "one_batch": {m: [round(v, 6) for v in norms] for m, norms in one_batch.items()},
            }
    return result
