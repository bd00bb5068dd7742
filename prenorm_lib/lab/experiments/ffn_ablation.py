"""Shazeer's (2020) Table 1 at laptop scale: six feed-forward networks, paired seeds, real English text.

Notebook 02 plots this record. Every FFN trains the course's tiny pre-norm LM on the
prose of the Python documentation (:mod:`prenorm_lib.lab.prose`, one token per byte) with
the *same* seed: the same initialisation seed and the same batches in the same order, so
that the FFNs are compared seed by seed (paired), and the noise that moves every FFN
alike — which windows a seed happens to draw — cancels in the differences.

Parameters are matched as in Shazeer's paper and the CS336 ablation: the two-matrix FFNs
(ReLU, SiLU) get d_ff = 4·d_model, the gated ones (SwiGLU, GEGLU, ReGLU, Bilinear)
d_ff = 8/3·d_model rounded to a multiple of 64 (``ffn.default_hidden_dim``).

The regime is chosen on purpose: every run reads less than one epoch of the training
text (see :func:`epochs`), so held-out loss measures what a network extracts from text
it has not seen before, not how well it memorises a small corpus.
The learning rate is the same for every FFN.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from prenorm_lib.lab import data, prose, train
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


def summarize(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation (ddof = 1), number, and how many are > 0."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.nan
    return {"mean": mean, "std": std, "n": n, "positive": sum(v > 0 for v in values)}


def verdict(gap: float, spread: float) -> str:
    """"baseline lower", "baseline higher" or "no clear difference": a gap counts beyond twice its spread."""
    if gap > 2 * spread:
        return "baseline lower"
    if gap < -2 * spread:
        return "baseline higher"
    return "no clear difference"


def shazeer_gap(kind: str, baseline: str = BASELINE) -> tuple[float, float]:
    """Shazeer's gap ``loss(kind) − loss(baseline)`` and the spread of a one-run difference.

    His table gives each variant's std over 4 runs but not paired differences, so the
    spread of one run's difference is √(std_kind² + std_baseline²) — the same yardstick as
    our paired spread (the std of the per-seed differences), measured without pairing.
    """
    (loss, std), (base_loss, base_std) = SHAZEER_TABLE1[kind], SHAZEER_TABLE1[baseline]
    return loss - base_loss, math.hypot(std, base_std)


def comparison(record: Record, baseline: str = BASELINE) -> list[dict[str, Any]]:
    """One row per FFN other than the baseline: Shazeer's gap and verdict beside ours."""
    rows = []
    for kind, gaps in paired_gaps(record, baseline).items():
        ours = summarize(gaps)
        paper_gap, paper_spread = shazeer_gap(kind, baseline)
        rows.append({
            "kind": kind, "paper_gap": paper_gap, "paper_spread": paper_spread,
            "paper_verdict": verdict(paper_gap, paper_spread),
            "gap": ours["mean"], "spread": ours["std"], "wins": ours["positive"], "n": ours["n"],
            "verdict": verdict(ours["mean"], ours["std"]),
        })
    for row in rows:
        row["agrees"] = row["verdict"] == row["paper_verdict"]
    return rows
