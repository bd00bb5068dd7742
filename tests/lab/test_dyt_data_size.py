"""Notebook 01's deep dive: DyT and Derf against RMSNorm at three sizes of training text (dyt_tuning, dyt_data_size).

The settings the record trains are the tuning record's choice; a small training set is
evenly spaced chunks of the full one; the S-curve samples are what RMSNorm computes; the
verdict reads the record's paired seeds.
"""

from __future__ import annotations

import math
from pathlib import Path

import nbformat
import pytest
import torch

from prenorm_lib import functional
from prenorm_lib.lab import experiments, prose
from prenorm_lib.lab.experiments import dyt_data_size, dyt_tuning


@pytest.fixture(scope="module")
def corpus():
    return prose.make_prose_corpus()


def test_the_record_trains_the_settings_the_tuning_record_chose():
    """dyt_data_size's table of settings is dyt_tuning's choice (lowest mean final loss on its held-out seed)."""
    assert dyt_data_size.CONFIG["selected"] == dyt_tuning.chosen(experiments.load("dyt_tuning"))
    assert not set(dyt_tuning.CONFIG["seeds"]) & set(dyt_data_size.CONFIG["seeds"])  # tuned on other seeds
    for name in ("model", "sizes", "steps", "warmup_steps", "batch_size", "eval_every", "eval_batches"):
        assert dyt_tuning.CONFIG[name] == dyt_data_size.CONFIG[name], name


def test_the_tuning_grid_tunes_alpha0_only_where_there_is_one():
    config = dyt_tuning.CONFIG
    assert dyt_tuning.settings(config, "rmsnorm") == [{"lr": lr} for lr in config["grids"]["rmsnorm"]["lrs"]]
    grid = config["grids"]["dyt"]
    assert len(dyt_tuning.settings(config, "dyt")) == len(grid["lrs"]) * len(grid["alpha0s"])
    assert {"lr": 1e-2, "alpha0": 0.25} in dyt_tuning.settings(config, "derf")


def test_every_chosen_setting_lies_inside_its_grid_or_is_declared_not_to():
    """A choice at the grid's edge says the grid was too small to tune that variant: allowed only where
    dyt_tuning.UNBRACKETED declares it (and then it must be at the edge, and notebook 01 must say so)."""
    config = dyt_tuning.CONFIG
    at_edge = set()
    for size, by_kind in dyt_tuning.chosen(experiments.load("dyt_tuning")).items():
        for kind, setting in by_kind.items():
            grid = config["grids"][kind]
            for name, values in (("lr", grid["lrs"]), ("alpha0", grid.get("alpha0s"))):
                if values and not values[0] < setting[name] < values[-1]:
                    at_edge.add((size, kind, name))
    assert at_edge == set(dyt_tuning.UNBRACKETED)
    text = " ".join(" ".join(cell.source.split()) for cell in nbformat.read(
        Path(__file__).parents[2] / "notebooks" / "01_rmsnorm_solutions.ipynb", as_version=4).cells
        if cell.cell_type == "markdown")
    assert "lowest α₀ tried" in text and "under-tuned" in text


def test_a_small_training_set_is_evenly_spaced_chunks_of_the_full_one(corpus):
    small = dyt_data_size.training_subset(corpus, 16_384)
    assert small.train_ids.numel() == 16_384 and torch.equal(small.val_ids, corpus.val_ids)
    chunk = dyt_data_size.CHUNK
    stride = (corpus.train_ids.numel() - chunk) // 15
    for i in (0, 7, 15):
        assert torch.equal(small.train_ids[i * chunk:(i + 1) * chunk], corpus.train_ids[i * stride:i * stride + chunk])
    assert dyt_data_size.training_subset(corpus, None) is corpus
    with pytest.raises(ValueError, match=r"n_bytes must be a multiple of 1024, .* got 1000"):
        dyt_data_size.training_subset(corpus, 1000)


def test_the_s_curve_samples_are_rmsnorms_own_input_and_output(corpus):
    record = experiments.load("dyt_data_size")
    stored = record.runs[str(record.config["seeds"][0])]["all|rmsnorm"]["s_curves"]
    assert set(stored) == {"layers.0.ln1", "layers.0.ln2", "layers.1.ln1", "layers.1.ln2", "ln_final"}
    model = dyt_data_size.train.build_model(corpus, 0, **dyt_data_size.MODEL)  # untrained: block 0's ln1 reads
    windows = dyt_data_size.probe_windows(corpus, record.config)  # the embeddings themselves
    curves = dyt_data_size.s_curves(model, windows)
    emb = model.token_embeddings(windows).detach()  # (W, T, d)
    normalised = functional.rms_norm(emb, torch.ones(emb.shape[-1]))
    pairs = {(round(a, 3), round(b, 3)) for a, b in zip(emb.flatten().tolist(), normalised.flatten().tolist(),
                                                         strict=True)}
    sample = list(zip(curves["layers.0.ln1"]["x"], curves["layers.0.ln1"]["y"], strict=True))
    assert len(sample) == dyt_data_size.S_CURVE_POINTS + dyt_data_size.S_CURVE_EXTREMES
    assert all(pair in pairs for pair in sample)
    assert max(abs(x) for x, _ in sample) == pytest.approx(emb.abs().max().item(), abs=1e-3)  # the extremes are in


def test_the_verdicts_read_the_paired_seeds():
    record = experiments.load("dyt_data_size")
    for size in dyt_data_size.sizes(record):
        finals = dyt_data_size.final_losses(record, size)
        assert set(finals) == {"rmsnorm", "dyt", "derf"}
        comparison = dyt_data_size.against(record, size, "dyt")
        assert comparison.n == len(record.config["seeds"])
        expected = [a - b for a, b in zip(finals["dyt"], finals["rmsnorm"], strict=True)]
        assert comparison.differences == pytest.approx(expected)
        assert math.isfinite(comparison.mean)


def test_the_regimes_span_little_to_plenty_of_data(corpus):
    record = experiments.load("dyt_data_size")
    per_parameter = [dyt_data_size.bytes_per_parameter(record, size, corpus.train_ids.numel())
                     for size in dyt_data_size.sizes(record)]
    assert per_parameter[0] < 0.2 and per_parameter[-1] > 30
    assert dyt_data_size.epochs(record, "16Ki", corpus.train_ids.numel()) > 10  # 500 × 16 × 32 / 16 Ki: read ~16 times
    assert dyt_data_size.epochs(record, "all", corpus.train_ids.numel()) < 1


def test_the_gap_change_pairs_each_seeds_two_gaps():
    record = experiments.load("dyt_data_size")
    for kind in ("dyt", "derf"):
        change = dyt_data_size.gap_change(record, kind, "16Ki")
        small, large = dyt_data_size.final_losses(record, "16Ki"), dyt_data_size.final_losses(record, "all")
        expected = [(k16 - r16) - (kall - rall) for k16, r16, kall, rall in
                    zip(small[kind], small["rmsnorm"], large[kind], large["rmsnorm"], strict=True)]
        assert change.differences == pytest.approx(expected)


def test_best_by_alpha0_is_the_best_learning_rate_at_each_alpha0():
    tuning = experiments.load("dyt_tuning")
    for size in dyt_tuning.CONFIG["sizes"]:
        for kind in ("dyt", "derf"):
            best = dyt_tuning.best_by_alpha0(tuning, size, kind)
            assert list(best) == dyt_tuning.CONFIG["grids"][kind]["alpha0s"]
            for alpha0, loss in best.items():
                assert loss == min(dyt_tuning.mean_final(tuning, size, kind, {"lr": lr, "alpha0": alpha0})
                                   for lr in dyt_tuning.CONFIG["grids"][kind]["lrs"])
            chosen = dyt_tuning.chosen(tuning)[size][kind]
            assert min(best.values()) == dyt_tuning.mean_final(tuning, size, kind, chosen)


def test_the_notebooks_verdict_numbers_are_the_records():
    """01 §11's prose quotes the record's paired gaps; a remade record must be read again."""
    import json
    from pathlib import Path

    from prenorm_lib.lab import tables

    notebook = next((Path(__file__).resolve().parents[2] / "notebooks").glob("01_*.ipynb"))
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    prose = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    record = experiments.load("dyt_data_size")
    for kind in ("dyt", "derf"):
        assert tables.interval(dyt_data_size.against(record, "16Ki", kind)) in prose
    assert f"by {-dyt_data_size.gap_change(record, 'dyt', '16Ki').mean:.2f}" in prose
