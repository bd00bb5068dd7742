"""Two controls for the FFN ablation: equal parameters, and other learning rates.

Notebook 02 reads this record beside ``ffn_ablation``. Both use the same model, text,
seeds and batches (this module takes every setting from ``ffn_ablation.CONFIG``), so a
run here is paired seed by seed with that record's runs.

* **Matched parameters.** At d_model = 64 the gated FFNs get d_ff = 192 (three matrices,
  36,864 weights) and the two-matrix FFNs d_ff = 256 (32,768): 12.5 % more weights for
  the gated side. ReLU with d_ff = 288 has exactly 2 · 64 · 288 = 36,864; it is compared
  with ``ffn_ablation``'s SwiGLU runs at the same learning rate.
* **Learning rate.** The ablation uses one learning rate (1e-2) for every FFN. SwiGLU
  against ReLU at 3e-3 and at 3e-2 asks whether the order is an artefact of that choice.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import prose, train
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.experiments import ffn_ablation as ablation

DESCRIPTION = "FFN ablation controls: ReLU at SwiGLU's parameter count, SwiGLU vs ReLU at lr 3e-3 and 3e-2"

MATCHED_D_FF = 288  # 2 · 64 · 288 = 3 · 64 · 192: ReLU with exactly SwiGLU's FFN weights at d_model 64

CONFIG: dict[str, Any] = {
    **{key: value for key, value in ablation.CONFIG.items() if key not in ("ffns", "lr")},
    # name → (FFN kind, d_ff or None for the kind's default, learning rate)
    "variants": {
        "relu_d288": ["relu", MATCHED_D_FF, 1e-2],
        "relu_lr3e-3": ["relu", None, 3e-3],
        "swiglu_lr3e-3": ["swiglu", None, 3e-3],
        "relu_lr3e-2": ["relu", None, 3e-2],
        "swiglu_lr3e-2": ["swiglu", None, 3e-2],
    },
}

FINGERPRINT: dict[str, Any] = {"seeds": [0], "steps": 8, "warmup_steps": 2, "eval_every": 4, "eval_batches": 2}

LEARNING_RATES = (3e-3, 3e-2)


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every variant of ``config["variants"]`` trained with the same seed (init and batches)."""
    corpus = prose.make_prose_corpus()
    result: dict[str, Any] = {}
    for name, (kind, d_ff, lr) in config["variants"].items():
        overrides = {} if d_ff is None else {"d_ff": d_ff}
        model = train.build_model(
            corpus, seed, ffn=kind, d_model=config["d_model"], num_layers=config["num_layers"],
            num_heads=config["num_heads"], context_length=config["context_length"], **overrides,
        )
        history = train.train(model, corpus, ablation.train_config({**config, "lr": lr}, seed), progress=False)
        result[name] = {
            "val_steps": history.val_steps,
            "val_loss": [round(v, 5) for v in history.val_loss],
            "final_val_loss": round(history.final_val_loss, 5),
            "diverged_at": history.diverged_at,
            "parameters": model.num_parameters(),
            "ffn_parameters": sum(p.numel() for p in model.layers[0].ffn.parameters()),
            "d_ff": model.layers[0].ffn.d_ff,
        }
    return result


def final_losses(record: Record) -> dict[str, list[float]]:
    """Each variant's final held-out loss, one entry per seed in the order of ``config["seeds"]``."""
    return {name: [run[name]["final_val_loss"] for _, run in record.by_seed()]
            for name in record.config["variants"]}
