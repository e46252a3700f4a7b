"""The pure title functions: truncation at word boundaries (also on multibyte text) and model-title cleaning."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.domain.titles import ELLIPSIS, TITLE_LIMIT, clean_model_title, collapse_whitespace, truncate_title
from server.services.titles import TITLE_INSTRUCTION, title_request

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("   \n\t ", ""),
        ("Hello", "Hello"),
        ("  Hello \n\n  world\t again  ", "Hello world again"),
        ("x" * 50, "x" * 50),  # exactly the limit: not cut
        # 50 characters end exactly at a word boundary: the whole words stay
        ("a" * 24 + " " + "b" * 25 + " tail", "a" * 24 + " " + "b" * 25 + ELLIPSIS),
        # never cut inside a word: back to the last space
        (
            "How do I configure the connection pool size for asyncpg in SQLAlchemy?",
            "How do I configure the connection pool size for" + ELLIPSIS,
        ),
        # a dangling separator at the cut goes
        (
            "Refactor the session service, then the queue service, then the run loop",
            "Refactor the session service, then the queue" + ELLIPSIS,
        ),
        # one word longer than the limit: cut at 50 code points
        ("x" * 80, "x" * 50 + ELLIPSIS),
        ("https://example.com/" + "a" * 60 + " and more", ("https://example.com/" + "a" * 60)[:50] + ELLIPSIS),
    ],
)
def test_truncate_examples(text: str, expected: str) -> None:
    assert truncate_title(text) == expected


def test_truncate_multibyte_words() -> None:
    text = "Überprüfe die Größenänderung der Datenbankverbindungen während des Betriebs"
    out = truncate_title(text)
    assert out == "Überprüfe die Größenänderung der" + ELLIPSIS
    assert len(out.encode()) > len(out)  # multibyte, counted in code points


def test_truncate_cjk_without_spaces_cuts_at_code_points() -> None:
    text = "如何在异步程序中使用数据库连接池并且正确处理事务和错误以及超时重试还有日志记录和监控指标等问题呢请详细说明"
    assert len(text) > 50
    assert truncate_title(text) == text[:50] + ELLIPSIS


def test_truncate_emoji_and_combining_marks_are_not_split() -> None:
    family = "👨\u200d👩\u200d👧"  # one grapheme, five code points
    text = "a" * 48 + family + "b" * 5
    out = truncate_title(text)
    assert out == "a" * 48 + ELLIPSIS  # the joined emoji is not cut in half
    accented = "e" * 49 + "e\u0301" + "x" * 5  # é as e + combining acute at positions 49-50
    assert truncate_title(accented) == "e" * 49 + ELLIPSIS
    astral = "𝔘" * 60  # astral-plane letters: 4 bytes in UTF-8, one code point each
    assert truncate_title(astral) == "𝔘" * 50 + ELLIPSIS


words = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=120)


@settings(max_examples=300, deadline=None)
@given(words)
def test_truncate_properties(text: str) -> None:
    flat = collapse_whitespace(text)
    out = truncate_title(text)
    assert out == collapse_whitespace(out)  # no runs of whitespace, no leading/trailing whitespace
    if len(flat) <= TITLE_LIMIT:
        assert out == flat
        return
    assert out.endswith(ELLIPSIS)
    head = out[:-1]
    assert 0 < len(head) <= TITLE_LIMIT
    assert flat.startswith(head)
    first_word = flat.split(" ")[0]
    if len(first_word) <= TITLE_LIMIT:
        # cut at a word boundary: after the head come only dropped separators, then a space
        assert flat[len(head) :].lstrip(",;:-–—").startswith(" ")
    else:
        # cut inside the first word, never between a character and the marks or joiners that belong to it
        assert " " not in head
        nxt = flat[len(head)]
        if len(head) > 1:
            assert unicodedata.combining(nxt) == 0 and nxt != "\u200d" and head[-1] != "\u200d"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Asyncio Event Loop Basics", "Asyncio Event Loop Basics"),
        ('"Asyncio Event Loop Basics."', "Asyncio Event Loop Basics"),
        ("Title: **Connection Pool Tuning**", "Connection Pool Tuning"),
        ("\n\n  «Größe der Pools»  \nbecause you asked", "Größe der Pools"),
        ("one two three four five six seven", "one two three four five"),
        ("Node.js and C++ don't mix!", "Node.js and C++ don't mix"),
    ],
)
def test_clean_model_title(raw: str, expected: str) -> None:
    assert clean_model_title(raw) == expected


@pytest.mark.parametrize("raw", ["", "   \n ", '"…"', "Title:", "!!! ???"])
def test_clean_model_title_rejects_nothing_usable(raw: str) -> None:
    with pytest.raises(ValueError):
        clean_model_title(raw)


def test_title_request_puts_the_instruction_in_system_text_and_the_exchange_in_the_user_turn() -> None:
    req = title_request("gpt-x", "How do pools work?", "They keep connections open.")
    assert req.options.system_prompt == TITLE_INSTRUCTION and req.options.model == "gpt-x"
    assert [m.role for m in req.messages] == ["user"]
    assert req.messages[0].content == "How do pools work?\n\n---\nThey keep connections open."
    assert req.tools == ()
    long = title_request("m", "q" * 10_000, "a" * 10_000).messages[0].content
    assert len(long) < 4100
