"""RMSNorm against LayerNorm built from the same elementary ops, forward+backward (notebook 01).

RMSNorm drops LayerNorm's mean and bias, so it does less work; Zhang & Sennrich report
7 %–64 % less running time across their models. Comparing the formulas fairly means
writing both sides the same way (``functional.rms_norm`` and ``functional.layer_norm``),
timing what training runs (the forward and the backward pass), on one thread, with the
variants interleaved so that background load hits all of them alike. torch's own kernels
run beside them: ``F.layer_norm`` is one fused kernel, while the profiler shows
``F.rms_norm``'s CPU forward as pow, mean, rsqrt and mul (in the torch this course was
made with) — how much more the implementation weighs than the formula.

Each seed is one round: its own random input, ``repeats`` interleaved repeats of every
kernel at every width, ``inner`` calls per sample. Rounds run one after the other
(``MAX_JOBS = 1``): two rounds side by side would share the memory bus they measure.
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab import timing

DESCRIPTION = "RMSNorm vs LayerNorm (same ops) and torch's kernels: forward+backward seconds, fp32, one thread"
CONFIG = {
    "seeds": [0, 1, 2, 3, 4],
    "rows": 1024,
    "widths": [256, 1024, 4096],
    "repeats": 15,
    "inner": 3,
}
MAX_JOBS = 1
HEADLINE_WIDTH = 1024  # the notebook's 1024 × 1024 comparison


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Per-repeat seconds of every kernel of ``timing.NORM_KERNELS``, by width."""
    samples = {}
    for width in config["widths"]:
        timed = timing.bench_norms(config["rows"], width, config["repeats"], config["inner"], seed=seed)
        samples[str(width)] = {name: [round(t, 7) for t in times] for name, times in timed.items()}
    return {"samples": samples}


def pooled_samples(runs: list[dict[str, Any]], width: int) -> dict[str, list[float]]:
    """Every round's samples at ``width``, concatenated; repeat i of one kernel still pairs with repeat i of another."""
    pooled: dict[str, list[float]] = {}
    for run in runs:
        for name, times in run["samples"][str(width)].items():
            pooled.setdefault(name, []).extend(times)
    return pooled
