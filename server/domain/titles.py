"""Session titles as pure functions: the truncation of a first message, and the cleaning of a
title a model wrote. No I/O; ``server.services.titles`` decides when they run.

Rules, and the failure each prevents:

* Whitespace (any Unicode whitespace, newlines included) collapses to single spaces, so a pasted stack trace
  does not make a title with line breaks in a one-line session list.
* A title is cut at the last word boundary within ``TITLE_LIMIT`` code points and gets "…"; only a first word
  longer than the limit is cut inside, at the limit. Lengths count code points (Python ``str``), never bytes,
  so multibyte text is never split inside a character; the cut also backs off so that it does not separate a
  base character from its combining marks, a zero-width joiner or an emoji modifier (a broken grapheme would
  show as a stray glyph).
"""

from __future__ import annotations

import unicodedata

TITLE_LIMIT = 50
ELLIPSIS = "…"
MODEL_TITLE_WORDS = 5
# Separators left dangling at a cut ("Fix this, then that" -> "Fix this…", not "Fix this,…").
_DANGLING = ",;:-–—"
_ZWJ = "\u200d"


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def _joins_previous(ch: str) -> bool:
    """``ch`` belongs to the grapheme before it (combining mark, ZWJ, variation selector, skin tone)."""
    code = ord(ch)
    return (
        unicodedata.combining(ch) != 0
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or ch == _ZWJ
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )


def _cut_inside(word: str, limit: int) -> str:
    cut = limit
    while cut > 1 and (_joins_previous(word[cut]) or word[cut - 1] == _ZWJ):
        cut -= 1
    return word[:cut]


def truncate_title(text: str, limit: int = TITLE_LIMIT) -> str:
    """A title from free text: whitespace collapsed; at most ``limit`` code points plus "…" when cut."""
    flat = collapse_whitespace(text)
    if len(flat) <= limit:
        return flat
    boundary = flat.rfind(" ", 0, limit + 1)  # a space right after the limit still ends a whole word
    if boundary > 0:
        head = flat[:boundary]
        trimmed = head.rstrip(_DANGLING + " ")
        head = trimmed or head
    else:
        head = _cut_inside(flat, limit)
    return head + ELLIPSIS


def _strip_word(word: str) -> str:
    """Punctuation and quotes off both ends of a word; inside stays ("Node.js", "don't", "C++")."""
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end]


def clean_model_title(text: str, max_words: int = MODEL_TITLE_WORDS, limit: int = TITLE_LIMIT) -> str:
    """The title a model answered, tidied: its first non-empty line, without a "Title:" label, quotes,
    markdown emphasis or trailing punctuation, at most ``max_words`` words. Raises ``ValueError`` when
    nothing usable is left (the caller falls back to truncation)."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    label, sep, rest = line.partition(":")
    if sep and label.strip().strip("*#_ ").lower() == "title":
        line = rest
    words = [w for w in (_strip_word(w) for w in line.split()) if w]
    title = truncate_title(" ".join(words[:max_words]), limit)
    if not title:
        raise ValueError("the model's title is empty")
    return title
