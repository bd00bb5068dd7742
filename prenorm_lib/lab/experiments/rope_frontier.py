"""Positions after 2024: partial RoPE and layers without positions, inside and beyond the training length.

Notebook 03's frontier (an optional deep dive). Every model has 4 blocks (so that "every fourth
layer" means one), otherwise the course's tiny model, trained on the grammar at context 32:

- ``rope``: RoPE in every layer (the baseline);
- ``p-rope 0.25``, ``p-rope 0.5``, ``p-rope 0.75``: partial RoPE, Barbero et al.'s p-RoPE, only
  the fastest quarter, half or three quarters of each head's pairs rotated, in every layer;
- ``nope every 4th``: RoPE in every layer but every fourth, which has none — the default 4 of
  Hugging Face's ``Llama4TextConfig`` and of SmolLM3's ``no_rope_layer_interval`` (Llama 4's
  reference code takes ``nope_layer_interval`` as an argument, default None), layers counted from 1.

No variant owns a parameter of its own, so each seed's variants start from identical weights
and read identical batches: paired comparisons. Each seed records the final validation loss
and agreement probe at the notebook's learning rate and at its neighbours (no variant judged
at a rate that suits only the others), then reads 32·s tokens (s ∈ ``factors``: 2 here;
``rope_extension`` varies s for RoPE) before and after 50 updates at that length: RoPE as
trained, with position interpolation, NTK-aware Θ and YaRN (α = 1, β tuned on held-out windows
as in ``rope_extension``); each partial RoPE as trained; the hybrid as trained and with Llama
4's log-length attention temperature on its layer without positions (``floor_scale`` = the
training length, our counterpart of the reference's 8192: positions 0-30 are left alone, the last
trained one, 31, is already scaled by 1 + 0.1 ln 2, and every position read beyond it more).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import Corpus, make_corpus
from prenorm_lib.lab.train import TrainConfig, build_model, loss_by_position, train
from prenorm_lib.rope import YARN_ALPHA, extend_context

DESCRIPTION = ("4-block LMs: RoPE, partial RoPE (0.25, 0.5, 0.75 rotated) and a NoPE layer every fourth; "
               "inside, and beyond the training length with interpolation, NTK-aware Θ, YaRN, Llama 4's temperature")

CONFIG = {
    "seeds": list(range(5)),  # cut from 10 for this machine's budget (2 cores): 5 paired seeds
    "num_layers": 4,
    "variants": {
        "rope": {},
        "p-rope 0.25": {"rope_fraction": 0.25},
        "p-rope 0.5": {"rope_fraction": 0.5},
        "p-rope 0.75": {"rope_fraction": 0.75},
        "nope every 4th": {"nope_layer_interval": 4},
    },
    "steps": 300,
    "lr": 1e-2,
    "other_lrs": [3e-3, 3e-2],
    "probe_sentences": 256,
    "trained_length": 32,
    "factors": [2],
    "readings": {
        "rope": ["as trained", "interpolation", "ntk", "yarn"],
        "p-rope 0.25": ["as trained"],
        "p-rope 0.5": ["as trained"],
        "p-rope 0.75": ["as trained"],
        "nope every 4th": ["as trained", "temperature"],
    },
    "yarn_betas": [2.0, 4.0, 8.0, 32.0],
    "temperature": {"floor_scale": 32.0, "attn_scale": 0.1},
    "position_windows": 256,
    "finetune_steps": 50,
    "finetune_lr": 3e-3,
}

# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT = {"seeds": [0], "steps": 6, "other_lrs": [], "probe_sentences": 16, "factors": [2],
               "position_windows": 4, "finetune_steps": 2, "yarn_betas": [4.0]}

TUNING_WINDOWS_SEED = 7777  # as rope_extension: β is chosen on windows no score uses
SCALING = {"as trained": "none", "interpolation": "interpolation", "ntk": "ntk", "yarn": "yarn",
           "temperature": "none"}


@lru_cache(maxsize=1)
def _corpus() -> Corpus:
    return make_corpus()


def _rounded(values) -> list[float]:
    return [round(float(v), 4) for v in values]


def _model(config: dict, corpus: Corpus, variant: str, seed: int):
    return build_model(corpus, seed=seed, num_layers=config["num_layers"], context_length=config["trained_length"],
                       **config["variants"][variant])


def _train(config: dict, corpus: Corpus, variant: str, seed: int, lr: float):
    model = _model(config, corpus, variant, seed)
    run = TrainConfig(steps=config["steps"], lr=lr, seed=seed, eval_every=config["steps"],
                      context_length=config["trained_length"])
    history = train(model, corpus, run, progress=False)
    n = config["probe_sentences"]
    finals = {"val_loss": round(history.final_val_loss, 4),
              "attractor": round(probes.agreement_accuracy(model, corpus, n_sentences=n, attractors_only=True), 4)}
    return model, finals


def _read(config: dict, model, reading: str, length: int, beta: float | None):
    temperature = config["temperature"] if reading == "temperature" else None
    yarn = {"yarn_alpha": YARN_ALPHA, "yarn_beta": beta} if reading == "yarn" else {}
    return extend_context(model, length, SCALING[reading], nope_temperature=temperature, **yarn)


def _beta(config: dict, model, corpus: Corpus, length: int) -> tuple[float, dict[str, float]]:
    trained, losses = config["trained_length"], {}
    for beta in config["yarn_betas"]:
        curve = loss_by_position(_read(config, model, "yarn", length, beta), corpus.val_ids, length,
                                 config["position_windows"], seed=TUNING_WINDOWS_SEED)
        losses[repr(beta)] = round(float(curve[trained:].mean()), 4)
    return float(min(losses, key=losses.get)), losses


def run_seed(config: dict, seed: int) -> dict:
    corpus = _corpus()
    result: dict = {"final": {}, "lr_sweep": {}, "yarn_tuning": {}, "yarn_beta": {}, "beyond": {}}
    models = {}
    for variant in config["variants"]:
        models[variant], result["final"][variant] = _train(config, corpus, variant, seed, config["lr"])
        result["lr_sweep"][variant] = {repr(lr): _train(config, corpus, variant, seed, lr)[1]
                                       for lr in config["other_lrs"]}
    windows, steps = config["position_windows"], config["finetune_steps"]
    for factor in config["factors"]:
        length = config["trained_length"] * factor
        beta = None
        if "yarn" in config["readings"].get("rope", ()):
            beta, result["yarn_tuning"][str(factor)] = _beta(config, models["rope"], corpus, length)
            result["yarn_beta"][str(factor)] = beta
        finetune = TrainConfig(steps=steps, lr=config["finetune_lr"], warmup_steps=0, context_length=length,
                               seed=1000 + seed, eval_every=steps) if steps else None
        for variant, readings in config["readings"].items():
            for reading in readings:
                longer = _read(config, models[variant], reading, length, beta)
                entry = {"before": _rounded(loss_by_position(longer, corpus.val_ids, length, windows))}
                if finetune is not None:
                    train(longer, corpus, finetune, progress=False)
                    entry["after"] = _rounded(loss_by_position(longer, corpus.val_ids, length, windows))
                result["beyond"][f"{variant}/{reading}/{factor}"] = entry
    return result


# --- reading a record -----------------------------------------------------------------------

def finals(record, metric: str = "val_loss", lr: float | None = None) -> dict[str, np.ndarray]:
    """Per seed, the final ``metric`` ("val_loss" or "attractor") of every variant, at ``lr`` (default the main one)."""
    lr = record.config["lr"] if lr is None else lr
    if lr != record.config["lr"] and lr not in record.config["other_lrs"]:
        trained = sorted([record.config["lr"], *record.config["other_lrs"]])
        raise ValueError(f"lr must be one the record trained at, {trained}; got {lr}")

    def value(result, variant):
        part = result["final"][variant] if lr == record.config["lr"] else result["lr_sweep"][variant][repr(lr)]
        return part[metric]

    return {variant: np.array([value(result, variant) for _, result in record.by_seed()])
            for variant in record.config["variants"]}


def mean_loss(record, variant: str, reading: str, factor: int, stage: str, span: str = "beyond") -> np.ndarray:
    """Per seed, the mean loss beyond the training length (or ``span="inside"``), ``stage`` "before" or "after"."""
    trained = record.config["trained_length"]
    cut = slice(trained, None) if span == "beyond" else slice(0, trained)
    return np.array([np.mean(result["beyond"][f"{variant}/{reading}/{factor}"][stage][cut])
                     for _, result in record.by_seed()])
