"""Learner text made inert wherever the grader shows it: a terminal, Markdown, CSV, plain text.

Learner text is anything a learner chose: a folder or file name, an exception's message, a
printed line, a cell's source. Shown raw it can act: a terminal escape moves the cursor and
erases the teacher's real lines, a carriage return overwrites them, a Unicode direction
override reorders what is read, Markdown makes it a remote image, a ``javascript:`` link or
raw HTML, a spreadsheet makes ``=...`` a formula. Each channel has one function here:

* ``visible`` -- every control character, direction override and invisible format character
  shown as an escape (``\\x1b``, ``\\u202e``); line breaks kept;
* ``one_line`` -- ``visible`` on one line: each line break shown as `` ⏎ `` (a terminal's progress line);
* ``markdown`` -- ``one_line``, then every character Markdown (CommonMark, GFM) could read as
  markup escaped with a backslash, and autolinks (``https://``, ``www.``, ``a@b``) broken the same way;
* ``csv_cell`` -- ``one_line``, and never a spreadsheet formula.
"""

from __future__ import annotations

import re

# C0 and C1 controls but tab and newline kinds; the bidirectional overrides and isolates; zero-width characters
_HIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x1c-\x1e\x85\u2028\u2029]")
_MARKUP = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&@:\"'=$^])")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def visible(text: object) -> str:
    """``text`` with every character that could act on a display shown as an escape instead (line breaks kept)."""
    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _HIDDEN.sub(escape, str(text).replace("\t", " "))


def one_line(text: object) -> str:
    """``visible`` on one line: each line break becomes `` ⏎ ``."""
    return _LINE_BREAKS.sub(" ⏎ ", visible(text))


def markdown(text: object) -> str:
    """``text`` as inert Markdown: one line, and every character that could start markup escaped.

    No link, image, autolink, HTML tag, entity, code span, emphasis or table bar can come from
    it: CommonMark lets a backslash escape any ASCII punctuation, and an escaped ``:`` / ``.`` /
    ``@`` breaks the ``https://``, ``www.`` and e-mail autolinks of GitHub's Markdown.
    """
    return _MARKUP.sub(r"\\\1", " ".join(one_line(text).split()))


def csv_cell(text: object) -> str:
    """``text`` for a CSV cell: one line, and never read as a spreadsheet formula."""
    text = " ".join(one_line(text).split())
    return "'" + text if text.startswith(FORMULA_START) else text
