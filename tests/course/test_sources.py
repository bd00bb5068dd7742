"""The course's prose holds to its sources file: every quotation and citation is in
``docs/sources.toml``, and everything there is used where it says (issue: one place for every source).

The checks are shown to fire on a small course made wrong on purpose: a misquoted word, an
unknown paper, a quote nobody uses, a section list that is out of date.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prenorm_course import sources

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_course_quotes_and_cites_only_what_the_sources_file_holds():
    found = sources.problems(REPO_ROOT)
    assert not found, "\n".join(found)


def test_every_paper_is_described_once():
    papers = sources.load(REPO_ROOT).papers
    keys = [paper.key for paper in papers]
    assert len(keys) == len(set(keys)), keys
    for paper in papers:
        assert paper.cite and paper.title and paper.where and paper.names, paper.key
        for quote in paper.quotes:
            assert quote.at, f"{paper.key}: a quote without its section, table or figure: {quote.text[:40]}"


SOURCES = """
[[paper]]
key = "vaswani2017"
cite = "Vaswani et al. 2017"
title = "Attention Is All You Need"
where = "arXiv 1706.03762"
names = ["Vaswani"]
used_in = ["01 §1"]

[[paper.quote]]
text = "We suspect that for large values of d_k, the dot products grow large in magnitude"
at = "§3.2.1"
used_in = ["01 §1"]

[[phrase]]
text = "not separated"
why = "the course's verdict word"
"""

PROSE = ('# 1 · A notebook\n\nIntro.\n\n## 1. Scores\n\nVaswani et al. 2017 write "We suspect that for large values '
         'of d_k … grow large in magnitude"; here the runs are "not separated".')


def tiny_course(tmp_path: Path, prose: str = PROSE, extra: str = "") -> Path:
    (tmp_path / "notebooks").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": prose}]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "01_tiny_solutions.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "docs" / "sources.toml").write_text(SOURCES + extra)
    return tmp_path


def test_a_course_that_agrees_with_its_sources_passes(tmp_path):
    assert sources.problems(tiny_course(tmp_path)) == []


@pytest.mark.parametrize(
    ("prose", "extra", "expected"),
    [
        (PROSE.replace("We suspect", "We believe"), "", 'the quotation "We believe'),  # a misquote
        (PROSE.replace("not separated", "not quite separated"), "", 'the quotation "not quite separated"'),
        (PROSE + " Xiong et al. (2020) disagree.", "", "cites 'Xiong et al'"),
        (PROSE, '\n[[phrase]]\ntext = "never said"\nwhy = "x"\n', 'the phrase "never said" is quoted nowhere'),
        (PROSE.replace("Vaswani et al. 2017 write", "They write"), "", "vaswani2017's used_in"),
        (PROSE.replace("## 1. Scores", "## 2. Scores"), "", "used_in should list the places that quote it"),
        (PROSE.replace('"We suspect that for large values of d_k … grow large in magnitude"', "that"), "",
         "is quoted nowhere"),
    ],
    ids=["misquote", "unlisted-phrase", "unknown-paper", "unused-phrase", "paper-sections", "quote-sections",
         "unused-quote"],
)
def test_each_check_fires(tmp_path, prose, extra, expected):
    found = sources.problems(tiny_course(tmp_path, prose, extra))
    assert any(expected in line for line in found), found


def test_the_command_reports_and_fails(tmp_path, capsys):
    root = tiny_course(tmp_path, PROSE.replace("We suspect", "We believe"))
    assert sources.main(["--root", str(root)]) == 1
    assert "We believe" in capsys.readouterr().out
    assert sources.main(["--root", str(tiny_course(tmp_path / "ok"))]) == 0


def test_a_name_followed_by_another_year_is_another_paper():
    shazeer = sources.Paper("shazeer2020", "Shazeer 2020", "GLU Variants", "arXiv 2002.05202", ["Shazeer"], [])
    assert sources.cited_papers("as Shazeer (2020) found", [shazeer]) == {"shazeer2020"}
    assert sources.cited_papers("Shazeer's table", [shazeer]) == {"shazeer2020"}
    assert sources.cited_papers("multi-query attention (Shazeer 2019)", [shazeer]) == set()
