"""The course's sources: every sentence it quotes, every paper it cites, and where.

``docs/sources.toml`` is the one place a reader checks the course against the papers. It
holds, for each paper (or the CS336 handout, or a model's reference code), how the course
cites it, where to read it, the notebook sections that cite it, and every sentence the course
quotes from it with the section, table or figure the sentence stands in. Quoted words that are
*not* taken from a source -- the course's own verdict words, a sentence of the grammar corpus,
a term -- are listed as phrases, so that nothing in quotation marks is left unexplained.

:func:`problems` compares the file with the prose people read (the solution notebooks'
Markdown, ``README.md``, ``CONTRIBUTING.md`` and ``docs/*.md``; the exercise notebooks are generated
from the solutions) and names every disagreement:

- a quotation in a notebook or the README that no quote of the file contains (a fragment between
  ``…`` counts on its own), and no phrase of the file is (the other docs quote the course's own
  messages and commands, which are not sources: their quotation marks are not read);
- a citation in the prose (``Name et al.``, ``Name & Name``, ``Name (2020)``, ``arXiv NNNN.NNNNN``)
  of a paper the file does not hold;
- a quote or phrase of the file that no prose uses;
- a paper whose listed sections are not the sections that cite it, or a quote whose listed
  sections do not hold it.

``python -m prenorm_course.sources`` prints them (and ``--sections`` the section labels the
file uses: ``"05 §4"`` is the part of notebook 05 under its heading ``## 4. …``; ``"05 intro"``
comes before the first such heading; an unnumbered heading is named by its first word, e.g.
``"05 summary"``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prenorm_course.exercises.paths import SOLUTION_GLOB

SOURCES_FILE = Path("docs") / "sources.toml"
NOTEBOOK_GLOB = f"notebooks/{SOLUTION_GLOB}"  # places are "NN §N": keyed by the number
DOC_FILES = ("README.md", "CONTRIBUTING.md")
QUOTING_DOCS = {"README.md"}  # besides the notebooks, the prose whose quotation marks are read
DOC_GLOB = "docs/*.md"
SKIPPED_DOCS = {"docs/measurements.md"}  # written by the tools that measure, never quoting a paper

# Quotation marks the prose uses: straight double quotes, or curly ones; a quotation may wrap a line,
# never a paragraph.
QUOTED = re.compile(r"\"((?:[^\"\n]|\n(?![ \t]*\n))+?)\"|“((?:[^”\n]|\n(?![ \t]*\n))+?)”")
FENCED = re.compile(r"```.*?```", re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HTML_TAG = re.compile(r"<[^>\n]+>")
ELLIPSIS = re.compile(r"\s*(?:…|\.\.\.)\s*")
HEADING = re.compile(r"^(#{1,2}) (.*)$", re.MULTILINE)
NUMBERED = re.compile(r"(\d+)\.\s")
# Citations: "Xiong et al.", "Zhang & Sennrich", "Shazeer (2020)" / "Shazeer 2020", "arXiv 2002.04745".
NAME = r"[A-Z][a-zà-ÿ]+(?:[- ][A-Z][a-zà-ÿ]+)?"
CITATIONS = (
    re.compile(rf"\b({NAME}) et al\b"),
    re.compile(rf"\b({NAME}) (?:&|and) ({NAME}) \(?(?:19|20)\d\d"),
    re.compile(rf"\b({NAME}),? \(?((?:19|20)\d\d)\)?(?![\d.])"),
    re.compile(r"\barXiv:? ?(\d{4}\.\d{4,5})"),
)


@dataclass
class Quote:
    text: str
    at: str  # the section, table or figure of the source where the sentence stands
    used_in: list[str]


@dataclass
class Paper:
    key: str
    cite: str  # how the course names it, e.g. "Xiong et al. 2020"
    title: str
    where: str  # arXiv id, URL or the document's own name
    names: list[str]  # what marks a citation of it in the prose, e.g. ["Xiong"]
    used_in: list[str]
    quotes: list[Quote] = field(default_factory=list)


@dataclass
class Phrase:
    text: str
    why: str  # why these quoted words are not a source's: "the course's verdict word", "a corpus sentence"


@dataclass
class Sources:
    papers: list[Paper]
    phrases: list[Phrase]


@dataclass
class Passage:
    place: str  # "05 §4", "README", "docs/teaching.md"
    text: str  # prose with code removed


def normalise(text: str) -> str:
    """Compare words, not typography: NFKC, one kind of quote and dash, no emphasis, one space, lower case."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("’", "'").replace("‘", "'").replace("–", "-").replace("−", "-")
    text = re.sub(r"[*_]{1,2}", "", text)  # Markdown emphasis: *x*, **x**, _x_
    return " ".join(text.split()).strip(" ,.;:").lower()


def load(root: Path) -> Sources:
    data = tomllib.loads((root / SOURCES_FILE).read_text(encoding="utf-8"))
    papers = []
    for entry in data.get("paper", []):
        quotes = [Quote(q["text"], q["at"], list(q.get("used_in", []))) for q in entry.get("quote", [])]
        papers.append(Paper(entry["key"], entry["cite"], entry["title"], entry["where"],
                            list(entry.get("names", [])), list(entry.get("used_in", [])), quotes))
    phrases = [Phrase(p["text"], p["why"]) for p in data.get("phrase", [])]
    return Sources(papers, phrases)


def _prose(markdown: str) -> str:
    return HTML_TAG.sub(" ", INLINE_CODE.sub(" ", FENCED.sub(" ", markdown)))


def _section_label(number: str, heading: str) -> str:
    numbered = NUMBERED.match(heading)
    if numbered:
        return f"{number} §{numbered.group(1)}"
    first = re.findall(r"[A-Za-z]+", heading)
    return f"{number} {first[0].lower()}" if first else f"{number} intro"


def notebook_passages(path: Path) -> Iterator[Passage]:
    """A notebook's Markdown, cut at its ``#``/``##`` headings into sections."""
    number = path.name[:2]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    place, start = f"{number} intro", 0
    for match in HEADING.finditer(markdown):
        if match.group(1) == "#":
            continue  # the title: still the intro
        yield Passage(place, _prose(markdown[start:match.start()]))
        place, start = _section_label(number, match.group(2)), match.start()
    yield Passage(place, _prose(markdown[start:]))


def passages(root: Path) -> list[Passage]:
    found = []
    for path in sorted(root.glob(NOTEBOOK_GLOB)):
        found.extend(notebook_passages(path))
    docs = [root / name for name in DOC_FILES] + sorted(root.glob(DOC_GLOB))
    for path in docs:
        relative = path.relative_to(root).as_posix()
        if path.is_file() and relative not in SKIPPED_DOCS:
            found.append(Passage(relative, _prose(path.read_text(encoding="utf-8"))))
    return found


def quotations(text: str) -> list[str]:
    """The quoted spans of ``text`` that could be a source's words: two words or more, not only math."""
    spans = []
    for match in QUOTED.finditer(text):
        span = match.group(1) or match.group(2)
        words = re.sub(r"\$[^$]*\$", " ", span).split()
        if len(words) >= 2 or (len(span.split()) >= 2 and len(words) >= 1):
            spans.append(span)
    return spans


def _quotations_read(passage: Passage) -> list[str]:
    quoting = passage.place[:2].isdigit() or passage.place in QUOTING_DOCS
    return quotations(passage.text) if quoting else []


def fragments(quotation: str) -> list[str]:
    """What must be found in the source: the quotation, or each piece between ellipses."""
    return [normalise(piece) for piece in ELLIPSIS.split(quotation) if normalise(piece)]


def cited_papers(text: str, papers: list[Paper]) -> set[str]:
    """Keys of the papers ``text`` names (by any of their names, word for word, or their arXiv id).

    A name followed by another year than the paper's names another paper of the same author
    ("Shazeer (2019)" is not Shazeer 2020), so it does not count for this one.
    """
    found = set()
    for paper in papers:
        years = re.findall(r"(?:19|20)\d\d", paper.cite)
        for mark in (m for m in (*paper.names, paper.where) if m):
            for match in re.finditer(rf"(?<![\w-]){re.escape(mark)}(?![\w-])", text):
                year = re.match(r"\s*,?\s*\(?((?:19|20)\d\d)", text[match.end():])
                if not (year and years and year.group(1) != years[-1]):
                    found.add(paper.key)
                    break
    return found


def citations(text: str) -> list[str]:
    """Citation-like names in ``text`` (``Xiong et al.``, ``Zhang & Sennrich 2019``, ``arXiv 2002.04745``)."""
    found = []
    for pattern in CITATIONS:
        found.extend(match.group(0) for match in pattern.finditer(text))
    return found


def problems(root: Path) -> list[str]:
    sources = load(root)
    found: list[str] = []
    quotes = [(paper, quote, normalise(quote.text)) for paper in sources.papers for quote in paper.quotes]
    quote_texts = [text for _, _, text in quotes]
    phrase_texts = {normalise(p.text) for p in sources.phrases}
    used_phrases: set[str] = set()
    cited_in: dict[str, set[str]] = {paper.key: set() for paper in sources.papers}
    prose = passages(root)
    for passage in prose:
        for quotation in _quotations_read(passage):
            pieces = fragments(quotation)
            if not pieces:
                continue
            if normalise(quotation) in phrase_texts:
                used_phrases.add(normalise(quotation))
                continue
            if not any(all(piece in text for piece in pieces) for text in quote_texts):
                shown = " ".join(quotation.split())
                found.append(f"{passage.place}: the quotation \"{shown}\" is in no quote of {SOURCES_FILE} "
                             "(add the source's sentence, or list the words as a phrase with why)")
        for key in cited_papers(passage.text, sources.papers):
            cited_in[key].add(passage.place)
        for citation in citations(passage.text):
            if not any(_names_paper(citation, paper) for paper in sources.papers):
                found.append(f"{passage.place}: cites {citation!r}, which no paper of {SOURCES_FILE} names")
    for paper, quote, text in quotes:
        quoted_at = {passage.place for passage in prose
                     if any(_fits(q, text) for q in _quotations_read(passage))}
        if not quoted_at:
            found.append(f"{SOURCES_FILE}: the quote of {paper.key} \"{quote.text[:70]}…\" is quoted nowhere")
        elif quoted_at != set(quote.used_in):
            missing, extra = sorted(quoted_at - set(quote.used_in)), sorted(set(quote.used_in) - quoted_at)
            found.append(f"{SOURCES_FILE}: the quote of {paper.key} \"{quote.text[:50]}…\": used_in should list "
                         "the places that quote it" + (f"; add {missing}" if missing else "")
                         + (f"; remove {extra}" if extra else ""))
    for phrase in sources.phrases:
        if normalise(phrase.text) not in used_phrases:
            found.append(f"{SOURCES_FILE}: the phrase \"{phrase.text}\" is quoted nowhere")
    notebook_place = re.compile(r"^\d\d ")
    for paper in sources.papers:
        cited = {p for p in cited_in[paper.key] if notebook_place.match(p)}
        listed = set(paper.used_in)
        if cited != listed:
            missing, extra = sorted(cited - listed), sorted(listed - cited)
            found.append(f"{SOURCES_FILE}: {paper.key}'s used_in should list the sections that cite it"
                         + (f"; add {missing}" if missing else "") + (f"; remove {extra}" if extra else ""))
    return found


def _names_paper(citation: str, paper: Paper) -> bool:
    """Whether a citation found in the prose names ``paper``: its arXiv id, or a surname of one of its names."""
    if paper.where in citation:
        return True
    surnames = {word for name in paper.names for word in re.findall(r"[A-Z][\w-]+", name)}
    return bool(surnames & set(re.findall(r"[A-Z][\w-]+", citation)))


def _fits(quotation: str, source_text: str) -> bool:
    return all(piece in source_text for piece in fragments(quotation))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.sources", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the course checkout (default: here)")
    parser.add_argument("--sections", action="store_true", help="list the section labels and the papers each cites")
    args = parser.parse_args(argv)
    if args.sections:
        sources = load(args.root)
        for passage in passages(args.root):
            keys = sorted(cited_papers(passage.text, sources.papers))
            print(f"{passage.place}: {', '.join(keys) or '-'}")
        return 0
    found = problems(args.root)
    for line in found:
        print(line)
    print(f"{len(found)} problem(s) in {SOURCES_FILE}" if found else f"{SOURCES_FILE} holds every quote and citation")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
