"""Real English prose for experiments that need headroom: the Python documentation, byte by byte.

The grammar corpus of :mod:`prenorm_lib.lab.data` is learnt to its floor within a thousand
updates: every feed-forward network ends at the same loss, so it can measure how fast a
model learns but not how much it can hold. Notebook 02 compares FFNs the way Shazeer
(2020) did, by held-out loss on natural text, and needs text a tiny model cannot exhaust.

The text is the prose of the Python 3.11 documentation as Debian packages it
(``python3.11-doc``; Sphinx ships each page's reStructuredText source as
``_sources/*.rst.txt``): the tutorial, the library and language references, the HOWTOs,
the FAQ and a few more sections, about 5 MB with markup, code examples and tables
stripped by :func:`strip_rst`, ASCII only. It ships with the library, xz-compressed, under the PSF License Agreement
(``corpora/python_docs.LICENSE``). :func:`make_prose_corpus` loads it into the same
:class:`~prenorm_lib.lab.data.Corpus` that :func:`prenorm_lib.lab.train.train` reads, one token per
byte; whole documents are held out for validation.

To rebuild the shipped file from the package (no install needed)::

    apt-get download python3.11-doc && dpkg -x python3.11-doc_*.deb deb
    python -m prenorm_lib.lab.prose build deb/usr/share/doc/python3.11/html/_sources
"""

from __future__ import annotations

import functools
import lzma
import re
import unicodedata
from pathlib import Path

import torch

from prenorm_lib import validation
from prenorm_lib.lab.data import Corpus

CORPUS_PATH = Path(__file__).resolve().parent / "corpora" / "python_docs.txt.xz"
LICENSE_PATH = CORPUS_PATH.with_name("python_docs.LICENSE")

# Sections of the documentation written as prose. Left out: the C API (mostly signatures),
# "What's New" (mostly lists of changes) and the deprecated distutils pages.
SECTIONS = (
    "distributing", "extending", "faq", "howto", "installing", "library", "reference", "tutorial", "using",
)
SINGLE_PAGES = ("glossary.rst.txt",)
DOCUMENT_SEPARATOR = "\f"  # between documents in the shipped file; never inside one
VALIDATION_EVERY = 10  # every tenth document (in path order) is held out

# Directives whose body is prose (admonitions, descriptions of an option or an object);
# every other directive (code, index entries, grammar productions, tables of contents …)
# is dropped with its body.
PROSE_DIRECTIVES = frozenset({
    "note", "warning", "seealso", "important", "tip", "hint", "caution", "attention", "admonition",
    "versionadded", "versionchanged", "deprecated", "impl-detail", "topic", "sidebar", "glossary",
    "method", "function", "class", "attribute", "data", "describe", "object", "classmethod",
    "staticmethod", "coroutinemethod", "exception", "decorator", "envvar", "cmdoption", "option",
})

_DIRECTIVE = re.compile(r"^\.\.\s+([\w:-]+)::")
_SECTION_RULE = re.compile(r"^([=\-~*^#\"'+`:._])\1{2,}$")  # heading under/overlines, simple tables
_TABLE_FRAME = re.compile(r"^\+[-=+]*\+$")  # the frame of a grid table
_BULLET = re.compile(r"^(?:[-*+]|#\.|\d+\.|\(?[a-z\d]\))\s+")
_FIELD = re.compile(r"^:[\w -]+:(?:\s|$)")  # a directive's options (":noindex:") or a field list
_ROLE = re.compile(r"(?<![\w:`]):(?:[a-z]+:)?[a-z][a-z-]*:`([^`]*)`")  # :func:`x`, :c:func:`y`
_LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")
_NAMED_REFERENCE = re.compile(r"`([^`]+)`__?")
_LITERAL = re.compile(r"``(.+?)``")
_INTERPRETED = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")
_FOOTNOTE = re.compile(r"\s*\[(?:#\w*|\d+|\*)\]_")
_SUBSTITUTION = re.compile(r"\|(\w[\w ]*)\|")
_TYPOGRAPHY = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "--",
    "\u2026": "...", "\u00a0": " ", "\u00d7": "x", "\u2192": "->",
})


def _role_text(match: re.Match) -> str:
    """The words a role shows: ``:ref:`title <target>``` → title, ``:meth:`~a.b``` → b, ``:pep:`8``` → PEP 8."""
    role = match.group(0)[1:match.group(0).index(":`")]
    text = match.group(1)
    titled = re.match(r"^(.*?)\s*<[^<>]*>$", text, flags=re.S)
    if titled and titled.group(1):
        text = titled.group(1)
    text = text.lstrip("!")
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    if role in ("pep", "rfc"):
        text = f"{role.upper()} {text}"
    return text


def _inline(text: str) -> str:
    """One paragraph's words without reStructuredText's inline markup."""
    text = _ROLE.sub(_role_text, text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _NAMED_REFERENCE.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _FOOTNOTE.sub("", text)
    text = _SUBSTITUTION.sub(lambda m: {"release": "3.11", "version": "3.11"}.get(m.group(1), m.group(1)), text)
    text = text.replace("\\ ", "").replace("\\", "")
    return " ".join(text.split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index of the first line at or after ``start`` that is not blank and indented ≤ ``indent``."""
    i = start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        i += 1
    return i


def _dedent(lines: list[str]) -> list[str]:
    depth = min((_indent(line) for line in lines if line.strip()), default=0)
    return [line[depth:] for line in lines]


def _paragraphs(lines: list[str]) -> list[str]:
    """The prose paragraphs of a block of reStructuredText lines, markup still inline."""
    paragraphs: list[str] = []
    current: list[str] = []
    item_indent = -1  # indentation of the list item the current paragraph is, or -1

    def flush():
        nonlocal item_indent
        if current:
            paragraphs.append(" ".join(current))
            current.clear()
        item_indent = -1

    i = 0
    while i < len(lines):
        line = lines[i].expandtabs(8).rstrip()
        stripped, indent = line.strip(), _indent(line)
        if not stripped:
            flush()
            i += 1
            continue
        if stripped == ".." or stripped.startswith(".. "):  # directive, comment or link target
            flush()
            end = _block_end(lines, i + 1, indent)
            directive = _DIRECTIVE.match(stripped)
            if directive and directive.group(1).split(":")[-1] in PROSE_DIRECTIVES:
                body = _dedent(lines[i + 1:end])
                while body and (not body[0].strip() or _FIELD.match(body[0].strip())):
                    body = body[1:]
                paragraphs += _paragraphs(body)
            i = end
            continue
        if _SECTION_RULE.match(stripped) or _TABLE_FRAME.match(stripped) or (
            stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1
        ):
            flush()  # a heading's rule or a table's frame: the heading itself is kept as a paragraph
            i += 1
            continue
        if not current and stripped.startswith(">>>"):  # a doctest block runs to the next blank line
            while i < len(lines) and lines[i].strip():
                i += 1
            continue
        if _BULLET.match(stripped) and (not current or indent == item_indent):  # a new list item
            flush()
            item_indent = indent
            stripped = _BULLET.sub("- ", stripped)
        if stripped.endswith("::"):  # a literal block follows: keep the sentence, drop the block
            words = stripped[:-2].rstrip()
            if words:
                current.append(words + (":" if not stripped.endswith(" ::") else ""))
            flush()
            i = _block_end(lines, i + 1, indent)
            continue
        current.append(stripped)
        i += 1
    flush()
    return paragraphs


def to_ascii(text: str) -> str:
    """Typographic quotes and dashes as ASCII, accents dropped, anything else non-ASCII removed."""
    text = unicodedata.normalize("NFKD", text.translate(_TYPOGRAPHY))
    return text.encode("ascii", "ignore").decode("ascii")


def strip_rst(source: str) -> str:
    """The prose of one reStructuredText document: one paragraph per line, no markup, no code.

    Headings stay (as paragraphs of their own), literal blocks (after ``::``), doctest
    blocks, tables and non-prose directives go, roles and inline markup leave their words
    (``:func:`len``` → len). The result is ASCII.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of reStructuredText, got {type(source).__name__}")
    paragraphs = (_inline(p) for p in _paragraphs(source.splitlines()))
    return "\n".join(to_ascii(p) for p in paragraphs if p)


def source_files(sources_dir: Path | str) -> list[Path]:
    """The ``.rst.txt`` files of :data:`SECTIONS` and :data:`SINGLE_PAGES`, in path order."""
    root = Path(sources_dir)
    if not root.is_dir():
        raise ValueError(f"sources_dir must be the documentation's _sources folder, got {str(root)!r}")
    files = [path for section in SECTIONS for path in (root / section).rglob("*.rst.txt")]
    files += [root / page for page in SINGLE_PAGES if (root / page).is_file()]
    if not files:
        raise ValueError(f"sources_dir {str(root)!r} holds none of the sections {SECTIONS}")
    return sorted(files, key=lambda path: path.relative_to(root).as_posix())


def build(sources_dir: Path | str, path: Path | str = CORPUS_PATH) -> Path:
    """Strip every source document and write them, separated by form feeds, xz-compressed."""
    documents = [strip_rst(file.read_text(encoding="utf-8")) for file in source_files(sources_dir)]
    text = DOCUMENT_SEPARATOR.join(document for document in documents if document)
    path = Path(path)
    path.write_bytes(lzma.compress(text.encode("ascii"), preset=9 | lzma.PRESET_EXTREME))
    return path


@functools.cache
def documents(path: Path | str = CORPUS_PATH) -> tuple[str, ...]:
    """The shipped documents, in path order (read once per process)."""
    text = lzma.decompress(Path(path).read_bytes()).decode("ascii")
    return tuple(text.split(DOCUMENT_SEPARATOR))


class ByteTokenizer:
    """One token per byte of the UTF-8 text: 256 ids, nothing to learn, nothing unknown.

    The shipped prose is ASCII, so a byte is a character; :meth:`decode` replaces a byte
    sequence that is not valid UTF-8 (a window may start inside a character of other text).
    """

    vocab_size = 256

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {i}")
        return bytes(ids).decode("utf-8", errors="replace")


def _ids(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).long()  # (N,)


def make_prose_corpus(validation_every: int = VALIDATION_EVERY) -> Corpus:
    """The Python documentation's prose as a byte-level :class:`~prenorm_lib.lab.data.Corpus`.

    Document ``i`` (in path order) is held out for validation when ``i % validation_every
    == validation_every - 1``: the model is scored on pages it never read, not on other
    windows of pages it did. Documents are joined by a blank line. Deterministic: the same
    split every time, on every machine.
    """
    validation.positive_int("validation_every", validation_every)
    if validation_every < 2:
        raise ValueError(f"validation_every must be >= 2 (1 would hold out every document), got {validation_every}")
    docs = documents()
    held_out = [doc for i, doc in enumerate(docs) if i % validation_every == validation_every - 1]
    kept = [doc for i, doc in enumerate(docs) if i % validation_every != validation_every - 1]
    return Corpus(
        tokenizer=ByteTokenizer(),
        train_ids=_ids("\n\n".join(kept)),
        val_ids=_ids("\n\n".join(held_out)),
        seed=None,
        unit="bytes",
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prenorm_lib.lab.prose", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="strip the documentation's sources into the shipped corpus")
    build_cmd.add_argument("sources_dir", help="the _sources folder of the extracted python3.11-doc package")
    build_cmd.add_argument("--out", default=str(CORPUS_PATH), help="where to write the .txt.xz file")
    commands.add_parser("describe", help="print the corpus's size and split")
    args = parser.parse_args(argv)
    if args.command == "build":
        path = build(args.sources_dir, args.out)
        print(f"wrote {path.name}: {path.stat().st_size:,} bytes compressed")
        return 0
    corpus = make_prose_corpus()
    print(f"{len(documents())} documents; {corpus.describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
