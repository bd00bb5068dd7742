"""Experiment records: written with everything that made them, refused once the code's config moves on."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
from pathlib import Path

import pytest

from prenorm_lib.lab import experiments, train


@pytest.fixture
def toy(monkeypatch):
    """A registered experiment whose results are a function of its config and seed."""
    module = types.ModuleType("prenorm_lib.lab.experiments.toy")
    module.DESCRIPTION = "squares of the seed, for testing records"
    module.CONFIG = {"seeds": [0, 1, 2], "power": 2, "shape": (2, 3)}
    module.run_seed = lambda config, seed: {"value": seed ** config["power"], "curve": [seed, seed + 1]}
    monkeypatch.setitem(sys.modules, "prenorm_lib.lab.experiments.toy", module)
    monkeypatch.setattr(experiments, "available", lambda: ["toy"])
    return module


def test_run_writes_a_complete_record(toy, tmp_path):
    record = experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    stored = json.loads((tmp_path / "toy.json").read_text())
    assert stored["config"] == {"seeds": [0, 1, 2], "power": 2, "shape": [2, 3]}
    assert stored["runs"] == {"0": {"value": 0, "curve": [0, 1]}, "1": {"value": 1, "curve": [1, 2]},
                              "2": {"value": 4, "curve": [2, 3]}}
    assert set(stored["environment"]) >= {"torch", "numpy", "python", "cpu", "jobs", "threads_per_run"}
    assert stored["command"] == "make experiment NAME=toy"
    assert stored["wall_seconds"] >= 0 and stored["commit"]
    assert [seed for seed, _ in record.by_seed()] == [0, 1, 2]
    assert "make experiment NAME=toy" in record.made_how()
    assert experiments.load("toy", tmp_path).runs == stored["runs"]


def test_a_live_config_is_not_written(toy, tmp_path):
    record = experiments.run("toy", config={"seeds": [3], "power": 1, "shape": [2, 3]}, results_dir=tmp_path)
    assert record.runs == {"3": {"value": 3, "curve": [3, 4]}}
    assert not (tmp_path / "toy.json").exists()


def test_max_jobs_caps_the_processes(toy, tmp_path, monkeypatch):
    """A timing experiment sets MAX_JOBS = 1: its seeds must not run side by side, whatever --jobs says."""

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(experiments, "ProcessPoolExecutor", no_pool)
    toy.MAX_JOBS = 1
    record = experiments.run("toy", jobs=2, results_dir=tmp_path, log=lambda _: None)
    assert record.environment["jobs"] == 1
    del toy.MAX_JOBS
    with pytest.raises(AssertionError, match="pool was started"):  # without the cap, jobs=2 starts one
        experiments.run("toy", jobs=2, results_dir=tmp_path, log=lambda _: None)


def test_missing_record_names_the_command(toy, tmp_path):
    assert experiments.staleness("toy", tmp_path) == "no record toy.json yet: run `make experiment NAME=toy`"
    with pytest.raises(experiments.StaleRecordError, match="make experiment NAME=toy"):
        experiments.load("toy", tmp_path)


def test_record_goes_stale_when_the_config_changes(toy, tmp_path):
    experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    assert experiments.staleness("toy", tmp_path) is None
    toy.CONFIG = {**toy.CONFIG, "power": 3}
    problem = experiments.staleness("toy", tmp_path)
    assert problem == "toy.json was made with another configuration (differs in power): run `make experiment NAME=toy`"
    with pytest.raises(experiments.StaleRecordError, match="differs in power"):
        experiments.load("toy", tmp_path)


def test_record_missing_a_seed_is_stale(toy, tmp_path):
    experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    path = tmp_path / "toy.json"
    stored = json.loads(path.read_text())
    del stored["runs"]["2"]
    path.write_text(json.dumps(stored))
    assert "lacks seeds [2]" in experiments.staleness("toy", tmp_path)


def test_unknown_experiment_and_incomplete_module_are_named(toy, monkeypatch):
    with pytest.raises(ValueError, match=r"name must be one of the experiments \['toy'\], got 'nope'"):
        experiments.experiment("nope")
    del toy.run_seed
    with pytest.raises(TypeError, match="experiment module toy must define run_seed"):
        experiments.experiment("toy")


def test_a_full_run_stores_its_fingerprint_and_drift_finds_changed_code(toy, tmp_path):
    toy.FINGERPRINT = {"seeds": [7], "power": 1}
    record = experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    assert record.fingerprint == {"config": {"seeds": [7], "power": 1, "shape": [2, 3]},
                                  "result": {"value": 7, "curve": [7, 8]}}
    assert experiments.drift("toy", tmp_path) is None
    toy.run_seed = lambda config, seed: {"value": seed ** config["power"], "curve": [seed, seed + 2]}
    assert experiments.drift("toy", tmp_path) == (
        "toy.json was made by code that computes differently now (toy.curve[1]: 8 stored, 9 now): "
        "run `make experiment NAME=toy`")


def test_drift_tolerates_the_last_bits_of_another_cpu(toy, tmp_path):
    toy.FINGERPRINT = {"seeds": [0]}
    toy.run_seed = lambda config, seed: {"loss": 2.5123, "rounded": 4.4936, "logit": 2.81, "steps": 12}
    experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    rtol = experiments.FINGERPRINT_RTOL
    # Within the measured spread, or one unit of the stored rounding (a last bit that crossed a boundary).
    toy.run_seed = lambda config, seed: {"loss": 2.5123 * (1 + rtol / 2), "rounded": 4.4935, "logit": 2.82, "steps": 12}
    assert experiments.drift("toy", tmp_path) is None
    # Beyond the spread plus one unit of the rounding, or an integer one off: other code.
    for changed, shown in [({"rounded": 4.4926}, "toy.rounded: 4.4936 stored, 4.4926 now"),
                           ({"loss": 2.5123 * (1 + 3 * rtol)}, "toy.loss: 2.5123 stored"),
                           ({"logit": 2.79}, "toy.logit: 2.81 stored, 2.79 now"),
                           ({"steps": 11}, "toy.steps: 12 stored, 11 now")]:
        fresh = {"loss": 2.5123, "rounded": 4.4936, "logit": 2.81, "steps": 12} | changed
        toy.run_seed = lambda config, seed, fresh=fresh: fresh
        assert shown in experiments.drift("toy", tmp_path)


def test_the_last_decimal_of_a_stored_number():
    assert experiments.last_decimal(4.4936) == pytest.approx(1e-4)
    assert experiments.last_decimal(212.81) == pytest.approx(1e-2)
    assert experiments.last_decimal(3.0) == pytest.approx(0.1)
    assert experiments.last_decimal(12) == 0.0
    assert experiments.last_decimal(1e-20) == 0.0


def test_records_live_in_the_package_unless_the_setting_says_otherwise(toy, tmp_path, monkeypatch):
    monkeypatch.delenv(experiments.RESULTS_ENV, raising=False)
    assert experiments.record_path("toy") == experiments.RESULTS_DIR / "toy.json"
    assert experiments.RESULTS_DIR.parts[-4:] == ("prenorm_lib", "lab", "experiments", "results")
    monkeypatch.setenv(experiments.RESULTS_ENV, str(tmp_path / "mine"))
    experiments.run("toy", write=True, log=lambda _: None)
    assert (tmp_path / "mine" / "toy.json").is_file()
    assert experiments.load("toy").runs["2"] == {"value": 4, "curve": [2, 3]}


def test_a_live_run_stores_no_fingerprint_and_a_record_without_one_is_refused(toy, tmp_path):
    toy.FINGERPRINT = {"seeds": [0]}
    live = experiments.run("toy", config={**toy.CONFIG, "power": 5}, results_dir=tmp_path)
    assert live.fingerprint is None
    experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    toy.FINGERPRINT = {"seeds": [1]}  # the code's fingerprint changed: the stored one pins nothing
    assert experiments.drift("toy", tmp_path) == (
        "toy.json has no fingerprint for the code's FINGERPRINT: run `make experiment NAME=toy`")


def test_timing_experiments_have_no_fingerprint(toy, tmp_path):
    experiments.run("toy", write=True, results_dir=tmp_path, log=lambda _: None)
    assert experiments.read("toy", tmp_path).fingerprint is None
    assert experiments.drift("toy", tmp_path) is None


@pytest.mark.parametrize("name", experiments.available())
def test_every_stored_record_matches_its_experiment(name):
    """A stored record made with another configuration than the code's fails here."""
    assert experiments.staleness(name) is None


@pytest.mark.slow
def test_drift_still_catches_a_real_change_of_the_code(monkeypatch):
    """The tolerance is no blindfold: one warmup step more in the schedule (an off-by-one) is caught."""
    original = train.lr_at
    monkeypatch.setattr(train, "lr_at", lambda step, config: original(
        step, dataclasses.replace(config, warmup_steps=config.warmup_steps + 1)))
    problem = experiments.drift("ffn_ablation")
    assert problem is not None and "ffn_ablation.json was made by code that computes differently now" in problem


@pytest.mark.slow
@pytest.mark.parametrize("name", experiments.available())
def test_every_stored_record_was_made_by_todays_code(name):
    """The record's fingerprint run, repeated now, gives the stored numbers (a few seconds each)."""
    assert experiments.drift(name) is None


def readme_record_table() -> dict[str, str]:
    """CONTRIBUTING's table of records: name → the time it says the record took ("5.4 min")."""
    readme = (Path(experiments.__file__).parents[3] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `(\w+)` \|.*\| ([0-9.]+ min) \|$", readme, flags=re.MULTILINE))


def test_readme_lists_every_record_with_the_time_it_says_of_itself():
    """A re-made record changes its time; the README's table must follow (it once said 41 min for 5.4)."""
    table = readme_record_table()
    assert sorted(table) == experiments.available()
    for name, took in table.items():
        assert took == f"{experiments.load(name).wall_seconds / 60:.1f} min", name


def test_the_readme_table_reader_sees_a_changed_time(monkeypatch, tmp_path):
    (tmp_path / "CONTRIBUTING.md").write_text("| `ffn_ablation` | six FFNs | 02 | 41 min |\n", encoding="utf-8")
    monkeypatch.setattr(experiments, "__file__", str(tmp_path / "a" / "b" / "c" / "__init__.py"))
    assert readme_record_table() == {"ffn_ablation": "41 min"}
