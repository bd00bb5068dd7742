"""Timing two implementations fairly: interleaved repeats, paired ratios, quartiles.

Absolute times drift on a shared machine, so a comparison is only as good as its design:
the functions take turns within every repeat (a burst of load hits all of them), the
starting function rotates, repeat ``i`` of one is divided by repeat ``i`` of the other,
and the result is a median with its interquartile range, never one number.

Used by notebook 01 (RMSNorm vs LayerNorm, Zhang & Sennrich's comparison of the
formulas: both built from the same elementary ops, forward and backward, beside torch's
own fused kernels), by the experiment record ``rmsnorm_speed``, and by
``python -m prenorm_course.bench``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from prenorm_lib import functional, validation
from prenorm_lib.rope import RotaryPositionalEmbedding, rotation_matrix


def interleaved_samples(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 3, inner: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each function, one sample per repeat, the functions interleaved.

    In each repeat every function runs ``inner`` times back to back (the sample is their
    mean), and the functions take turns: a burst of load from another process then hits
    all of them, and sample ``i`` of one function can be paired with sample ``i`` of
    another (see :func:`paired_ratios`). The starting function rotates from repeat to
    repeat so that none always runs first, right after a cold cache.
    """
    validation.positive_int("repeats", repeats)
    validation.positive_int("inner", inner)
    names = list(fns)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            fn = fns[name]
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - start) / inner)
    return samples


def interleaved_median(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each function, calls interleaved to share the noise."""
    return {name: statistics.median(s) for name, s in interleaved_samples(fns, repeats, warmup).items()}


def paired_ratios(samples: dict[str, list[float]], name: str, reference: str) -> list[float]:
    """Time of ``name`` over time of ``reference``, repeat by repeat (samples taken side by side)."""
    ours, theirs = samples[name], samples[reference]
    if len(ours) != len(theirs):
        raise ValueError(f"samples of {name!r} and {reference!r} must pair up, got {len(ours)} and {len(theirs)}")
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile): the middle half of the values lies between the outer two."""
    if len(values) < 2:
        raise ValueError(f"values must hold at least 2 numbers for quartiles, got {len(values)}")
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


# Zhang & Sennrich 2019, abstract: RMSNorm "reduces the running time by 7%∼64% on different
# models" — whole models (mostly RNNs), credited to RMSNorm itself. A single-op timing is a
# check of the cost argument beside this range, not a reproduction of it.
PAPER_TIME_SAVED = (0.07, 0.64)

NORM_KERNELS = ("LayerNorm, same ops", "RMSNorm, same ops", "pRMSNorm, same ops", "torch F.layer_norm",
                "torch F.rms_norm")
NORM_RATIOS = {
    # what the ratio says: (numerator, denominator)
    "RMSNorm / LayerNorm, same ops": ("RMSNorm, same ops", "LayerNorm, same ops"),
    "pRMSNorm / LayerNorm, same ops": ("pRMSNorm, same ops", "LayerNorm, same ops"),
    "torch F.rms_norm / F.layer_norm": ("torch F.rms_norm", "torch F.layer_norm"),
    "LayerNorm, torch fused / same ops": ("torch F.layer_norm", "LayerNorm, same ops"),
}


def norm_steps(rows: int, d_model: int, seed: int = 0) -> dict[str, Callable[[], None]]:
    """One forward+backward pass of each normalisation in ``NORM_KERNELS``, on the same data.

    The input is (rows, d_model) float32 and needs its gradient, like an activation inside
    a model; the gain and LayerNorm's bias need theirs too; the upstream gradient is a
    fixed random tensor. Before anything is timed, each same-ops kernel is checked against
    torch's (values and input gradient): a timing of two different functions means nothing.
    """
    validation.positive_int("rows", rows)
    validation.positive_int("d_model", d_model)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, d_model, generator=gen).requires_grad_()  # (rows, d)
    weight = (1 + 0.1 * torch.randn(d_model, generator=gen)).requires_grad_()
    bias = (0.1 * torch.randn(d_model, generator=gen)).requires_grad_()
    upstream = torch.randn(rows, d_model, generator=gen)  # (rows, d)
    forwards = {
        "LayerNorm, same ops": lambda: functional.layer_norm(x, weight, bias),
        "RMSNorm, same ops": lambda: functional.rms_norm(x, weight),
        "pRMSNorm, same ops": lambda: functional.prms_norm(x, weight),
        "torch F.layer_norm": lambda: F.layer_norm(x, (d_model,), weight, bias, 1e-5),
        "torch F.rms_norm": lambda: F.rms_norm(x, (d_model,), weight, 1e-5),
    }
    for ours, theirs in (("LayerNorm, same ops", "torch F.layer_norm"), ("RMSNorm, same ops", "torch F.rms_norm")):
        (grad_ours,) = torch.autograd.grad(forwards[ours](), x, upstream)
        (grad_theirs,) = torch.autograd.grad(forwards[theirs](), x, upstream)
        torch.testing.assert_close(forwards[ours](), forwards[theirs](), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-4, rtol=1e-4)

    def step(forward):
        def run():
            forward().backward(upstream)
            x.grad = weight.grad = bias.grad = None

        return run

    return {name: step(forwards[name]) for name in NORM_KERNELS}


def bench_norms(rows: int, d_model: int, repeats: int, inner: int = 1, seed: int = 0) -> dict[str, list[float]]:
    """Seconds per forward+backward of each kernel of ``NORM_KERNELS``, one sample per repeat, interleaved."""
    return interleaved_samples(norm_steps(rows, d_model, seed), repeats, inner=inner)


def norm_ratios(samples: dict[str, list[float]]) -> dict[str, tuple[float, float, float]]:
    """Each ratio of ``NORM_RATIOS`` as (first quartile, median, third quartile) over the paired repeats."""
    return {label: quartiles(paired_ratios(samples, *pair)) for label, pair in NORM_RATIOS.items()}


def profiled_ops(fn: Callable[[], object]) -> dict[str, list[str]]:
    """What torch's CPU profiler records for one call of ``fn``: each operator and the operators it calls.

    Returns ``{operator: [the operators it calls directly]}`` in the order they first ran,
    e.g. ``{"aten::rms_norm": ["aten::_fused_rms_norm"], "aten::_fused_rms_norm": ["aten::pow", …]}``.
    The profiler's own start/stop lines (written by its C++ side straight to file
    descriptor 2) are kept out of the notebook.
    """
    import os
    import sys

    from torch.profiler import ProfilerActivity, profile

    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    tree: dict[str, list[str]] = {}
    for event in prof.events():
        if event.name.startswith("aten::") and event.name not in tree:
            tree[event.name] = [child.name for child in event.cpu_children]
    return tree


def backward_steps(output: torch.Tensor) -> list[str]:
    """The autograd nodes behind ``output``, last step first, breadth first (gradient accumulators left out).

    ``["NativeLayerNormBackward0"]`` for torch's LayerNorm: one backward kernel. A
    composite function shows one node per elementary operation instead.
    """
    validation.tensor("output", output)
    names, todo, seen = [], [output.grad_fn], set()
    while todo:
        node = todo.pop(0)
        if node is None or id(node) in seen or type(node).__name__ == "AccumulateGrad":
            continue
        seen.add(id(node))
        names.append(type(node).__name__)
        todo += [child for child, _ in node.next_functions]
    return names


def bench_rope(batch: int, seq_len: int, d_k: int, repeats: int) -> dict[str, float]:
    """RoPE as the library applies it (elementwise, cached cos/sin) against explicit d×d rotation matrices.

    Both are checked equal first; returns the interleaved median time of each (notebook 03, ``make bench``).
    """
    torch.manual_seed(0)
    rope = RotaryPositionalEmbedding(10000.0, d_k, seq_len)
    matrices = torch.stack([rotation_matrix(10000.0, d_k, i) for i in range(seq_len)])  # (T, d, d), cached too
    x = torch.randn(batch, seq_len, d_k)
    positions = torch.arange(seq_len)

    def naive():
        return torch.einsum("tij,btj->bti", matrices[positions], x)

    torch.testing.assert_close(rope(x, positions), naive(), atol=1e-5, rtol=1e-5)
    return interleaved_median({"library": lambda: rope(x, positions), "matrix": naive}, repeats)
