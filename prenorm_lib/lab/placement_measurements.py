"""What notebook 05 measures about norm placement: gradients, the residual stream, training runs.

Each function repeats one probe of :mod:`prenorm_lib.lab.probes` over seeds (or depths) on
freshly initialised models of :func:`prenorm_lib.lab.train.build_model` and returns plain
arrays; the notebook shows the few lines that turn them into a verdict, and
:mod:`prenorm_lib.lab.figures.placement` draws them.

- :func:`ffn_grad_norms_over_seeds`, :func:`fig3_grad_norms` — Xiong et al. 2020, Fig. 3: the
  gradient norm of each block's FFN weights at initialisation, one row per seed;
- :func:`lemma2_paper_setting` — their Lemma 2 in its own setting (ReLU FFN, Xavier d×d
  matrices, uniform attention);
- :func:`residual_norms_over_seeds` — the residual stream's squared norm by depth in the course's model;
- :func:`branch_gains_over_seeds` — why a SwiGLU branch turns Fig. 3's post-norm profile over;
- :func:`depth_profiles` — the stream and the gradient profile for every depth L (the depth slider);
- :func:`theorem1_arrays` — the record ``theorem1_depth``: the last block's W2 gradient against L;
- :func:`stability_grid`, :func:`grid_summary` — short training runs over learning rate × warmup ×
  placement, and the experiment record ``warmup_grid``;
- :func:`first_update_by_depth` — what Adam's first update does to each block type;
- :func:`lr_sweep_summary`, :func:`best_lr_losses` — the record ``frontier_lr_sweep`` (Wortsman et al.'s proxy);
- :func:`hidden_variance_summary` — the record ``periln_variance`` (Peri-LN's quantity);
- :func:`gradient_by_layer_arrays`, :func:`log_slopes_by_layer` — the record ``gradient_by_layer`` (Mix-LN,
  LayerNorm Scaling);
- :func:`depth_transfer_losses`, :func:`optimal_log_lr` — the record ``depth_lr_transfer`` (tune small,
  train large).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch

from prenorm_lib.lab import probes
from prenorm_lib.lab.data import Corpus, get_batch
from prenorm_lib.lab.experiments import warmup_grid
from prenorm_lib.lab.train import OUTCOMES, History, TrainConfig, build_model, train


def _init_batch(corpus: Corpus, seed: int, batch_size: int, context_length: int):
    generator = torch.Generator().manual_seed(10_000 + seed)
    return get_batch(corpus.train_ids, batch_size, context_length, generator)  # (B, T) each


def ffn_grad_norms_over_seeds(
    corpus: Corpus, placement: str, num_layers: int = 6, seeds: Iterable[int] = range(8),
    batch_size: int = 8, context_length: int = 32, weight: str = "all", **options,
) -> np.ndarray:
    """(n_seeds, num_layers): per block, the gradient norm of its FFN weights at initialisation.

    Each seed builds a fresh model (:func:`prenorm_lib.lab.train.build_model`, with ``options``
    such as ``ffn="relu"``) and draws its own training batch;
    :func:`prenorm_lib.lab.probes.ffn_grad_norms_by_layer` takes one backward pass.
    """
    rows = []
    for seed in seeds:
        model = build_model(corpus, seed, norm=placement, num_layers=num_layers, context_length=context_length,
                            **options)
        x, y = _init_batch(corpus, seed, batch_size, context_length)
        rows.append(probes.ffn_grad_norms_by_layer(model, x, y, weight=weight))
    return np.array(rows)


def residual_norms_over_seeds(
    corpus: Corpus, placement: str, num_layers: int = 6, seeds: Iterable[int] = range(8),
    batch_size: int = 8, context_length: int = 32, **options,
) -> np.ndarray:
    """(n_seeds, num_layers + 1): mean ‖x_l‖² of the residual stream at depth l = 0 … L, at init."""
    rows = []
    for seed in seeds:
        model = build_model(corpus, seed, norm=placement, num_layers=num_layers, context_length=context_length,
                            **options)
        x, _ = _init_batch(corpus, seed, batch_size, context_length)
        rows.append(probes.residual_norms(model, x))
    return np.array(rows)


def fig3_grad_norms(corpus: Corpus, ffns: Sequence[str] = ("relu", "swiglu"), seeds: Iterable[int] = range(8),
                    num_layers: int = 6) -> dict[str, dict[str, np.ndarray]]:
    """``{ffn: {placement: (n_seeds, num_layers)}}``: Fig. 3's measurement for each FFN, pre and post."""
    seeds = list(seeds)
    return {ffn: {p: ffn_grad_norms_over_seeds(corpus, p, num_layers=num_layers, seeds=seeds, ffn=ffn)
                  for p in ("pre", "post")} for ffn in ffns}


def branch_gains_over_seeds(
    corpus: Corpus, ffn: str, seeds: Iterable[int] = range(4), num_layers: int = 6, placement: str = "post",
    batch_size: int = 8, context_length: int = 32,
) -> dict[str, np.ndarray]:
    """(n_seeds, L) arrays: :func:`prenorm_lib.lab.probes.branch_gains`, and for post-norm the gradient's
    growth through each sub-layer on its way down.

    ``"attn_factor"`` and ``"ffn_factor"`` of block l are ‖∂loss/∂(sub-layer input)‖ /
    ‖∂loss/∂(sub-layer output)‖ (:func:`prenorm_lib.lab.probes.stream_gradient_norms` with
    ``sublayers=True``); their product is the block's factor. ``"shared"`` (n_seeds, L + 1)
    is :func:`prenorm_lib.lab.probes.shared_fraction_by_depth`.
    """
    rows: dict[str, list] = {}
    for seed in seeds:
        model = build_model(corpus, seed, norm=placement, num_layers=num_layers, ffn=ffn,
                            context_length=context_length)
        x, y = _init_batch(corpus, seed, batch_size, context_length)
        for name, values in probes.branch_gains(model, x, y).items():
            rows.setdefault(name, []).append(values)
        rows.setdefault("shared", []).append(probes.shared_fraction_by_depth(model, x))
        if placement == "post":
            stream = np.array(probes.stream_gradient_norms(model, x, y, sublayers=True))  # x_0, z_1, y_1, z_2, …
            rows.setdefault("attn_factor", []).append(stream[0:-1:2] / stream[1::2])
            rows.setdefault("ffn_factor", []).append(stream[1::2] / stream[2::2])
    return {name: np.array(values) for name, values in rows.items()}


def depth_profiles(
    corpus: Corpus, depths: Sequence[int], placements: Sequence[str] = ("pre", "post"),
    seeds: Iterable[int] = range(3), ffn: str = "relu", batch_size: int = 8, context_length: int = 32,
) -> dict:
    """Everything the depth slider shows, for stacks of every depth L in ``depths``, at initialisation.

    Returns ``{"depths": [...], "d_model": d, "stream": {p: [(L + 1,) mean ‖x_l‖²]},
    "grads": {p: [(L,) mean FFN gradient by layer]}, "last": {p: (n_seeds, len(depths))}}``;
    "last" is the last block's FFN gradient (Theorem 1).
    """
    seeds = list(seeds)
    profiles: dict = {"depths": list(depths), "stream": {}, "grads": {}, "last": {}}
    for placement in placements:
        streams, grads, last = [], [], []
        for L in depths:
            stream_runs, grad_runs = [], []
            for seed in seeds:
                model = build_model(corpus, seed, norm=placement, num_layers=L, ffn=ffn, context_length=context_length)
                x, y = _init_batch(corpus, seed, batch_size, context_length)
                stream_runs.append(probes.residual_norms(model, x))
                grad_runs.append(probes.ffn_grad_norms_by_layer(model, x, y))
            streams.append(np.mean(stream_runs, axis=0))
            grads.append(np.mean(grad_runs, axis=0))
            last.append([run[-1] for run in grad_runs])
        profiles["stream"][placement] = streams
        profiles["grads"][placement] = grads
        profiles["last"][placement] = np.array(last).T
    profiles["d_model"] = model.token_embeddings.embedding_dim
    return profiles


def theorem1_arrays(record, kind: str = "one_batch") -> dict[int, dict[str, np.ndarray]]:
    """The ``theorem1_depth`` record as ``{d_model: {placement: (n_seeds, n_depths)}}`` arrays.

    ``kind`` is ``"one_batch"`` (the norm of one batch's gradient of the last block's W2) or
    ``"expected"`` (of the gradient averaged over the record's mini-batches).
    """
    if kind not in ("one_batch", "expected"):
        raise ValueError(f"kind must be 'one_batch' or 'expected', got {kind!r}")
    return {width: {placement: np.array([run[f"d{width}"][placement][kind] for _, run in record.by_seed()])
                    for placement in record.config["placements"]}
            for width in record.config["widths"]}


def log_log_slopes(depths: Sequence[int], runs: np.ndarray) -> np.ndarray:
    """(n_seeds,): per seed, the least-squares slope of log(value) on log(L) — 0 if flat, −½ if ∝ 1/√L."""
    return np.polyfit(np.log(np.asarray(depths, dtype=float)), np.log(np.asarray(runs, dtype=float)).T, 1)[0]


def lemma2_bounds(depths: np.ndarray, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Xiong et al.'s Lemma 2 bounds on E‖x_l‖² for pre-norm: (1 + l/2)·d and (1 + 3l/2)·d."""
    depths = np.asarray(depths, dtype=float)
    return (1 + depths / 2) * d_model, (1 + 3 * depths / 2) * d_model


def stability_grid(
    corpus: Corpus, config: TrainConfig, placements: Sequence[str], lrs: Sequence[float],
    warmups: Sequence[int], seeds: Sequence[int] = (0,), num_layers: int = 6,
) -> dict[tuple[str, int, float, int], History]:
    """Train one small model per (placement, warmup, lr, seed); key → its History.

    The full grid, with more seeds and the controls, is the experiment record ``warmup_grid``.
    """
    results = {}
    for placement in placements:
        for warmup in warmups:
            for lr in lrs:
                for seed in seeds:
                    run_config = replace(config, lr=lr, warmup_steps=warmup, seed=seed)
                    model = build_model(corpus, seed, norm=placement, num_layers=num_layers,
                                        context_length=config.context_length)
                    results[(placement, warmup, lr, seed)] = train(model, corpus, run_config, progress=False)
    return results


def grid_summary(record) -> dict[tuple[str, int, float], dict]:
    """The ``warmup_grid`` record by cell (block, warmup, lr): every seed's outcome and final loss.

    Each value holds ``"outcomes"`` (one per seed, in seed order), ``"losses"`` (final
    validation loss, nan where the run diverged), ``"loss_mean"`` (over the seeds that
    finished, nan if none did), ``"diverged_at"`` and ``"label"``, the text of the cell:
    "trains 5/5", or the counts when seeds disagree.
    """
    config = record.config
    runs = [run["cells"] for _, run in record.by_seed()]
    summary = {}
    for block in config["blocks"]:
        for warmup in config["warmups"]:
            for lr in config["lrs"]:
                cells = [cells[warmup_grid.cell_key(block, lr, warmup)] for cells in runs]
                outcomes = [cell["outcome"] for cell in cells]
                counts = {o: outcomes.count(o) for o in OUTCOMES if o in outcomes}
                losses = [math.nan if c["final_val_loss"] is None else c["final_val_loss"] for c in cells]
                summary[(block, warmup, lr)] = {
                    "outcomes": outcomes,
                    "losses": losses,
                    "loss_mean": float(mean_over_finite(np.array([losses]).T)[0]),
                    "diverged_at": [c["diverged_at"] for c in cells],
                    "label": "\n".join(f"{o} {n}/{len(outcomes)}" for o, n in counts.items()),
                }
    return summary


def first_update_by_depth(
    corpus: Corpus, variants: Mapping[str, Mapping], depths: Sequence[int], seeds: Iterable[int] = range(3),
    lr: float = 1e-3, batch_size: int = 16, context_length: int = 16,
) -> dict[str, dict]:
    """For each variant (name → build_model options) and depth L: :func:`probes.adam_first_step`.

    Returns ``{variant: {"output_change": (n_seeds, len(depths)), "update_ratio": [per seed,
    per depth, (L,) by block], "gradient": [same]}}``: the change of the final representation
    after one Adam update of size ``lr``, and what the update and the gradient were per block.
    """
    seeds = list(seeds)
    results = {}
    for name, options in variants.items():
        change = np.zeros((len(seeds), len(depths)))
        ratios, gradients = [], []
        for i, seed in enumerate(seeds):
            ratios.append([])
            gradients.append([])
            for j, L in enumerate(depths):
                model = build_model(corpus, seed, num_layers=L, context_length=context_length, **options)
                x, y = _init_batch(corpus, seed, batch_size, context_length)
                step = probes.adam_first_step(model, x, y, lr)
                change[i, j] = step["output_change"]
                blocks = [f"layers.{b}" for b in range(L)]
                ratios[i].append(np.array([step["update_ratio"][b] for b in blocks]))
                gradients[i].append(np.array([step["gradient"][b] for b in blocks]))
        results[name] = {"output_change": change, "update_ratio": ratios, "gradient": gradients}
    return results


def _over_finite(runs: np.ndarray, reduce) -> np.ndarray:
    runs = np.asarray(runs, dtype=float)
    return np.array([reduce(column[np.isfinite(column)]) if np.isfinite(column).any() else np.nan
                     for column in runs.T])


def mean_over_finite(runs: np.ndarray) -> np.ndarray:
    """Column means over the finite entries of (n_seeds, n) ``runs``; nan where no seed finished (no warning)."""
    return _over_finite(runs, np.mean)


def median_over_finite(runs: np.ndarray) -> np.ndarray:
    """Column medians over the finite entries of (n_seeds, n) ``runs``; nan where no seed finished."""
    return _over_finite(runs, np.median)


def _at_end(cells: list[list[dict]], key: str, curve: bool = True) -> np.ndarray:
    """(n_seeds, n_lrs): each run's ``key`` at the end of training (a curve's last value), nan if it diverged."""
    return np.array([[math.nan if c["diverged_at"] is not None else (c[key][-1] if curve else c[key]) for c in row]
                     for row in cells])


def lr_sweep_summary(record) -> dict[str, dict[str, np.ndarray]]:
    """The ``frontier_lr_sweep`` record per block type: (n_seeds, n_lrs) arrays, nan where a run diverged.

    ``"loss"``: final validation loss; ``"logit"``: the largest attention logit at the end
    of training; ``"log_z"`` and ``"output_logit"``: the output's mean |log Z| and largest
    |logit| at the end; ``"loss_mean"`` and ``"logit_median"`` (n_lrs,): over the seeds that
    finished, nan if none did; ``"diverged"`` (n_lrs,): how many seeds diverged.
    """
    lrs = record.config["lrs"]
    summary = {}
    for block in record.config["blocks"]:
        cells = [[runs[f"{block}|{lr:g}"] for lr in lrs] for _, runs in record.by_seed()]  # [seed][lr]
        arrays = {"loss": _at_end(cells, "final_val_loss", curve=False), "logit": _at_end(cells, "max_logit"),
                  "log_z": _at_end(cells, "log_z"), "output_logit": _at_end(cells, "max_output_logit")}
        summary[block] = {**arrays, "loss_mean": mean_over_finite(arrays["loss"]),
                          "logit_median": median_over_finite(arrays["logit"]),
                          "diverged": (~np.isfinite(arrays["loss"])).sum(axis=0)}
    return summary


def best_lr_losses(summary_row: Mapping[str, np.ndarray], lrs: Sequence[float]) -> tuple[float, np.ndarray]:
    """A row's best learning rate (lowest mean final loss over the seeds, diverged runs counting as
    worst) and its (n_seeds,) final losses there: each variant compared at its own tuned rate."""
    loss = summary_row["loss"]
    mean = np.where(np.isfinite(loss).all(axis=0), loss.mean(axis=0), np.inf)
    best = int(np.argmin(mean))
    return lrs[best], loss[:, best]


def hidden_variance_summary(record, at: int = -1) -> dict[str, dict[str, np.ndarray]]:
    """The ``periln_variance`` record per placement, at evaluation ``at`` (-1: the end of training; 0: init).

    ``"variance"`` and ``"max_abs"``: (n_seeds, n_lrs, L + 1), the hidden state's variance over
    its channels and its largest entry at depths 0 … L, nan where a run diverged; ``"loss"``:
    (n_seeds, n_lrs) final validation loss.
    """
    from prenorm_lib.lab.experiments import periln_variance

    summary = {}
    for placement in record.config["placements"]:
        cells = [[runs[periln_variance.run_key(placement, lr)] for lr in record.config["lrs"]]
                 for _, runs in record.by_seed()]  # [seed][lr]
        depths = record.config["num_layers"] + 1
        summary[placement] = {
            stat: np.array([[[math.nan] * depths if c["diverged_at"] is not None and at != 0 else c[stat][at]
                             for c in row] for row in cells])
            for stat in ("variance", "max_abs")
        }
        summary[placement]["loss"] = _at_end(cells, "final_val_loss", curve=False)
    return summary


def gradient_by_layer_arrays(record, lr: float | None = None, step: int = -1) -> dict[str, np.ndarray]:
    """The ``gradient_by_layer`` record: ``{placement: (n_seeds, L)}`` each block's gradient norm.

    ``lr=None``: at initialisation (the norm of the gradient averaged over the record's
    mini-batches); else the training run at ``lr``, at its recorded step number ``step``
    (an index into its ``norm_steps``; nan for a run that diverged before it).
    """
    arrays = {}
    for placement in record.config["placements"]:
        rows = []
        for _, run in record.by_seed():
            entry = run[placement]
            if lr is None:
                rows.append(entry["init"])
                continue
            trained = entry[f"{lr:g}"]
            norms = trained["grad_norms"]
            rows.append(norms[step] if step < len(norms) and -len(norms) <= step and trained["diverged_at"] is None
                        else [math.nan] * record.config["num_layers"])
        arrays[placement] = np.array(rows)
    return arrays


def log_slopes_by_layer(runs: np.ndarray) -> np.ndarray:
    """(n_seeds,): per seed, the least-squares slope of log10(norm) on the block index — 0 when uniform."""
    runs = np.asarray(runs, dtype=float)
    return np.polyfit(np.arange(1, runs.shape[1] + 1), np.log10(runs).T, 1)[0]


def depth_transfer_losses(record) -> dict[str, np.ndarray]:
    """``depth_lr_transfer`` as ``{parametrisation: (n_seeds, n_depths, n_lrs)}`` final losses, nan where diverged."""
    from prenorm_lib.lab.experiments import depth_lr_transfer

    config = record.config
    return {name: np.array([[[math.nan if run[depth_lr_transfer.cell_key(name, depth, lr)]["diverged_at"] is not None
                              else run[depth_lr_transfer.cell_key(name, depth, lr)]["final_val_loss"]
                              for lr in config["lrs"]] for depth in config["depths"]] for _, run in record.by_seed()])
            for name in config["parametrisations"]}


def optimal_log_lr(losses: np.ndarray, lrs: Sequence[float]) -> np.ndarray:
    """(n_seeds,): per seed, log10 of the best learning rate of a (n_seeds, n_lrs) loss grid.

    The grid's lowest loss (a diverged run counts as worst); where it has a neighbour on each
    side, the vertex of the parabola through the three points in log10(lr), kept between the
    neighbours — a grid of factors of about 3 cannot say more than that.
    """
    logs = np.log10(np.asarray(lrs, dtype=float))
    found = []
    for row in np.asarray(losses, dtype=float):
        row = np.where(np.isfinite(row), row, np.inf)
        i = int(np.argmin(row))
        if 0 < i < len(row) - 1 and np.isfinite(row[i - 1 : i + 2]).all():
            a, b, _ = np.polyfit(logs[i - 1 : i + 2], row[i - 1 : i + 2], 2)
            vertex = -b / (2 * a) if a > 0 else logs[i]
            found.append(float(np.clip(vertex, logs[i - 1], logs[i + 1])))
        else:
            found.append(float(logs[i]))
    return np.array(found)
