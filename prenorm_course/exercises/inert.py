"""Learner text made inert wherever the grader shows it: a terminal, Markdown, CSV, plain text.

Learner text is anything a learner chose: a folder or file name, an exception's message, a
printed line, a cell's source. Shown raw it can act: a terminal escape moves the cursor and
erases the teacher's real lines, a carriage return overwrites them, a Unicode direction
override reorders what is read, Markdown makes it a remote image, a ``javascript:`` link or
raw HTML, a spreadsheet makes ``=...`` a formula. Each channel has one function here:

* ``visible`` -- every control character, direction override and invisible format character
  shown as an escape (``\\x1b``, ``\\u202e``); line breaks kept;
* ``one_line`` -- ``visible`` on one line: each line break shown as `` ⏎ `` (a terminal's progress line);
* ``quoted`` -- ``visible``, every line after the first behind ``LEARNER_TEXT_PREFIX`` (``check``'s report);
* ``markdown`` -- ``one_line``, then every character Markdown (CommonMark, GFM) could read as
  markup inside a line escaped with a backslash, and autolinks (``https://``, ``www.``, ``a@b``)
  broken the same way;
* ``csv_cell`` -- ``one_line``, and never a spreadsheet formula.
"""

from __future__ import annotations

import re

# C0 and C1 controls but tab and newline kinds; the bidirectional overrides and isolates; zero-width characters
_HIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x1c-\x1e\x85\u2028\u2029]")
# what can start markup inside a line: emphasis, code, links and images, HTML and entities, table bars,
# strikethrough, Jupyter's $math$; and the autolinks of GitHub's Markdown (https://, www., an e-mail address)
_MARKUP = re.compile(r"([\\`*{}\[\]<>|!&~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")  # intraword _ is not emphasis
_AUTOLINK = re.compile(r"(?<=[A-Za-z])(:)(?=//)|(?<=\bwww)(\.)|(@)", re.IGNORECASE)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
LEARNER_TEXT_PREFIX = "    > "  # begins every continuation line of learner text; no report line begins so


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
    """``text`` as inert Markdown inside a line (a table cell, a list item): every character that could start
    markup there escaped.

    No link, image, autolink, HTML tag, entity, code span, emphasis, math or table bar can
    come from it: CommonMark lets a backslash escape any ASCII punctuation, and an escaped
    ``:`` (of ``://``), ``.`` (of ``www.``) or ``@`` breaks the autolinks of GitHub's Markdown.
    What only starts markup at the start of a line (a heading, a list) cannot: the caller
    never puts this text there.
    """
    escaped = _MARKUP.sub(r"\\\1", " ".join(one_line(text).split()))
    return _AUTOLINK.sub(lambda m: "\\" + m.group(), escaped)


def csv_cell(text: object) -> str:
    """``text`` for a CSV cell: one line, and never read as a spreadsheet formula."""
    text = " ".join(one_line(text).split())
    return "'" + text if text.startswith(FORMULA_START) else text


def quoted(text: object) -> str:
    """``text`` as it may stand in a report: its first line as is, every further line behind ``LEARNER_TEXT_PREFIX``.

    Learner text (an exception's message, a cell's output) reaches report lines inside
    hints and notes. A line break in it can no longer start a line that reads like the
    report's own ("Exercise 1.2: passed"), and control characters (a carriage return, a
    terminal escape that moves the cursor or erases a line) are shown as ``\\xNN``.
    """
    first, *rest = _LINE_BREAKS.split(visible(text))
    return "\n".join([first, *(LEARNER_TEXT_PREFIX + line for line in rest)])
