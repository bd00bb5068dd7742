"""The FFN ablation record: paired runs of the real code on a tiny budget, and how a record is read."""

from __future__ import annotations

import math

import pytest

from prenorm_lib.lab import experiments, prose
from prenorm_lib.lab.experiments import Record
from prenorm_lib.lab.experiments import ffn_ablation as ablation

TINY = {**ablation.CONFIG, "ffns": ["relu", "swiglu", "bilinear"], "d_model": 16, "num_heads": 2,
        "num_layers": 1, "context_length": 16, "batch_size": 2, "steps": 4, "warmup_steps": 1, "eval_every": 2,
        "eval_batches": 1, "seeds": [0, 1]}


@pytest.fixture(scope="module")
def tiny_record() -> Record:
    return experiments.run("ffn_ablation", config=TINY, log=lambda _: None)


def test_every_ffn_gets_the_same_seed_and_its_default_width(tiny_record):
    for _, run in tiny_record.by_seed():
        assert list(run) == TINY["ffns"]
        assert {kind: run[kind]["d_ff"] for kind in run} == {"relu": 64, "swiglu": 64, "bilinear": 64}
        assert all(run[kind]["val_steps"] == [0, 2, 4] for kind in run)
        assert run["relu"]["dead_units"] is not None and run["swiglu"]["dead_units"] is None
    (_, seed0), (_, seed1) = tiny_record.by_seed()
    assert seed0["relu"]["val_loss"] != seed1["relu"]["val_loss"]  # the seed matters …


def test_a_seed_reproduces_exactly():
    """… and the same seed gives the same run: the pairing is real."""
    config = {**TINY, "ffns": ["relu"], "seeds": [3]}
    assert ablation.run_seed(config, 3) == ablation.run_seed(config, 3)


def test_record_analysis(tiny_record):
    finals = ablation.final_losses(tiny_record)
    gaps = ablation.paired_gaps(tiny_record)
    assert set(gaps) == {"relu", "bilinear"}
    assert gaps["relu"] == [r - s for r, s in zip(finals["relu"], finals["swiglu"], strict=True)]
    steps, losses = ablation.curves(tiny_record)
    assert steps == [0, 2, 4] and losses["relu"].shape == (2, 3)
    rows = ablation.comparison(tiny_record)
    assert [row["kind"] for row in rows] == ["relu", "bilinear"]
    assert all(row["n"] == 2 and 0 <= row["wins"] <= 2 for row in rows)


def test_summary_and_verdicts():
    assert ablation.summarize([0.1, 0.3, -0.1]) == pytest.approx({"mean": 0.1, "std": 0.2, "n": 3, "positive": 2})
    assert ablation.verdict(0.05, 0.02) == "baseline lower"
    assert ablation.verdict(0.05, 0.03) == "no clear difference"
    assert ablation.verdict(-0.05, 0.01) == "baseline higher"


def test_shazeer_gaps_come_from_table_1():
    gap, spread = ablation.shazeer_gap("relu")
    assert gap == pytest.approx(1.997 - 1.944) and spread == pytest.approx(math.hypot(0.005, 0.010))
    assert ablation.verdict(*ablation.shazeer_gap("relu")) == "baseline lower"
    assert ablation.verdict(*ablation.shazeer_gap("silu")) == "baseline lower"
    assert ablation.verdict(*ablation.shazeer_gap("geglu")) == "no clear difference"  # 1.942 vs 1.944


def test_the_stored_regime_reads_less_than_one_epoch():
    assert ablation.epochs(ablation.CONFIG, prose.make_prose_corpus()) < 1
