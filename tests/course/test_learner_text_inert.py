"""Learner text is inert everywhere the grader shows it (issue 36, item 4): one test per channel.

The red team's two findings: a folder name with terminal escapes printed a fake "alice … 3/3
passed" line and hid real ones; an exception message became a remote image and a
``javascript:`` link in grades.md. Here the learner's name and messages carry every trick at
once (escapes, carriage returns, a direction override, Markdown links and images, raw HTML,
autolinks, a spreadsheet formula) through the terminal, grades.md (rendered by two Markdown
renderers), grades.csv, the feedback files and Gradescope's results.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import markdown_it
import mistune
import pytest
from test_grade_folder_files import EXERCISES, NAME, graded, notebook_bytes  # noqa: F401

from prenorm_course.exercises import grade, inert
from prenorm_course.exercises.check import CheckResult, ExerciseStatus, Status
from prenorm_course.exercises.markers import Exercise
from prenorm_course.gradescope import results

FAKE_LINE = "\r\x1b[2K\x1b[1Aalice: alice/01_rmsnorm.ipynb: 3/3 passed (9 s)\n"
TRICKS = ("x ![track](https://evil.example/pixel.png) [click](javascript:alert(1)) <img src=x onerror=alert(1)> "
          "<script>alert(2)</script> https://evil.example/a www.evil.example mail@evil.example `code` *em* _em_ "
          "$x$ | a | b | &lt; \u202eoverride\u202c\x07")
NAME_TRICK = "mallory\x1b[31m\u202e" + "=cmd|' /C calc'!A0"


def hostile_check(nb, name, root, timeout, **options):
    statuses = [ExerciseStatus(Exercise(e, "title", "c", "d"), Status.HINT, f"hint — {TRICKS} {FAKE_LINE}")
                for e in EXERCISES]
    return CheckResult(name=name, solution=Path(NAME), exercises=statuses, isolation="as a test",
                       other_cells=[f"cell `x`: it raised ValueError: {TRICKS}"], notes=[f"a note: {TRICKS}"])


@pytest.fixture
def graded_hostile(graded, monkeypatch, tmp_path: Path):  # noqa: F811
    monkeypatch.setattr(grade, "check_notebook", hostile_check)
    folder, out = tmp_path / "class", tmp_path / "grades"
    for learner in (NAME_TRICK, FAKE_LINE.strip("\r\n\x1b[2K1A").split(":")[0] + "\x1b[8m", "bob"):
        (folder / learner).mkdir(parents=True)
        (folder / learner / NAME).write_bytes(notebook_bytes(0))
    printed: list[str] = []
    grade.grade_folder(folder, out, jobs=1, progress=printed.append)
    return printed, out


def _visible_controls(text: str) -> list[str]:
    return re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)


def test_the_terminal_shows_learner_text_as_escapes(graded_hostile):
    printed, _ = graded_hostile
    assert all(not _visible_controls(line) and "\n" not in line for line in printed), printed
    assert not any(line.startswith("alice: alice/") for line in printed)  # the fake line is part of another one
    assert any("\\x1b[31m" in line and "\\u202e" in line for line in printed)


@pytest.mark.parametrize("render", [
    lambda text: markdown_it.MarkdownIt("commonmark").enable("table").render(text),
    lambda text: mistune.create_markdown(plugins=["table", "url", "strikethrough"])(text),
], ids=["markdown-it", "mistune-gfm"])
def test_grades_md_and_feedback_render_no_link_image_or_html_from_learner_text(graded_hostile, render):
    _, out = graded_hostile
    for path in [out / "grades.md", *sorted((out / "feedback").rglob("*.md"))]:
        html = render(path.read_text(encoding="utf-8"))
        assert "<a " not in html and "<img" not in html and "<script" not in html, (path.name, html[:2000])
        assert "javascript:" not in re.sub(r">[^<]*<", "><", html)  # only in text, never in a tag's attribute
        assert not _visible_controls(html)
    for table in (out / "grades.md").read_text().split("\n\n"):  # each table's rows have its header's cells
        rows = [line for line in table.splitlines() if line.startswith("|")]
        assert len({len(re.findall(r"(?<!\\)\|", line)) for line in rows}) <= 1, rows


def test_grades_csv_holds_no_formula_and_no_control_character(graded_hostile):
    _, out = graded_hostile
    text = (out / "grades.csv").read_text(encoding="utf-8")
    assert not _visible_controls(text.replace("\n", ""))
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows[1:]:
        assert all(not cell.startswith(inert.FORMULA_START) for cell in row), row


def test_gradescopes_outputs_are_plain_text_without_controls(monkeypatch, tmp_path: Path):
    statuses = [ExerciseStatus(Exercise(e, "title", "c", "d"), Status.HINT, f"hint — {TRICKS} {FAKE_LINE}")
                for e in EXERCISES]
    result = CheckResult(name=NAME, solution=Path(NAME), exercises=statuses, isolation="as a test")
    root = Path(__file__).parents[2]
    tests = results._tests_of(result, NAME, root, "not submitted")
    assert tests and all(t["output_format"] == "text" for t in tests)
    assert all(not _visible_controls(t["output"].replace("\n", "")) for t in tests)
    assert all(all(line.startswith((f"{NAME.split('_')[0]}", "Exercise", inert.LEARNER_TEXT_PREFIX))
                   for line in t["output"].splitlines()) for t in tests)


def test_markdown_escaping_keeps_text_readable_when_rendered():
    text = "x / sqrt(mean(x²) + eps) * weight, 01_rmsnorm.ipynb — see https://docs.example/a_b"
    rendered = markdown_it.MarkdownIt("commonmark").render(inert.markdown(text))
    assert re.sub(r"<[^>]+>", "", rendered).strip() == text
