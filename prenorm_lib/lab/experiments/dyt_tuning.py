"""The tuning behind ``dyt_data_size``: learning rate × α₀ per normaliser and training-set size, on held-out seeds.

DyT's authors keep the baseline's hyperparameters but tune α₀ for language models (§7:
"careful tuning of α0 yields noticeable performance gains"; §7.2 tunes it for LLaMA), as Derf's do for their GPT-2
(§6). The course's model is far narrower than theirs, and its learning rate was chosen for
RMSNorm models (notebook 02), so both are tuned here, for every normaliser: RMSNorm over four
learning rates, DyT over three learning rates × four α₀ — 0.5, both papers' default;
1.0, DyT's Table 11 at the narrowest width it tried (1024: 1.0 for attention and the rest);
and 2 and 4, since DyT's Table 11 finds narrower models wanting larger α₀ — and Derf over a grid
moved to where its best lay (CONFIG's comment says how). (Learning rate
3e-2, RMSNorm's largest, is left out for DyT: in a first grid of this record — three
learning rates × α₀ 0.5 and 1, made at commit 5cd6544 — it was their worst at every size, its
best mean final loss 0.33–0.34 nats above their best setting's.) The grid is wide enough that every choice
below lies inside it, not at its edge, except where ``UNBRACKETED`` says otherwise. Seed 100 is used for nothing else:
``dyt_data_size`` trains the setting with the lowest mean final held-out loss here on five
other seeds, so the choice does not flatter the seeds that judge it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from prenorm_lib.lab import prose
from prenorm_lib.lab.experiments import Record, dyt_data_size

DESCRIPTION = "Learning rate × α₀ for RMSNorm, DyT and Derf at each training-set size of dyt_data_size, 1 held-out seed"

CONFIG: dict[str, Any] = {
    "model": dyt_data_size.MODEL,
    **dyt_data_size.TRAINING,
    "sizes": dyt_data_size.SIZES,
    "grids": {
        "rmsnorm": {"lrs": [1e-3, 3e-3, 1e-2, 3e-2]},
        "dyt": {"lrs": [1e-3, 3e-3, 1e-2], "alpha0s": [0.5, 1.0, 2.0, 4.0]},
        # Derf's grid one step up in lr and two down in α₀: in a grid of DyT's shape its best lay at the corner
        # (lr 1e-2, α₀ 0.5) at every size, then at α₀ 0.25 in {0.25 … 2}: these grids did not bracket it (records
        # of 2026-11-27); in this one its best lr, 1e-2, lies inside; its α₀ does on 16 KiB (0.25), not on the
        # two larger texts (0.0625, the lowest tried: UNBRACKETED below)
        "derf": {"lrs": [3e-3, 1e-2, 3e-2], "alpha0s": [0.0625, 0.125, 0.25, 0.5]},
    },
    "seeds": [100],  # one held-out seed (two cost more than this machine's budget); the verdict seeds are others
}

# Choices the grid does not bracket, said where the notebook reports the tuning: Derf's best α₀ kept falling with
# the grid (0.5, then 0.25, then 0.0625, the lowest value tried) on the two larger training sets, where a smaller
# α₀ leaves erf nearly linear over the inputs it meets. (size, normaliser, setting) -> why it stays so.
UNBRACKETED = {
    ("256Ki", "derf", "alpha0"): "at the grid's lowest α₀ in three grids running; Derf may be under-tuned here",
    ("all", "derf", "alpha0"): "at the grid's lowest α₀ in three grids running; Derf may be under-tuned here",
}

FINGERPRINT: dict[str, Any] = {"seeds": [100], "steps": 8, "warmup_steps": 2, "eval_every": 4, "eval_batches": 2,
                               "sizes": {"16Ki": 16_384},
                               "grids": {"rmsnorm": {"lrs": [1e-2]}, "dyt": {"lrs": [1e-2], "alpha0s": [1.0]},
                                         "derf": {"lrs": [1e-2], "alpha0s": [1.0]}}}


def settings(config: dict[str, Any], normaliser: str) -> list[dict[str, float]]:
    """The grid of one normaliser: its learning rates, times its α₀ where it has one."""
    grid = config["grids"][normaliser]
    return [{"lr": lr} | ({} if alpha0 is None else {"alpha0": alpha0})
            for lr, alpha0 in itertools.product(grid["lrs"], grid.get("alpha0s", [None]))]


def key(size: str, normaliser: str, setting: dict[str, float]) -> str:
    return "|".join([size, normaliser, *(f"{name}={value:g}" for name, value in setting.items())])


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    full = prose.make_prose_corpus()
    result: dict[str, Any] = {}
    for size, n_bytes in config["sizes"].items():
        corpus = dyt_data_size.training_subset(full, n_bytes)
        for normaliser in config["grids"]:
            for setting in settings(config, normaliser):
                _, cell = dyt_data_size.run_cell(corpus, config, normaliser, setting["lr"], setting.get("alpha0"),
                                                 seed)
                result[key(size, normaliser, setting)] = {k: cell[k] for k in ("final_val_loss", "diverged_at",
                                                                               "val_loss")}
    return result


def mean_final(record: Record, size: str, normaliser: str, setting: dict[str, float]) -> float:
    """Mean final held-out loss of one setting over the record's seeds; inf if any run diverged."""
    values = [run[key(size, normaliser, setting)]["final_val_loss"] for _, run in record.by_seed()]
    return math.inf if None in values else sum(values) / len(values)


def chosen(record: Record) -> dict[str, dict[str, dict[str, float]]]:
    """Per training-set size and normaliser, the setting with the lowest mean final held-out loss."""
    config = record.config
    return {size: {normaliser: min(settings(config, normaliser),
                                   key=lambda setting: mean_final(record, size, normaliser, setting))
                   for normaliser in config["grids"]} for size in config["sizes"]}


def best_by_alpha0(record: Record, size: str, normaliser: str) -> dict[float, float]:
    """For each α₀ of ``normaliser``'s grid, the lowest mean final held-out loss over its learning rates."""
    best: dict[float, float] = {}
    for setting in settings(record.config, normaliser):
        loss = mean_final(record, size, normaliser, setting)
        best[setting["alpha0"]] = min(best.get(setting["alpha0"], math.inf), loss)
    return best
