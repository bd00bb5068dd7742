"""Shazeer's (2020) Table 1 at laptop scale: six feed-forward networks, paired seeds, real English text.

Notebook 02 plots this record. Every FFN trains the course's tiny pre-norm LM on the
prose of the Python documentation (:mod:`prenorm_lib.lab.prose`, one token per byte) with
the *same* seed: the same initialisation seed and the same batches in the same order, so
that the FFNs are compared seed by seed (paired), and the noise that moves every FFN
alike — which windows a seed happens to draw — cancels in the differences.

Widths follow the CS336 ablation: the two-matrix FFNs (ReLU, SiLU) get d_ff = 4·d_model,
the gated ones (SwiGLU, GEGLU, ReGLU, Bilinear) d_ff = 8/3·d_model rounded to a multiple
of 64 (``ffn.default_hidden_dim``). At d_model = 64 that rounding gives the gated FFNs
12.5 % more FFN weights than the two-matrix ones (Shazeer's widths match exactly); the
record ``ffn_controls`` runs ReLU at exactly SwiGLU's count.

The regime is chosen on purpose: every run reads less than one epoch of the training
text (see :func:`epochs`), so held-out loss measures what a network extracts from text
it has not seen before, not how well it memorises a small corpus.
The learning rate is the same for every FFN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy import stats as scipy_stats

from prenorm_lib.lab import data, prose, stats, train
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.probes import dead_relu_fraction

DESCRIPTION = "ReLU, SiLU, SwiGLU, GEGLU, ReGLU and Bilinear FFNs on the Python docs' prose, paired seeds"

CONFIG: dict[str, Any] = {
    "ffns": ["relu", "silu", "swiglu", "geglu", "reglu", "bilinear"],
    "d_model": 64,
    "num_layers": 2,
    "num_heads": 4,
    "context_length": 64,
    "batch_size": 16,
    "steps": 1000,
    "lr": 1e-2,
    "warmup_steps": 100,
    "eval_every": 100,
    "eval_batches": 32,
    "seeds": [0, 1, 2, 3, 4, 5],
}


# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "steps": 8, "warmup_steps": 2, "eval_every": 4, "eval_batches": 2}

BASELINE = "swiglu"
NAMES = {"relu": "ReLU", "silu": "SiLU", "swiglu": "SwiGLU", "geglu": "GEGLU", "reglu": "ReGLU",
         "bilinear": "Bilinear"}
# Shazeer (2020), Table 1: held-out log-perplexity of T5-base after 65,536 steps, mean (std)
# of 4 runs. His "Swish" is SiLU (β = 1). Source: the course's REFERENCES.
SHAZEER_TABLE1 = {
    "relu": (1.997, 0.005), "silu": (1.994, 0.003), "swiglu": (1.944, 0.010),
    "geglu": (1.942, 0.004), "reglu": (1.953, 0.003), "bilinear": (1.960, 0.005),
}
SHAZEER_RUNS = 4
DEAD_UNIT_WINDOWS = 64  # validation windows on which dead ReLU units are counted after training
DEAD_UNIT_SEED = 0


def train_config(config: dict[str, Any], seed: int) -> train.TrainConfig:
    """The training settings of one run; ``seed`` fixes the batch order."""
    return train.TrainConfig(
        steps=config["steps"], batch_size=config["batch_size"], context_length=config["context_length"],
        lr=config["lr"], warmup_steps=config["warmup_steps"], eval_every=config["eval_every"],
        eval_batches=config["eval_batches"], seed=seed,
    )


def build(corpus: data.Corpus, config: dict[str, Any], kind: str, seed: int) -> torch.nn.Module:
    """The LM with FFN ``kind`` at its default width, initialised from ``seed``."""
    return train.build_model(
        corpus, seed, ffn=kind, d_model=config["d_model"], num_layers=config["num_layers"],
        num_heads=config["num_heads"], context_length=config["context_length"],
    )


def epochs(config: dict[str, Any], corpus: data.Corpus) -> float:
    """How many times over the training text one run reads, on average: below 1 by design."""
    return config["steps"] * config["batch_size"] * config["context_length"] / corpus.train_ids.numel()


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every FFN of ``config["ffns"]`` trained with the same seed: curves, final losses, sizes."""
    corpus = prose.make_prose_corpus()
    windows, _ = data.get_batch(corpus.val_ids, DEAD_UNIT_WINDOWS, config["context_length"],
                                torch.Generator().manual_seed(DEAD_UNIT_SEED))  # (64, T)
    result: dict[str, Any] = {}
    for kind in config["ffns"]:
        model = build(corpus, config, kind, seed)
        history = train.train(model, corpus, train_config(config, seed), progress=False)
        last = history.train_loss[-config["eval_every"]:]
        result[kind] = {
            "val_steps": history.val_steps,
            "val_loss": [round(v, 5) for v in history.val_loss],
            "final_val_loss": round(history.final_val_loss, 5),
            "train_loss_last": round(sum(last) / len(last), 5),  # mean over the last eval_every updates
            "diverged_at": history.diverged_at,
            "parameters": model.num_parameters(),
            "d_ff": model.layers[0].ffn.d_ff,
            "dead_units": dead_relu_fraction(model, windows) if kind in ("relu", "reglu") else None,
        }
    return result


# --- reading a record (the stored one or a live run of the same code) ---------------------


def kinds(record: Record) -> list[str]:
    return list(record.config["ffns"])


def final_losses(record: Record) -> dict[str, list[float]]:
    """Each FFN's final held-out loss, one entry per seed in the order of ``config["seeds"]``."""
    return {kind: [run[kind]["final_val_loss"] for _, run in record.by_seed()] for kind in kinds(record)}


def curves(record: Record) -> tuple[list[int], dict[str, torch.Tensor]]:
    """The evaluation steps and each FFN's held-out loss curves, (n_seeds, n_evals)."""
    runs = record.by_seed()
    steps = runs[0][1][kinds(record)[0]]["val_steps"]
    return steps, {kind: torch.tensor([run[kind]["val_loss"] for _, run in runs]) for kind in kinds(record)}


def paired_gaps(record: Record, baseline: str = BASELINE) -> dict[str, list[float]]:
    """Per seed, each FFN's final loss minus the baseline's (> 0: the baseline is better)."""
    finals = final_losses(record)
    return {kind: [a - b for a, b in zip(values, finals[baseline], strict=True)]
            for kind, values in finals.items() if kind != baseline}


def against(record: Record, kind: str, baseline: str = BASELINE) -> stats.PairedComparison:
    """The baseline's final loss minus ``kind``'s, seed by seed: mean, 95 % CI, seeds each way, p.

    The baseline comes first, so "lower" reads "the baseline ends lower than ``kind``".
    """
    finals = final_losses(record)
    return stats.paired(finals[baseline], finals[kind], a_name=NAMES[baseline], b_name=NAMES[kind],
                        what="final held-out loss")


def shazeer_gap(kind: str, baseline: str = BASELINE) -> float:
    """Shazeer's ``loss(baseline) − loss(kind)`` at 65,536 steps (Table 1 means)."""
    return SHAZEER_TABLE1[baseline][0] - SHAZEER_TABLE1[kind][0]


def shazeer_separates(kind: str, other: str = BASELINE) -> bool:
    """Can Shazeer's own Table 1 (4 runs each, mean ± std) order ``kind`` and ``other``? Welch's test."""
    (mean_a, std_a), (mean_b, std_b) = SHAZEER_TABLE1[kind], SHAZEER_TABLE1[other]
    return stats.paper_separates(mean_a, std_a, mean_b, std_b, runs=SHAZEER_RUNS)


def shazeer_p(kind: str, other: str = BASELINE) -> float:
    """Welch's two-sided p for Shazeer's rows ``kind`` and ``other``: his Table 1 means and stds, 4 runs each."""
    (mean_a, std_a), (mean_b, std_b) = SHAZEER_TABLE1[kind], SHAZEER_TABLE1[other]
    return float(scipy_stats.ttest_ind_from_stats(mean_a, std_a, SHAZEER_RUNS, mean_b, std_b, SHAZEER_RUNS,
                                                  equal_var=False).pvalue)


def shazeer_p_range(kind: str, other: str = BASELINE, unit: float = 1e-3, points: int = 5) -> tuple[float, float]:
    """The least and greatest Welch p over the tables his printed numbers could have been rounded from.

    Table 1 prints means and stds to three decimals (``unit``), so each true value lies within
    half a unit of the printed one. A p near 0.05 that crosses it within that rounding is a
    separation that rests on the last printed digit. Searched on a grid of ``points`` values
    per number (its ends included) over the four numbers' intervals.
    """
    (mean_a, std_a), (mean_b, std_b) = SHAZEER_TABLE1[kind], SHAZEER_TABLE1[other]
    offsets = np.linspace(-unit / 2, unit / 2, points)
    ma, sa, mb, sb = np.meshgrid(mean_a + offsets, std_a + offsets, mean_b + offsets, std_b + offsets)
    ps = scipy_stats.ttest_ind_from_stats(ma, sa, SHAZEER_RUNS, mb, sb, SHAZEER_RUNS, equal_var=False).pvalue
    return float(ps.min()), float(ps.max())


def agreement(paper_separates: bool, paper_gap: float, ours: stats.PairedComparison) -> str:
    """How our paired verdict stands to Shazeer's table, in words.

    Where his table cannot order the two rows (Welch's test on his means, stds and 4 runs),
    there is no order to reproduce: a separation in our runs is ours alone.
    """
    if not paper_separates:
        return "agrees: neither separates" if ours.verdict == "not separated" else "ours only: his table has no order"
    if ours.verdict == "not separated":
        return "not separated here"
    return "agrees" if (ours.verdict == "lower") == (paper_gap < 0) else "differs"


def comparison(record: Record, baseline: str = BASELINE) -> list[dict[str, Any]]:
    """One row per FFN other than the baseline: Shazeer's gap and whether his table separates it, beside ours."""
    rows = []
    for kind in kinds(record):
        if kind == baseline:
            continue
        ours = against(record, kind, baseline)
        paper_gap, separates = shazeer_gap(kind, baseline), shazeer_separates(kind, baseline)
        rows.append({"kind": kind, "paper_gap": paper_gap, "paper_separates": separates,
                     "paper_p": shazeer_p(kind, baseline), "ours": ours,
                     "agreement": agreement(separates, paper_gap, ours)})
    return rows
