"""RoPE against absolute sinusoidal positions and no positions at all, then beyond the training length.

Notebook 03's experiment. Each seed trains the course's tiny LM three times — the three
variants share their initial weights (positions own no parameter) and their batches —
and measures:

- ``main``: validation loss and agreement accuracy (all sentences, and across an
  attractor noun) over training, at the notebook's learning rate;
- ``lr_sweep``: the final numbers at neighbouring learning rates, so that no variant is
  judged at a learning rate that suits only the others;
- ``long``: the same at more updates — does the absolute baseline catch up?
- ``beyond``: the main models, trained at context 32, reading 64 tokens: loss at each
  position, for RoPE as trained, with position interpolation and with NTK-aware Θ, for
  the other two as they are; then again after a short fine-tuning at 64.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import Corpus, make_corpus
from prenorm_lib.lab.train import TrainConfig, build_model, loss_by_position, train
from prenorm_lib.rope import extend_context

DESCRIPTION = "RoPE vs sinusoidal vs no positions: agreement across attractors, and loss beyond the training length"

CONFIG = {
    "seeds": list(range(10)),
    "positions": ["rope", "sinusoidal", "none"],
    "steps": 300,
    "lr": 1e-2,
    "eval_every": 25,
    "probe_sentences": 256,
    "other_lrs": [3e-3, 3e-2],
    "long_steps": 1000,
    "long_eval_every": 100,
    "extended_context": 64,
    "position_windows": 256,
    "finetune_steps": 50,
    "finetune_lr": 3e-3,
}


# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT = {"seeds": [0], "steps": 8, "eval_every": 4, "probe_sentences": 16, "other_lrs": [], "long_steps": 0,
               "position_windows": 8, "finetune_steps": 2}

# How each variant reads the longer context: RoPE three ways, the others as they are.
EXTENSIONS = {"rope": ("none", "interpolation", "ntk"), "sinusoidal": ("none",), "none": ("none",)}


@lru_cache(maxsize=1)
def _corpus() -> Corpus:
    return make_corpus()


def _probe(config: dict, corpus: Corpus):
    def on_eval(model) -> dict[str, float]:
        n = config["probe_sentences"]
        return {"agreement": probes.agreement_accuracy(model, corpus, n_sentences=n),
                "attractor": probes.agreement_accuracy(model, corpus, n_sentences=n, attractors_only=True)}
    return on_eval


def _rounded(values) -> list[float]:
    return [round(float(v), 4) for v in values]


def _train(config: dict, corpus: Corpus, positions: str, seed: int, steps: int, lr: float, eval_every: int):
    model = build_model(corpus, seed=seed, positions=positions)
    run = TrainConfig(steps=steps, lr=lr, seed=seed, eval_every=eval_every)
    history = train(model, corpus, run, progress=False, on_eval=_probe(config, corpus))
    curves = {"val_loss": _rounded(history.val_loss), **{k: _rounded(v) for k, v in history.metrics.items()}}
    return model, history.val_steps, curves


def _beyond(config: dict, corpus: Corpus, models: dict, seed: int) -> dict:
    """Loss by position at the extended context, before and after a short fine-tuning there."""
    length, windows = config["extended_context"], config["position_windows"]
    steps = config["finetune_steps"]
    finetune = TrainConfig(steps=steps, lr=config["finetune_lr"], warmup_steps=0, context_length=length,
                           seed=1000 + seed, eval_every=steps) if steps else None
    results = {}
    for positions, model in models.items():
        for scaling in EXTENSIONS[positions]:
            longer = extend_context(model, length, scaling)
            entry = {"before": _rounded(loss_by_position(longer, corpus.val_ids, length, windows))}
            if finetune is not None:
                train(longer, corpus, finetune, progress=False)
                entry["after"] = _rounded(loss_by_position(longer, corpus.val_ids, length, windows))
            results[f"{positions}/{scaling}"] = entry
    return results


def run_seed(config: dict, seed: int) -> dict:
    corpus = _corpus()
    result: dict = {"main": {}, "lr_sweep": {}, "long": {}}
    models = {}
    for positions in config["positions"]:
        models[positions], result["val_steps"], result["main"][positions] = _train(
            config, corpus, positions, seed, config["steps"], config["lr"], config["eval_every"])
        sweep = {}
        for lr in config["other_lrs"]:
            _, _, curves = _train(config, corpus, positions, seed, config["steps"], lr, config["steps"])
            sweep[repr(lr)] = {name: values[-1] for name, values in curves.items()}
        result["lr_sweep"][positions] = sweep
        if config["long_steps"]:
            _, result["long_val_steps"], result["long"][positions] = _train(
                config, corpus, positions, seed, config["long_steps"], config["lr"], config["long_eval_every"])
    result["beyond"] = _beyond(config, corpus, models, seed)
    return result


# --- reading a record -----------------------------------------------------------------------

def finals(record, metric: str, part: str = "main") -> dict[str, np.ndarray]:
    """The last value of ``metric`` ("val_loss", "attractor", "agreement") per seed, for every variant."""
    return {positions: np.array([result[part][positions][metric][-1] for _, result in record.by_seed()])
            for positions in record.config["positions"]}


def mean_loss(record, name: str, stage: str, start: int, stop: int) -> np.ndarray:
    """Per seed, the mean loss over positions start … stop − 1 of ``beyond[name][stage]``."""
    return np.array([np.mean(result["beyond"][name][stage][start:stop]) for _, result in record.by_seed()])


def finals_at_lr(record, lr: float, metric: str = "val_loss") -> dict[str, np.ndarray]:
    """The last value of ``metric`` per seed for every variant, at learning rate ``lr`` (main or sweep)."""
    if lr == record.config["lr"]:
        return finals(record, metric)
    if lr not in record.config["other_lrs"]:
        trained = sorted([record.config["lr"], *record.config["other_lrs"]])
        raise ValueError(f"lr must be one the record trained at, {trained}; got {lr}")
    return {positions: np.array([result["lr_sweep"][positions][repr(lr)][metric] for _, result in record.by_seed()])
            for positions in record.config["positions"]}


def within_seed_spread(value: float, per_seed, widen: float = 3.0) -> bool:
    """Whether ``value`` lies in the range the record's seeds span, widened by ``widen`` of their std each side.

    A live run on another processor follows another trajectory from the same seed (the
    last bits of its sums differ and training amplifies them), so it is compared with the
    spread across seeds, not with one stored seed's digits.
    """
    seeds = np.asarray(per_seed, dtype=float)
    if seeds.ndim != 1 or len(seeds) < 2:
        raise ValueError(f"per_seed must hold one value for each of at least 2 seeds, got shape {seeds.shape}")
    margin = widen * float(seeds.std(ddof=1))
    return bool(seeds.min() - margin <= value <= seeds.max() + margin)
