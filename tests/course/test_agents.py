"""AGENTS.md, the learner's coding assistant's guide, is generated from the exercises and stays current."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import prenorm_lib.checks
from prenorm_course import agents
from prenorm_lib.checks import catalogue

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_agents_md_is_current():
    assert (REPO_ROOT / agents.FILE).read_text() == agents.render(REPO_ROOT), (
        "AGENTS.md is stale: run `make agents`")


def test_a_changed_exercise_makes_it_stale(monkeypatch, capsys):
    """The check fires: an exercise whose task changes (as a new version of the course would) makes the
    stored AGENTS.md stale, and `--check` says so."""
    changed = dict(catalogue.EXERCISES)
    changed["1.1"] = dataclasses.replace(changed["1.1"], task="this exercise asks you to write something else")
    monkeypatch.setattr(agents, "EXERCISES", changed)
    monkeypatch.setenv("PRENORM_ROOT", str(REPO_ROOT))
    assert "Write something else." in agents.render(REPO_ROOT)
    assert agents.main(["--check"]) == 1
    assert "stale: run `make agents`" in capsys.readouterr().out


def test_it_names_every_exercise_and_the_rule():
    text = (REPO_ROOT / agents.FILE).read_text()
    assert "**Never write a solution region.**" in text and "**Point to the hint.**" in text
    for exercise_id in catalogue.EXERCISES:
        assert f"**Exercise {exercise_id} — " in text, exercise_id


def hint_catalogues() -> set[tuple[str, str]]:
    """(module, attribute) of every catalogue of typical mistakes the checkers define (a *MISTAKES attribute,
    counted in the module that defines it, not where it is imported)."""
    owners: dict[int, tuple[str, str]] = {}
    for module in sorted(pkgutil.iter_modules(prenorm_lib.checks.__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"prenorm_lib.checks.{module.name}")
        for name, value in vars(loaded).items():
            if name.endswith("MISTAKES") and isinstance(value, dict | tuple):
                owners.setdefault(id(value), (module.name, name))
    return set(owners.values())


def test_every_hint_catalogue_of_the_checkers_is_in_it(monkeypatch):
    listed = set(agents.HINT_CATALOGUES.values())
    assert hint_catalogues() - listed == set(), f"catalogues of hints not in AGENTS.md: {hint_catalogues() - listed}"
    assert listed <= hint_catalogues(), f"HINT_CATALOGUES names catalogues that do not exist: {listed}"
    import prenorm_lib.checks.ffn as ffn  # the check fires on a catalogue nobody listed

    monkeypatch.setattr(ffn, "GATE_MISTAKES", ((None, "a new hint"),), raising=False)
    assert hint_catalogues() - listed == {("ffn", "GATE_MISTAKES")}
