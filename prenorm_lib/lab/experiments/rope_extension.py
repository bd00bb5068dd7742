"""Why does plain RoPE beat position interpolation after a short fine-tune? Vary what the reason names.

Notebook 03's experiment record ``rope_positions`` found plain RoPE *lower* than Chen et al.'s
position interpolation after 50 updates at twice the training length, the opposite of their
order. The reason offered — a 2× extension on short dependencies barely strains extrapolation —
names two quantities that record held fixed. This experiment varies both:

- the **extension factor** s: a model trained at context 32 reads 32·s tokens, s ∈ {2, 4, 8};
- the **dependency length**, with everything else held: a second model is trained on a text
  in which every 16 tokens of grammar text are followed by the same 16 tokens, so half of
  what it reads is predicted exactly by the token 16 positions back (:func:`repeated_stream`).
  It then reads long windows of the same kind of text, with the repeat still 16 back
  ("repeat 16 back": the dependency as long as in training) or 16·s back ("repeat half the
  window": the dependency grows with the window, as Chen et al.'s long documents do). The
  grammar model (``"grammar"``) is ``rope_positions``' RoPE model: the same seeds, updates and
  batches, so its plain and interpolated rows at s = 2 repeat that record's numbers.

At each (text, s), the same windows of 32·s validation tokens are scored position by position
for RoPE as trained ("plain"), with position interpolation, with NTK-aware Θ and with YaRN (Peng
et al. 2023, α = 1 with the β that reads held-out windows best of ``yarn_betas``, Llama's 32
among them: the paper says α and β "should be tuned on a case-by-case basis"), then again
after a short training at 32·s on that text (each from the trained weights, same batches for
every method).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from prenorm_lib.lab.data import Corpus, make_corpus
from prenorm_lib.lab.train import TrainConfig, build_model, loss_by_position, train
from prenorm_lib.rope import YARN_ALPHA, extend_context

DESCRIPTION = ("Plain RoPE against interpolation, NTK-aware Θ and YaRN after a short fine-tune, at "
               "extension factors 2, 4, 8, on the grammar and on repeats as far back as in training or growing")

CONFIG = {
    "seeds": list(range(5)),  # cut from 10 for this machine's budget (2 cores): 5 paired seeds
    "trained_length": 32,
    "lr": 1e-2,
    "steps": {"grammar": 300, "repeat": 1000},  # the repeat model needs longer to learn to copy
    "repeat_period": 16,  # in training: every 16 tokens repeated once, half the window of 32
    "factors": [2, 4, 8],
    "texts": ["grammar", "repeat 16 back", "repeat half the window"],
    "methods": ["plain", "interpolation", "ntk", "yarn"],
    "yarn_betas": [2.0, 4.0, 8.0, 32.0],  # α = 1; β chosen on windows that no score below uses
    "position_windows": 256,  # as rope_positions: the same windows
    "finetune_steps": 50,
    "finetune_lr": 3e-3,
}

# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT = {"seeds": [0], "steps": {"grammar": 8, "repeat": 8}, "factors": [2], "position_windows": 4,
               "finetune_steps": 2, "yarn_betas": [4.0, 32.0]}

TUNING_WINDOWS_SEED = 7777  # held-out windows for β; the scores use the library's usual windows
SCALING = {"plain": "none", "interpolation": "interpolation", "ntk": "ntk", "yarn": "yarn"}


@lru_cache(maxsize=1)
def _corpus() -> Corpus:
    return make_corpus()


def repeated_stream(ids: torch.Tensor, period: int) -> torch.Tensor:
    """``ids`` cut into consecutive chunks of ``period`` tokens, each followed by its repeat.

    Every token of a repeat is the token ``period`` positions back, so a model that finds it
    predicts the repeat exactly. The result is as long as ``ids`` (its last chunk cut).
    """
    if isinstance(period, bool) or not isinstance(period, int) or period <= 0:
        raise ValueError(f"period must be a positive int, got {period!r}")
    chunks = ids[: ids.numel() // period * period].reshape(-1, period)  # (n, period)
    return torch.cat((chunks, chunks), dim=1).flatten()[: ids.numel()]  # A A B B C C …


@lru_cache(maxsize=8)
def text(name: str, period: int | None = None) -> Corpus:
    """The grammar corpus, or its repeats every ``period`` tokens (training and validation alike)."""
    corpus = _corpus()
    if name == "grammar":
        return corpus
    return Corpus(tokenizer=corpus.tokenizer, seed=corpus.seed,
                  train_ids=repeated_stream(corpus.train_ids, period), val_ids=repeated_stream(corpus.val_ids, period))


def reading_text(config: dict, name: str, factor: int) -> Corpus:
    """What the model reads and trains on at 32·s: the grammar, or repeats 16 back or half the window back."""
    if name == "grammar":
        return text("grammar")
    if name not in ("repeat 16 back", "repeat half the window"):
        raise ValueError(f"name must be one of {CONFIG['texts']}, got {name!r}")
    period = config["repeat_period"] * (factor if name == "repeat half the window" else 1)
    return text("repeat", period)


def _rounded(values) -> list[float]:
    return [round(float(v), 4) for v in values]


def _extended(model, length: int, method: str, beta: float):
    return extend_context(model, length, SCALING[method], yarn_alpha=YARN_ALPHA, yarn_beta=beta)


def _beta_losses(config: dict, model, corpus: Corpus, length: int) -> dict[str, float]:
    """YaRN's loss beyond the training length, untrained, on held-out windows, for every β tried."""
    trained = config["trained_length"]
    losses = {}
    for beta in config["yarn_betas"]:
        curve = loss_by_position(_extended(model, length, "yarn", beta), corpus.val_ids, length,
                                 config["position_windows"], seed=TUNING_WINDOWS_SEED)
        losses[repr(beta)] = round(float(curve[trained:].mean()), 4)
    return losses


def _trained(config: dict, kind: str, seed: int):
    corpus = text("grammar") if kind == "grammar" else text("repeat", config["repeat_period"])
    model = build_model(corpus, seed=seed, positions="rope", context_length=config["trained_length"])
    steps = config["steps"][kind]
    run = TrainConfig(steps=steps, lr=config["lr"], seed=seed, eval_every=steps,
                      context_length=config["trained_length"])
    return model, round(train(model, corpus, run, progress=False).final_val_loss, 4)


def run_seed(config: dict, seed: int) -> dict:
    trained, windows = config["trained_length"], config["position_windows"]
    result: dict = {"trained_loss": {}, "yarn_tuning": {}, "yarn_beta": {}, "beyond": {}}
    models = {}
    for kind in ("grammar", "repeat"):
        models[kind], result["trained_loss"][kind] = _trained(config, kind, seed)
    for name in config["texts"]:
        model = models["grammar" if name == "grammar" else "repeat"]
        for factor in config["factors"]:
            cell, length = f"{name}/{factor}", trained * factor
            corpus = reading_text(config, name, factor)
            result["yarn_tuning"][cell] = _beta_losses(config, model, corpus, length)
            beta = float(min(result["yarn_tuning"][cell], key=result["yarn_tuning"][cell].get))
            result["yarn_beta"][cell] = beta
            finetune = TrainConfig(steps=config["finetune_steps"], lr=config["finetune_lr"], warmup_steps=0,
                                   context_length=length, seed=1000 + seed, eval_every=config["finetune_steps"])
            for method in config["methods"]:
                longer = _extended(model, length, method, beta)
                entry = {"before": _rounded(loss_by_position(longer, corpus.val_ids, length, windows))}
                train(longer, corpus, finetune, progress=False)
                entry["after"] = _rounded(loss_by_position(longer, corpus.val_ids, length, windows))
                result["beyond"][f"{cell}/{method}"] = entry
    return result


# --- reading a record -----------------------------------------------------------------------

def mean_loss(record, text_name: str, factor: int, method: str, stage: str, span: str = "beyond") -> np.ndarray:
    """Per seed, the mean loss over the positions never trained (``span="beyond"``: 32 … 32·s − 1) or
    the trained ones (``"inside"``: 0 … 31), at ``stage`` "before" or "after" the short training."""
    trained = record.config["trained_length"]
    cut = slice(trained, None) if span == "beyond" else slice(0, trained)
    return np.array([np.mean(result["beyond"][f"{text_name}/{factor}/{method}"][stage][cut])
                     for _, result in record.by_seed()])


def chosen_betas(record, text_name: str, factor: int) -> list[float]:
    """YaRN's β, per seed, as chosen on the held-out windows."""
    return [result["yarn_beta"][f"{text_name}/{factor}"] for _, result in record.by_seed()]
