"""docs/measurements.md is written by the tools that measure, one section each, stamped."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from prenorm_course import measurements

REPO_ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 27, 10, 30, tzinfo=dt.UTC)


def test_a_section_is_written_with_its_stamp(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(measurements.os, "nice", lambda increment: 0)
    target = tmp_path / "docs" / "measurements.md"
    measurements.write("bench", "| a | b |\n|---|---|\n| 1 | 2 |", command="make bench", load="0.5–1.0",
                       path=target, when=WHEN)
    text = target.read_text()
    assert text.startswith(measurements.HEADER)
    assert "## Bench\n\n*Written by `make bench` on 2026-11-27 10:30 UTC · " in text
    machine = measurements.machine()
    assert f"{machine.cores} cores" in text and machine.cpu in text and "load average 0.5–1.0." in text
    assert "| 1 | 2 |" in text


def test_writing_a_section_keeps_the_others_in_their_order(tmp_path: Path):
    target = tmp_path / "measurements.md"
    measurements.write("classroom", "first classroom", command="c", path=target, when=WHEN)
    measurements.write("bench", "first bench", command="b", path=target, when=WHEN)
    measurements.write("a-new-one", "new", command="n", path=target, when=WHEN)
    measurements.write("classroom", "second classroom", command="c", path=target, when=WHEN)
    text = target.read_text()
    assert "first classroom" not in text and "second classroom" in text and "first bench" in text
    assert list(measurements.read_sections(text)) == ["bench", "classroom", "a-new-one"]
    assert [line for line in text.splitlines() if line.startswith("## ")] == ["## Bench", "## Classroom",
                                                                            "## A new one"]
    assert measurements.render(measurements.read_sections(text)) == text


def test_a_load_watch_samples_while_the_block_runs():
    with measurements.LoadWatch(every_s=0.05) as load:
        import time

        time.sleep(0.3)
    assert len(load.samples) >= 3
    assert re.fullmatch(r"\d+\.\d(–\d+\.\d)?", load.describe())
    with pytest.raises(ValueError, match="no load sampled"):
        measurements.LoadWatch().describe()


def test_bad_arguments_are_named(tmp_path: Path):
    target = tmp_path / "m.md"
    with pytest.raises(ValueError, match=r"section must be a lowercase name.*'Bench Mark'"):
        measurements.write("Bench Mark", "x", command="make bench", path=target)
    with pytest.raises(ValueError, match="command must be the command"):
        measurements.write("bench", "x", command=" ", path=target)
    with pytest.raises(ValueError, match="markdown_body must be"):
        measurements.write("bench", "", command="make bench", path=target)
    with pytest.raises(ValueError, match="must not hold the section markers"):
        measurements.write("bench", "<!-- measurements:end bench -->", command="make bench", path=target)
    assert not target.exists()


def test_the_stored_document_is_what_write_renders():
    """Nobody edited docs/measurements.md by hand around the sections: it re-renders to itself."""
    text = (REPO_ROOT / measurements.DOCUMENT).read_text()
    assert measurements.render(measurements.read_sections(text)) == text


def test_every_heading_anchor_is_its_section_name():
    """Docs link to docs/measurements.md#NAME: the heading write() gives NAME must have that anchor."""
    for name, heading in measurements.ORDER.items():
        assert heading.lower().replace(" ", "-") == name


def test_setup_measures_a_venv(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("PRENORM_ROOT", str(tmp_path))
    (tmp_path / "notebooks").mkdir()
    assert measurements.main(["setup", "--venv", str(REPO_ROOT / ".venv")]) == 0
    section = measurements.read_sections((tmp_path / measurements.DOCUMENT).read_text())["setup"]
    assert re.search(r"\| 3\.\d+\.\d+ \| 2\.\d+\.\d+\S* \| \d+\.\d GiB \|", section), section
    assert "--venv …/.venv" in section
    with pytest.raises(SystemExit):
        measurements.main(["setup", "--venv", str(tmp_path)])
    assert "--venv must be a virtual environment" in capsys.readouterr().err


def test_a_run_at_lower_priority_says_so(monkeypatch):
    monkeypatch.setattr(measurements.os, "nice", lambda increment: 10)
    assert measurements.stamp("make bench", "1.0", WHEN).endswith("load average 1.0 · at niceness 10.*")
    monkeypatch.setattr(measurements.os, "nice", lambda increment: 0)
    assert measurements.stamp("make bench", "1.0", WHEN).endswith("load average 1.0.*")
