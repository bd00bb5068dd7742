"""The timing harness: interleaving, paired ratios, quartiles, and the norm comparison it times.

No test here asserts a speed (that would fail on a busy machine and pass on a lucky one);
they check that the harness measures what it says, in the order it says.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prenorm_lib import functional
from prenorm_lib.lab import timing
from prenorm_lib.lab.experiments import rmsnorm_speed


def test_interleaved_samples_take_turns_and_rotate_the_first():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    samples = timing.interleaved_samples(fns, repeats=3, warmup=1, inner=2)
    assert {name: len(s) for name, s in samples.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(t >= 0 for s in samples.values() for t in s)
    warmup, timed = calls[:3], calls[3:]
    assert warmup == ["a", "b", "c"]
    assert timed == ["a", "a", "b", "b", "c", "c",  # repeat 0 starts with a
                     "b", "b", "c", "c", "a", "a",  # repeat 1 with b
                     "c", "c", "a", "a", "b", "b"]  # repeat 2 with c


def test_interleaved_samples_refuse_zero_repeats():
    with pytest.raises(ValueError, match="repeats must be a positive int, got 0"):
        timing.interleaved_samples({"a": lambda: None}, repeats=0)


def test_paired_ratios_divide_repeat_by_repeat():
    samples = {"fast": [1.0, 2.0, 3.0], "slow": [2.0, 8.0, 3.0]}
    assert timing.paired_ratios(samples, "fast", "slow") == [0.5, 0.25, 1.0]
    with pytest.raises(ValueError, match="must pair up, got 3 and 2"):
        timing.paired_ratios({"fast": [1.0, 2.0, 3.0], "slow": [1.0, 2.0]}, "fast", "slow")


@pytest.mark.parametrize("n", [2, 5, 15, 16])
def test_quartiles_match_numpy(n):
    values = list(np.random.default_rng(n).lognormal(size=n))
    assert timing.quartiles(values) == pytest.approx(tuple(np.percentile(values, [25, 50, 75])))


def test_quartiles_need_two_values():
    with pytest.raises(ValueError, match="at least 2 numbers"):
        timing.quartiles([1.0])


def test_norm_steps_run_forward_and_backward_and_clear_the_gradients():
    steps = timing.norm_steps(rows=8, d_model=32)
    assert list(steps) == list(timing.NORM_KERNELS)
    for step in steps.values():
        step()
        step()  # gradients cleared: a second call starts afresh


def test_norm_steps_refuse_a_kernel_that_is_not_layer_norm(monkeypatch):
    """The equivalence check fires: timing LayerNorm against something else would mean nothing."""
    def no_centring(x, weight, bias=None, eps=1e-5):
        return functional.rms_norm(x, weight, eps) + bias

    monkeypatch.setattr(functional, "layer_norm", no_centring)
    with pytest.raises(AssertionError):
        timing.norm_steps(rows=8, d_model=32)


def test_norm_ratios_are_the_quartiles_of_the_paired_ratios():
    samples = {name: [1.0, 2.0, 4.0] for name in timing.NORM_KERNELS}
    samples["RMSNorm, same ops"] = [0.5, 1.0, 2.0]
    ratios = timing.norm_ratios(samples)
    assert list(ratios) == list(timing.NORM_RATIOS)
    assert ratios["RMSNorm / LayerNorm, same ops"] == (0.5, 0.5, 0.5)
    assert ratios["torch F.rms_norm / F.layer_norm"] == (1.0, 1.0, 1.0)


def test_paper_range_is_the_one_in_the_references():
    assert timing.PAPER_TIME_SAVED == (0.07, 0.64)


def test_speed_experiment_records_every_kernel_at_every_width_and_pools_in_pairs():
    config = {"seeds": [0], "rows": 4, "widths": [8, 16], "repeats": 2, "inner": 1}
    first = rmsnorm_speed.run_seed(config, seed=0)
    assert set(first["samples"]) == {"8", "16"}
    assert all(list(by_kernel) == list(timing.NORM_KERNELS) and all(len(t) == 2 for t in by_kernel.values())
               for by_kernel in first["samples"].values())
    second = {"samples": {"16": {name: [10.0, 20.0] for name in timing.NORM_KERNELS}}}
    pooled = rmsnorm_speed.pooled_samples([first, second], 16)
    for name in timing.NORM_KERNELS:
        assert pooled[name] == first["samples"]["16"][name] + [10.0, 20.0]
    assert rmsnorm_speed.MAX_JOBS == 1
    assert rmsnorm_speed.HEADLINE_WIDTH in rmsnorm_speed.CONFIG["widths"]


def test_same_ops_kernels_differ_only_by_what_layer_norm_adds():
    """On a zero-mean input with zero bias, the two timed kernels compute the same numbers."""
    x = torch.randn(16, 64, dtype=torch.float64)
    x = x - x.mean(dim=-1, keepdim=True)
    weight = torch.rand(64, dtype=torch.float64) + 0.5
    torch.testing.assert_close(functional.layer_norm(x, weight, torch.zeros(64, dtype=torch.float64)),
                               functional.rms_norm(x, weight))


def test_profiled_ops_names_what_torch_runs_and_keeps_the_profiler_quiet(capfd):
    """torch's CPU F.rms_norm is composite (pow, mean, rsqrt, mul under one name); LayerNorm is one kernel."""
    x, gain = torch.randn(4, 16), torch.ones(16)
    ops = timing.profiled_ops(lambda: torch.nn.functional.rms_norm(x, (16,), gain, 1e-5))
    assert next(iter(ops)) == "aten::rms_norm"
    inner = ops["aten::rms_norm"][0]
    assert {"aten::pow", "aten::mean", "aten::rsqrt", "aten::mul"} <= set(ops[inner])
    layer = timing.profiled_ops(lambda: torch.nn.functional.layer_norm(x, (16,), gain))
    assert layer["aten::layer_norm"] == ["aten::native_layer_norm"]
    assert "aten::pow" not in layer
    assert "profiler_start" not in capfd.readouterr().err  # the C++ side's lines went nowhere


def test_backward_steps_one_kernel_against_a_composite():
    x = torch.randn(4, 16, requires_grad=True)
    assert timing.backward_steps(torch.nn.functional.layer_norm(x, (16,))) == ["NativeLayerNormBackward0"]
    steps = timing.backward_steps(torch.nn.functional.rms_norm(x, (16,), eps=1e-5))
    assert {"PowBackward0", "MeanBackward1", "RsqrtBackward0"} <= set(steps)
    assert timing.backward_steps(x * 2) == ["MulBackward0"]  # the leaf's accumulator is left out
