"""Squared ReLU (Primer) joins the FFN ablation at SwiGLU's parameters and FLOPs, at three learning rates.

Notebook 02, section 8. Primer (So et al. 2021) squares the ReLU of the two-matrix FFN;
karpathy/nanochat's lab log (``dev/LOG.md``, 2026-02-05) found SwiGLU worse than ReLU² at
matched parameters and FLOPs (8/3 expansion), at d12 and d24, one run each. Here ReLU² gets
d_ff = 288, so that at d_model 64 it has exactly SwiGLU's FFN weights (2 · 64 · 288 =
3 · 64 · 192 = 36,864) and does exactly its matrix multiplications per token (each weight is
used in one multiply-add per token; the elementwise work differs: a square against a SiLU
and a product, which no FLOP count of the matmuls sees).

Every setting is ``ffn_ablation``'s (model, text, seeds, batches, schedule) and the runs are
made by ``ffn_controls.run_seed``, so a run here pairs seed by seed with SwiGLU's runs there:
``ffn_ablation`` holds SwiGLU at lr 1e-2, ``ffn_controls`` at 3e-3 and 3e-2. The learning
rate is the one setting a fair comparison of two activations must give each its own: ReLU²
runs at the same three rates, and the notebook compares the two at every rate and each at
its own best.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import stats
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.experiments import ffn_ablation as ablation
from prenorm_lib.lab.experiments import ffn_controls as controls

DESCRIPTION = "FFN ablation: squared ReLU with SwiGLU's parameters and FLOPs (d_ff 288) at lr 3e-3, 1e-2, 3e-2"

LEARNING_RATES = (3e-3, 1e-2, 3e-2)
MATCHED_D_FF = controls.MATCHED_D_FF  # 2 · 64 · 288 = 3 · 64 · 192


def variant(lr: float) -> str:
    """The record's name for ReLU² at learning rate ``lr``: "relu2_lr1e-2"."""
    return f"relu2_lr{lr:.0e}".replace("e-0", "e-")


CONFIG: dict[str, Any] = {
    **{key: value for key, value in ablation.CONFIG.items() if key not in ("ffns", "lr")},
    # name → (FFN kind, d_ff, learning rate), as in ffn_controls
    "variants": {variant(lr): ["relu2", MATCHED_D_FF, lr] for lr in LEARNING_RATES},
}

FINGERPRINT: dict[str, Any] = dict(controls.FINGERPRINT)

run_seed = controls.run_seed


def swiglu_runs(ablation_record: Record, controls_record: Record) -> dict[float, list[float]]:
    """SwiGLU's final losses at each of :data:`LEARNING_RATES`, from the two records that hold them."""
    held = controls.final_losses(controls_record)
    return {3e-3: held["swiglu_lr3e-3"], 1e-2: ablation.final_losses(ablation_record)["swiglu"],
            3e-2: held["swiglu_lr3e-2"]}


def relu2_runs(record: Record) -> dict[float, list[float]]:
    """ReLU²'s final losses at each learning rate, one per seed."""
    finals = controls.final_losses(record)
    return {lr: finals[variant(lr)] for lr in LEARNING_RATES}


def best_rate(runs: dict[float, list[float]]) -> float:
    """The learning rate with the lowest mean final loss over the seeds (chosen on the same seeds)."""
    return min(runs, key=lambda lr: sum(runs[lr]) / len(runs[lr]))


def comparisons(record: Record, ablation_record: Record, controls_record: Record) -> dict[str, stats.PairedComparison]:
    """SwiGLU − ReLU² at each learning rate and with each at its own best rate; ReLU² − ReLU at equal weights."""
    for other in (ablation_record, controls_record):
        if other.config["seeds"] != record.config["seeds"]:
            raise ValueError(f"{other.name} has seeds {other.config['seeds']}, this record {record.config['seeds']}: "
                             "a paired comparison needs the same seeds")
    swiglu, relu2 = swiglu_runs(ablation_record, controls_record), relu2_runs(record)
    found = {f"SwiGLU − ReLU², both lr {lr:g}": stats.paired(swiglu[lr], relu2[lr], a_name="SwiGLU", b_name="ReLU²",
                                                             what="final held-out loss")
             for lr in LEARNING_RATES}
    best_swiglu, best_relu2 = best_rate(swiglu), best_rate(relu2)
    rates = f"both lr {best_swiglu:g}" if best_swiglu == best_relu2 else f"lr {best_swiglu:g} and {best_relu2:g}"
    found[f"SwiGLU − ReLU², each at its best ({rates})"] = stats.paired(
        swiglu[best_swiglu], relu2[best_relu2], a_name="SwiGLU", b_name="ReLU²", what="final held-out loss")
    relu = controls.final_losses(controls_record)["relu_d288"]
    found["ReLU² − ReLU, both d_ff 288, lr 0.01"] = stats.paired(relu2[1e-2], relu, a_name="ReLU²", b_name="ReLU",
                                                                 what="final held-out loss")
    return found
