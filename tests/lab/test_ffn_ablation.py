"""The FFN ablation record: paired runs of the real code on a tiny budget, and how a record is read."""

from __future__ import annotations

import pytest

from prenorm_lib.lab import experiments, prose, stats
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
    versus = ablation.against(tiny_record, "relu")  # SwiGLU − ReLU, seed by seed
    assert versus.differences == pytest.approx([-g for g in gaps["relu"]])
    assert versus.a_name == "SwiGLU" and versus.b_name == "ReLU"
    rows = ablation.comparison(tiny_record)
    assert [row["kind"] for row in rows] == ["relu", "bilinear"]
    assert all(row["ours"].n == 2 for row in rows)


def test_what_shazeers_table_can_order():
    """His Table 1 (4 runs each) separates ReLU, SiLU and Bilinear from SwiGLU, not GEGLU or ReGLU; nor Swish/ReLU."""
    assert ablation.shazeer_gap("relu") == pytest.approx(1.944 - 1.997)
    assert ablation.shazeer_separates("relu") and ablation.shazeer_separates("silu")
    assert ablation.shazeer_separates("bilinear")
    assert not ablation.shazeer_separates("geglu") and not ablation.shazeer_separates("reglu")
    assert not ablation.shazeer_separates("silu", "relu")


def test_bilinear_against_swiglu_rests_on_his_tables_rounding():
    """Welch's p from his printed means and stds is 0.04; within their three-decimal rounding it crosses 0.05."""
    assert ablation.shazeer_p("bilinear") == pytest.approx(0.0408, abs=1e-4)
    low, high = ablation.shazeer_p_range("bilinear")
    assert low < ablation.shazeer_p("bilinear") < 0.05 < high
    assert 0.02 < low < 0.03 and 0.05 < high < 0.06
    assert ablation.shazeer_p("geglu") > 0.5  # GEGLU and SwiGLU: nowhere near an order
    for kind in ("relu", "silu", "geglu", "reglu", "bilinear"):
        assert (ablation.shazeer_p(kind) < 0.05) == ablation.shazeer_separates(kind)


def test_the_rounding_range_holds_the_printed_tables_p():
    for kind in ("relu", "silu", "geglu", "reglu"):
        low, high = ablation.shazeer_p_range(kind)
        assert low <= ablation.shazeer_p(kind) <= high


def comparison_of(differences):
    """A PairedComparison whose per-seed differences (SwiGLU − other) are ``differences``."""
    return stats.paired(differences, [0.0] * len(differences))


@pytest.mark.parametrize(("separates", "paper_gap", "ours", "reading"), [
    (True, -0.05, [-0.05, -0.04, -0.06], "agrees"),
    (True, -0.05, [0.05, 0.04, 0.06], "differs"),
    (True, -0.05, [-0.05, 0.04, 0.01], "not separated here"),
    (False, -0.002, [-0.01, 0.01, 0.0], "agrees: neither separates"),
    (False, -0.009, [-0.012, -0.010, -0.014], "ours only: his table has no order"),
])
def test_agreement_in_words(separates, paper_gap, ours, reading):
    assert ablation.agreement(separates, paper_gap, comparison_of(ours)) == reading


def test_the_stored_regime_reads_less_than_one_epoch():
    assert ablation.epochs(ablation.CONFIG, prose.make_prose_corpus()) < 1
