"""Xiong et al.'s Theorem 1 in its own quantity: the last block's W2 gradient against the depth L (notebook 05, §4).

Theorem 1 bounds ‖∂L̃/∂W^{2,L}‖_F, the gradient of the *second* FFN matrix of the *last* layer,
as a function of the total depth L: O(d·√(ln d)) for Post-LN, independent of L, and
O(d·√(ln d / L)) for Pre-LN. Their §3.4 ("On Theorem 1") records that gradient norm at
initialisation for models of 6 to 14 layers and reads the Post-LN values as remaining "around
1.6". The notebook's depth slider measures a cheaper proxy (all of a block's FFN matrices
together, 3 seeds); this record measures W2 of the last block alone, for the depths the
paper's x-axis spans and below, at two widths, with the paper's ReLU FFN (d_ff = 4·d_model).

Per seed, every depth, width and placement reads the same mini-batches (paired), and a model's
weights come from the seed: a comparison of L = 2 with L = 14 for one seed is a paired one.
Two readings of "the gradient norm" are kept: of one batch's gradient (``"one_batch"``: the
theorem's quantity is one sample's gradient; this is one batch's mean loss) and of the
gradient averaged over ``batches`` mini-batches (``"expected"``, the quantity of their Fig.
3(a)–(b), :func:`prenorm_lib.lab.probes.expected_ffn_grad_norms`).
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import make_corpus, paired_batches
from prenorm_lib.lab.train import build_model

DESCRIPTION = ("Xiong et al. Theorem 1: ‖∂loss/∂W2‖ of the last block at init against depth L = 2 … 14, "
               "pre and post, ReLU, d_model 64 and 256, paired seeds")

CONFIG: dict[str, Any] = {
    "seeds": list(range(12)),
    "depths": [2, 4, 6, 8, 10, 12, 14],
    "widths": [64, 256],
    "placements": ["pre", "post"],
    "num_heads": 4,
    "ffn": "relu",
    "batches": 8,
    "batch_size": 8,
    "context_length": 32,
}

FINGERPRINT: dict[str, Any] = {"seeds": [0], "depths": [2, 4], "widths": [64], "batches": 2}


# Seed s reads the mini-batches of generator seed BATCH_SEEDS + s, for every depth, width and placement (paired).
BATCH_SEEDS = 30_000


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """``{"d64": {"pre": {"one_batch": [per depth], "expected": [per depth]}, "post": …}, …}``: last block's W2."""
    corpus = make_corpus()
    batches = paired_batches(corpus.train_ids, config["batches"], config["batch_size"], config["context_length"],
                             BATCH_SEEDS + seed)
    result: dict[str, Any] = {}
    for width in config["widths"]:
        for placement in config["placements"]:
            one_batch, expected = [], []
            for depth in config["depths"]:
                model = build_model(corpus, seed, norm=placement, ffn=config["ffn"], d_model=width,
                                    num_layers=depth, num_heads=config["num_heads"],
                                    context_length=config["context_length"])
                one_batch.append(round(probes.expected_ffn_grad_norms(model, batches[:1])["w2"][-1], 6))
                expected.append(round(probes.expected_ffn_grad_norms(model, batches)["w2"][-1], 6))
            result.setdefault(f"d{width}", {})[placement] = {"one_batch": one_batch, "expected": expected}
    return result
