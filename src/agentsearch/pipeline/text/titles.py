"""Titles are not sentences: a heading, a slide title, a list number or a table's header line, told from a sentence
in any script, so that an answer never quotes one nor glues one to the sentence after it.

The parsers put a blank line after every heading, title, bullet and table row (DOCX, PPTX, HTML, Markdown), so
the sentence splitter already cuts there; a PDF's text layer only ends the line. Three rules, over what a piece of
text looks like and nothing else:

- **A title line** ends the sentence at its line break (``title_line_ends``): a line of at most ``TITLE_WORDS``
  words and ``TITLE_CHARS`` characters with no end mark (``.!?`` and the marks of other scripts, ``:`` too), no
  mark that carries the sentence on (``,;(-``) and no English function word at its end, standing alone (the line
  before it is blank, ends a sentence or is a title too), followed by a line that begins as a sentence does (a
  capital or a digit, or a letter of a script without case), or any line when the title begins with a list number
  (``3. Approvals``, ``٣. الموافقات``). A wrapped line of a paragraph is longer, or ends in a mark or a function
  word, or follows a line that goes on, or its next line begins in lower case.
- **A title piece** (``is_title``) is no sentence of an answer: a piece with no end mark of at most ``TITLE_WORDS``
  words, a piece that begins with a list number and has no end mark, a table's header line (cells with no digit;
  a row with a figure is data), and any piece under ``MIN_WORDS`` words, end mark or not ("Q4 plan", "3",
  "Approvals.").
- **A list number** opening a sentence (``3. Approvals need ...``) is not part of what the answer quotes
  (``without_list_marker``).

Words are counted by ``word_count``: the space-separated tokens, plus for the scripts written without spaces one
word per two Chinese or Japanese characters and one per six Thai, Lao, Khmer or Myanmar characters (their average
word lengths), so a Chinese sentence of ten characters has six words and the Thai heading "ผลประกอบการไตรมาส 3" four.

Usage::

    is_title("3. Approvals")                                # True
    is_title("Expense reports above 2,000 euros need the director's signature.")   # False
    without_list_marker("3. Approvals need two signatures.")  # "Approvals need two signatures."
    title_line_ends("3. Approvals\\nExpense reports ...")    # [(12, 13)]: the line break after the title
"""

from __future__ import annotations

import re

# A title has at most this many words (a numbered heading "3. Approvals for travel claims" has five; a line of a
# paragraph wrapped in a narrow column has seven or more) and this many characters.
TITLE_WORDS = 5
TITLE_CHARS = 60
# A sentence of an answer has at least this many words: fewer is a label, a number or a title, whatever its mark.
MIN_WORDS = 3

# The marks that end a sentence, in the scripts the splitter knows (agentsearch.pipeline.text), and the colon that
# ends a label ("Notes:"), and the closing marks that may follow them.
_END = re.compile(r"[.!?…:。！？؟।॥][\"'”’»)\]」』）]*$")
# A line ending so goes on in the next line: it is a wrapped sentence, not a title.
_GOES_ON = re.compile(r"[,;(\-–—/&+]$")
# A list number: "3.", "3.1.", "3)", "(3)", "IV.", "a)"; in any script's digits.
# A number without its mark opens many a sentence ("50 engineers joined"): it is no list number.
_LIST_NUMBER = re.compile(r"^(?:\(\d{1,3}\)|\d{1,3}(?:\.\d{1,3})*[.)]|[IVXivx]{1,5}[.)]|[A-Za-z][)])(?=\s|$)")
# The first character of a line that begins a sentence or a heading: a capital, a digit, an opening quote.
_BEGINS = re.compile(r"^[\"'(\[«„“]?[\d\u0660-\u0669\u06f0-\u06f9\u0966-\u096f]|^[\"'(\[«„“]?[^\W\d_]")
_NO_SPACES = (re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"), 2,
              re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"), 6)
# The English words a line of running text may break after and a title does not end with.
_NO_TITLE_END = frozenset("""a an the of to in on at by for with from into over under about after before between and
    or but nor as than that which who whose is are was were be been has have had will would can could must should
    not this these those its their our your his her""".split())
_TABLE_CELLS = re.compile(r"\s\|\s")
_DIGIT = re.compile(r"\d")


def word_count(text: str) -> int:
    """The words of ``text``: its space-separated tokens, and for scripts written without spaces their characters
    at the script's average word length."""
    han, per_han, thai, per_thai = _NO_SPACES
    tokens = [t for t in text.split() if any(c.isalnum() for c in t)]
    return len(tokens) + len(han.findall(text)) // per_han + len(thai.findall(text)) // per_thai


def _has_end(text: str) -> bool:
    return bool(_END.search(text.rstrip()))


def starts_with_list_number(text: str) -> bool:
    return bool(_LIST_NUMBER.match(text.lstrip()))


def without_list_marker(text: str) -> str:
    """``text`` without the list number it begins with, if what follows is the sentence."""
    stripped = text.lstrip()
    found = _LIST_NUMBER.match(stripped)
    if not found:
        return text
    rest = stripped[found.end():].lstrip()
    return rest if rest else text


def is_title(piece: str) -> bool:
    """Whether a piece the splitter gave is a title, a label or a number rather than a sentence (the module's
    rules)."""
    text = " ".join(piece.split())
    if not text:
        return True
    count = word_count(without_list_marker(text))
    if count < MIN_WORDS:
        return True
    if _has_end(text):
        return False
    if _TABLE_CELLS.search(text):  # a table's row: its header holds no figure, a row of data does
        return not _DIGIT.search(text)
    if starts_with_list_number(text):
        return True
    return count <= TITLE_WORDS


def _title_line(line: str) -> bool:
    text = line.strip()
    if not text or len(text) > TITLE_CHARS or _has_end(text) or _GOES_ON.search(text):
        return False
    if text.split()[-1].lower() in _NO_TITLE_END:  # "... need the": a wrapped line, no title ends so
        return False
    return word_count(text) <= TITLE_WORDS


def title_line_ends(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The line breaks in ``text[start:end]`` that end a title line (the module's rules), each as the ``[start,
    end)`` of the break and the white space after it: where the splitter cuts besides its own marks."""
    end = len(text) if end is None else end
    cuts: list[tuple[int, int]] = []
    at = start
    while True:
        newline = text.find("\n", at, end)
        if newline < 0:
            return cuts
        line_start = text.rfind("\n", start, newline) + 1
        line_start = max(line_start, start)
        after = newline + 1
        while after < end and text[after].isspace():
            after += 1
        line = text[line_start:newline]
        previous_start = text.rfind("\n", start, max(line_start - 1, start)) + 1
        previous = text[max(previous_start, start):max(line_start - 1, start)] if line_start > start else ""
        following = text[after:text.find("\n", after, end) if text.find("\n", after, end) >= 0 else end]
        stands_alone = not previous.strip() or _has_end(previous) or _title_line(previous)
        if (after < end and stands_alone and _title_line(line)
                and (starts_with_list_number(line) or _begins_sentence(following))):
            cuts.append((newline, after))
        at = newline + 1


def _begins_sentence(line: str) -> bool:
    first = _BEGINS.match(line)
    if not first:
        return False
    char = line[first.end() - 1]
    return char.isdigit() or char.isupper() or not char.islower()  # a capital, a digit, or a script without case
