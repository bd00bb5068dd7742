"""Attention sinks, measured as Gu et al. define them, with and without a gate or a learned sink.

Notebook 04, section 8. A head has an *attention sink* on the first token when the tokens
after it put a large share of their attention there. Gu et al. 2024 (arXiv 2410.10781)
measure it per head by the first token's *importance score*, the mean attention it receives
from the queries that can see it, α₁ = (1/T) Σ_t A[t, 1] over the T queries of a window
(their reference code, ``compute_attention_sink``: the attention summed over queries and
divided by how many see each key), and count a head as a sink when α₁ exceeds ε = 0.3
(``epsilon=0.3`` in their ``eval_sink_open_source.py``). Their metric, Sink₁^ε, is the
share of (window, layer, head) triples above the threshold (:func:`sink_rate`). With no
preference at all, the first token's importance in a window of T is (1/T) Σ_t 1/t, the
uniform share (:func:`uniform_importance`: 0.127 at T = 32).

Each seed trains the model of notebook 04's section 6 (the grammar corpus, 2 layers of 2
heads, the ``attention_scale`` record's settings) three ways from the *same* initial weights
and batches: plain; with Qiu et al.'s headwise sigmoid gate after SDPA (``gate="headwise"``:
2 × 64 more weights per layer, 0.2 % of the model, their new weights drawn from the seed);
with gpt-oss's learned sink logit (``sink=True``: 2 numbers per layer, starting at 0). Each
is also trained five times longer (``long_steps``, about 4 epochs of the grammar corpus), the
data-amount control: Gu et al. find that sinks emerge "after effective optimization on
sufficient training data".

Besides the loss, every evaluation records Sink₁^0.3, the first token's mean importance,
the largest absolute value in the residual stream and its ratio to the median (a "massive
activation" is a few values far above the rest), and for the options their own use: the
mean gate σ(x W_g), and the share of attention the learned sinks take.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.lab import stats
from prenorm_lib.lab.data import Corpus, get_batch
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.experiments import attention_scale as scale
from prenorm_lib.lab.probes import evaluating, hooks
from prenorm_lib.lab.train import TrainConfig, build_model, train

DESCRIPTION = ("Gu et al.'s attention-sink metric in notebook 04's model: plain, with Qiu et al.'s headwise gate, "
               "with gpt-oss's sink logit, paired seeds")

EPSILON = 0.3  # Gu et al.'s threshold on the first token's importance score
OPTIONS = {"plain": {}, "gate": {"gate": "headwise"}, "sink": {"sink": True}}
NAMES = {"plain": "plain", "gate": "headwise gate", "sink": "sink logit"}
NAMES.update({f"{variant}_long": f"{name}, 5× longer" for variant, name in list(NAMES.items())})

CONFIG: dict[str, Any] = {
    "seeds": list(scale.CONFIG["seeds"]),
    "variants": list(OPTIONS),
    "d_model": scale.CONFIG["d_model"],
    "num_heads": scale.CONFIG["num_heads"],
    "steps": scale.CONFIG["steps"],
    "lr": scale.CONFIG["lr"],
    "eval_every": scale.CONFIG["eval_every"],
    "long_steps": 5 * scale.CONFIG["steps"],  # every variant again, five times longer: does more data make a sink?
    "long_eval_every": 300,
    "windows": 64,  # validation windows of 32 tokens on which the sink is measured
    "epsilon": EPSILON,
}

# A few seconds of the same code, stored in the record and re-run by the tests (see experiments.drift).
FINGERPRINT: dict[str, Any] = {"seeds": [0], "steps": 6, "eval_every": 3, "long_steps": 6, "long_eval_every": 6,
                               "windows": 4}

WINDOW_SEED = 99  # the validation windows on which the sink is measured
GATE_SEED_OFFSET = 10_000  # the gate's own weights are drawn from seed + this, after the shared ones


# --- the measurements ---------------------------------------------------------------------


def importance(weights: torch.Tensor) -> torch.Tensor:
    """Each key's importance score (..., T) from causal weights (..., T, T): attention received / queries that see it.

    Key k (from 0) is seen by the T − k queries k … T − 1; Gu et al.'s reference divides the
    column sum by that count.
    """
    T = weights.shape[-1]
    seen_by = torch.arange(T, 0, -1, dtype=weights.dtype, device=weights.device)  # T, T − 1, …, 1
    return weights.sum(dim=-2) / seen_by


def uniform_importance(T: int) -> float:
    """The first token's importance when every query spreads its attention evenly: (1/T) Σ_{t=1}^{T} 1/t."""
    return sum(1 / t for t in range(1, T + 1)) / T


def sink_rate(weights: torch.Tensor, epsilon: float = EPSILON) -> float:
    """Gu et al.'s Sink₁^ε: the share of (window, layer, head) whose first token's importance exceeds ``epsilon``.

    ``weights`` is (L, B, H, T, T), every layer's causal attention on B windows.
    """
    return float((importance(weights)[..., 0] > epsilon).float().mean())


def activation_sizes(model: nn.Module, ids: torch.Tensor) -> tuple[float, float]:
    """The largest |value| in the residual stream after any block, and its ratio to that block's median |value|.

    The ratio separates a few outsized values (a "massive activation") from a stream that is
    large everywhere; the largest ratio over the blocks is returned.
    """
    largest, ratio = [0.0], [0.0]

    def keep(_module, _args, output):
        size = output.detach().abs()
        top = float(size.max())
        largest[0] = max(largest[0], top)
        ratio[0] = max(ratio[0], top / float(size.median()))

    with evaluating(model), hooks(model.layers, keep):
        model(ids)
    return largest[0], ratio[0]


def mean_gate(model: nn.Module, ids: torch.Tensor) -> float:
    """The mean of σ(x W_g) over every head, token and window: how open Qiu et al.'s gate is."""
    gates: list[torch.Tensor] = []
    modules = [layer.attn.gate_proj for layer in model.layers if layer.attn.gate is not None]
    if not modules:
        raise ValueError("model has no gated attention layer (build it with gate=\"headwise\" or \"elementwise\")")
    with evaluating(model), hooks(modules, lambda _m, _args, out: gates.append(torch.sigmoid(out))):
        model(ids)
    return float(torch.cat([g.flatten() for g in gates]).mean())


def measure(model: nn.Module, windows: torch.Tensor, epsilon: float) -> dict[str, Any]:
    """Everything the record keeps at one evaluation, on the same validation windows for every run.

    ``mean_gate`` only for a gated model, ``sink_share`` (the attention no token receives) only
    for one with a learned sink.
    """
    weights = scale.attention_probabilities(model, windows)  # (L, B, H, T, T)
    first = importance(weights)[..., 0]  # (L, B, H)
    found: dict[str, Any] = {
        "sink_rate": round(sink_rate(weights, epsilon), 4),
        "first_importance": round(float(first.mean()), 4),
        "first_importance_by_head": [[round(float(v), 4) for v in row] for row in first.mean(dim=1)],  # (L, H)
    }
    found["largest_activation"], found["activation_ratio"] = (round(v, 3) for v in activation_sizes(model, windows))
    if any(layer.attn.gate is not None for layer in model.layers):
        found["mean_gate"] = round(mean_gate(model, windows), 4)
    if any(layer.attn.sink_logits is not None for layer in model.layers):
        found["sink_share"] = round(float(1 - weights.sum(dim=-1).mean()), 4)
    return found


# --- the runs ---------------------------------------------------------------------------------


def measurement_windows(config: dict[str, Any], corpus: Corpus | None = None) -> torch.Tensor:
    """The validation windows (windows, 32) every run is measured on."""
    corpus = scale.grammar_corpus() if corpus is None else corpus
    x, _ = get_batch(corpus.val_ids, config["windows"], 32, torch.Generator().manual_seed(WINDOW_SEED))
    return x


def with_attention_options(model: nn.Module, seed: int, **options) -> nn.Module:
    """``model`` with every attention layer rebuilt with ``options`` (gate, sink), its weights kept.

    The layers' shared weights are the plain model's, so a gated or sink model starts exactly
    where the plain one does (``ModelConfig(attn_gate=…)`` would draw the gate between the
    attention and the FFN weights, and every later weight would differ); the gate's new weights
    come from ``seed`` + GATE_SEED_OFFSET, the sink logits start at 0. The model's and the
    blocks' configs say what was added. Returns ``model`` (changed in place).
    """
    if not options:
        return model
    added = {"attn_gate": options.get("gate"), "attn_sink": options.get("sink", False)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + GATE_SEED_OFFSET)
        for layer in model.layers:
            old = layer.attn
            new = MultiHeadSelfAttention(
                old.d_model, old.num_heads, max_seq_len=old.rope.max_seq_len if old.rope is not None else None,
                rope_theta=old.rope.theta if old.rope is not None else None, qk_norm=old.qk_norm or False,
                device=old.q_proj.weight.device, dtype=old.q_proj.weight.dtype, **options)
            missing, unexpected = new.load_state_dict(old.state_dict(), strict=False)
            if unexpected or any(not key.startswith(("gate_proj.", "sink_logits")) for key in missing):
                raise RuntimeError(f"rebuilding attention lost weights: missing {missing}, unexpected {unexpected}")
            layer.attn = new
            layer.config = dataclasses.replace(layer.config, **added)
    model.config = dataclasses.replace(model.config, **added)
    return model


def build(config: dict[str, Any], variant: str, seed: int, corpus: Corpus | None = None) -> nn.Module:
    """The model of ``variant`` ("plain", "gate", "sink"), initialised from ``seed`` (shared weights as plain's)."""
    if variant not in OPTIONS:
        raise ValueError(f"variant must be one of {list(OPTIONS)}, got {variant!r}")
    corpus = scale.grammar_corpus() if corpus is None else corpus
    model = build_model(corpus, seed=seed, d_model=config["d_model"], num_heads=config["num_heads"])
    return with_attention_options(model, seed, **OPTIONS[variant])


def train_variant(config: dict[str, Any], variant: str, seed: int, long: bool = False
                  ) -> tuple[nn.Module, dict[str, Any]]:
    """Train one variant for one seed (``long``: ``long_steps`` updates); return the model and its numbers."""
    corpus = scale.grammar_corpus()
    model = build(config, variant, seed, corpus)
    windows = measurement_windows(config, corpus)
    steps, every = ((config["long_steps"], config["long_eval_every"]) if long
                    else (config["steps"], config["eval_every"]))
    run = TrainConfig(steps=steps, lr=config["lr"], seed=seed, eval_every=every)
    history = train(model, corpus, run, progress=False, on_eval=lambda m: {
        key: value for key, value in measure(m, windows, config["epsilon"]).items() if not isinstance(value, list)})
    final = measure(model, windows, config["epsilon"])
    return model, {
        "val_steps": history.val_steps,
        "val_loss": [round(v, 5) for v in history.val_loss],
        "diverged_at": history.diverged_at,
        **{key: [round(v, 4) for v in values] for key, values in history.metrics.items()},
        "first_importance_by_head": final["first_importance_by_head"],
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every variant with the same seed (initial weights and batches), for ``steps`` and for ``long_steps``.

    ``long_steps=0`` leaves out the longer runs (the notebook's live version).
    """
    result = {variant: train_variant(config, variant, seed)[1] for variant in config["variants"]}
    if config["long_steps"]:
        result.update({f"{variant}_long": train_variant(config, variant, seed, long=True)[1]
                       for variant in config["variants"]})
    return result


# --- reading a record ---------------------------------------------------------------------


def finals(record: Record, key: str) -> dict[str, list[float]]:
    """The last value of ``key`` for each run name that has it, one entry per seed in the record's order.

    ``mean_gate`` is only a gated run's, ``sink_share`` only a sink run's.
    """
    out: dict[str, list[float]] = {}
    for _, result in record.by_seed():
        for name, numbers in result.items():
            if key in numbers:
                out.setdefault(name, []).append(numbers[key][-1])
    return out


def against_plain(record: Record, key: str, long: bool = False) -> dict[str, stats.PairedComparison]:
    """Each option minus the plain model on the final ``key``, seed by seed (``long``: the longer runs)."""
    values = finals(record, key)
    suffix = "_long" if long else ""
    return {variant: stats.paired(values[variant + suffix], values["plain" + suffix], a_name=NAMES[variant + suffix],
                                  b_name=NAMES["plain" + suffix], what=key)
            for variant in record.config["variants"] if variant != "plain" and variant + suffix in values}
