"""Gu et al.'s attention-sink metric and the attention_sinks record's pairing, against written-out cases."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from prenorm_lib.lab.experiments import attention_sinks as sinks


def gu_reference_importance(attention_scores: torch.Tensor) -> torch.Tensor:
    """Gu et al.'s ``compute_attention_sink`` (sail-sg/Attention-Sink, eval_sink_open_source.py), as written there.

    ``attention_scores`` is (samples, layers, heads, T, T); the key axis is divided by how many
    queries see each key, then the queries are summed.
    """
    num_samples, num_layers, num_heads, t1, t2 = attention_scores.shape
    ratios = torch.arange(t1, 0, -1)[None, None, None, :].expand(num_samples, num_layers, num_heads, t1, t2)
    return (attention_scores / ratios.to(attention_scores)).sum(dim=-2)


def causal_rows(T: int, seed: int, shape=(3, 2, 2)) -> torch.Tensor:
    """Random causal attention weights (*shape, T, T), rows summing to 1."""
    scores = torch.randn(*shape, T, T, generator=torch.Generator().manual_seed(seed)) * 2
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -float("inf"))
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("T", [1, 5, 32])
def test_importance_is_gu_et_als(T):
    weights = causal_rows(T, seed=T)
    assert_close(sinks.importance(weights), gu_reference_importance(weights))


def test_uniform_attention_gives_the_uniform_share():
    T = 32
    uniform = torch.ones(T, T).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    assert sinks.importance(uniform)[0].item() == pytest.approx(sinks.uniform_importance(T))
    assert sinks.uniform_importance(32) == pytest.approx(0.1269, abs=1e-4)


def test_a_head_that_looks_only_at_the_first_token_is_a_sink_and_counts_once():
    """At T = 32 an even head gives the first token 0.127, below ε = 0.3 (at T = 8 it would give 0.34: above)."""
    T = 32
    sink_head = torch.zeros(T, T)
    sink_head[:, 0] = 1  # every query on the first token: importance 1
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    weights = torch.stack([sink_head, uniform, uniform, uniform])[None, None]  # (L=1, B=1, H=4, T, T)
    assert sinks.importance(weights)[..., 0, 0].item() == 1
    assert sinks.sink_rate(weights, epsilon=0.3) == 0.25  # one of four heads above ε
    assert sinks.sink_rate(weights, epsilon=1.0) == 0.0  # "exceeds": strictly above


def test_options_start_from_the_plain_models_weights():
    config = {**sinks.CONFIG, **sinks.FINGERPRINT}
    plain = sinks.build(config, "plain", seed=3).state_dict()
    for variant, new in (("gate", "gate_proj.weight"), ("sink", "sink_logits")):
        state = sinks.build(config, variant, seed=3).state_dict()
        assert set(state) - set(plain) == {f"layers.{i}.attn.{new}" for i in range(2)}
        assert all(torch.equal(state[key], value) for key, value in plain.items())
    gate = sinks.build(config, "gate", seed=3).layers[0].attn.gate_proj.weight
    assert not torch.equal(gate, sinks.build(config, "gate", seed=4).layers[0].attn.gate_proj.weight)


def test_measure_reports_each_options_own_use():
    config = {**sinks.CONFIG, **sinks.FINGERPRINT}
    windows = sinks.measurement_windows(config)
    plain = sinks.measure(sinks.build(config, "plain", 0), windows, sinks.EPSILON)
    gated = sinks.measure(sinks.build(config, "gate", 0), windows, sinks.EPSILON)
    sunk = sinks.measure(sinks.build(config, "sink", 0), windows, sinks.EPSILON)
    assert "mean_gate" not in plain and "sink_share" not in plain
    assert 0 < gated["mean_gate"] < 1 and "sink_share" not in gated
    assert 0 < sunk["sink_share"] < 1 and "mean_gate" not in sunk
    assert plain["largest_activation"] > 0 and plain["activation_ratio"] >= 1


def test_unknown_variant_names_the_choices():
    with pytest.raises(ValueError, match="variant must be one of"):
        sinks.build(sinks.CONFIG, "gated", 0)


def test_the_configs_say_what_was_added():
    config = {**sinks.CONFIG, **sinks.FINGERPRINT}
    gated = sinks.build(config, "gate", 0)
    assert gated.config.attn_gate == "headwise" and not gated.config.attn_sink
    assert all(layer.config.attn_gate == "headwise" for layer in gated.layers)
    assert sinks.build(config, "sink", 0).config.attn_sink
