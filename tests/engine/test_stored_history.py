"""The request a run's step builds from the stored history (``repo.stored_history`` and
``engine.history.build_stored_request``): the same request as from the ORM's rows on both databases, each message
converted once per process and found again by its whole row, within the cache's bound."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from attachment_files import png

from server.engine.history import ConvertedMessages, build_request, build_stored_request
from server.llm import ModelInputs
from server.store import repo
from server.store.db import Database
from server.store.models import ChatSession, Message, User
from server.store.repo import StoredRow

# A number past 64 bits, which orjson would read as a float: it must come back exact.
HUGE = 123456789012345678901234567890
IMAGE = base64.b64encode(png(4, 4)).decode()


def _messages(session_id: str) -> list[dict[str, Any]]:
    """Every kind of row a request is made from, in path order (``active`` False: off the path)."""
    calls = [{"id": "c1", "name": "lookup", "arguments": '{"q": 1}'}, {"id": "c2", "name": "shot"}]
    return [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": "see these",
            "attachments": [
                {"fileId": "f1", "name": "chart.png", "mediaType": "image/png", "size": HUGE},
                {"path": "/home/a/notes.txt", "relativePath": "notes.txt"},
            ],
        },
        {"role": "user", "content": "an older version", "active": False},
        {"role": "assistant", "content": "calling", "tool_calls": calls},
        {"role": "tool", "content": "found", "tool_call_id": "c1", "is_error": True},
        {
            "role": "tool",
            "content": "a picture",
            "tool_call_id": "c2",
            "attachments": [{"name": "shot.png", "mediaType": "image/png", "data": IMAGE}],
        },
        {"role": "tool", "content": "an orphan result", "tool_call_id": None},
        {"role": "assistant", "content": "cut off mid", "status": "streaming"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "", "status": "streaming"},
    ]


async def test_the_stored_history_makes_the_request_the_orm_rows_make(migrated_db: Database) -> None:
    db = migrated_db
    async with db.write() as s:
        user = User(id=str(uuid.uuid4()), name=f"u-{uuid.uuid4().hex[:8]}")
        s.add(user)
        await s.flush()
        session = ChatSession(id=str(uuid.uuid4()), owner_id=user.id, model="gpt-4o", defaults={"temperature": 0.5})
        s.add(session)
        await s.flush()
        rows = [
            Message(id=str(uuid.uuid4()), session_id=session.id, ordinal=i + 1, **fields)
            for i, fields in enumerate(_messages(session.id))
        ]
        s.add_all(rows)
        await s.flush()
        answer = rows[-1].id  # the answer being streamed is left out
        orm = await repo.list_messages(s, session.id)
        stored = await repo.stored_history(s.plain, session.id)
        inputs = ModelInputs(images=True, documents=False)
        expected = build_request(session, orm, exclude=answer, inputs=inputs)
        cache = ConvertedMessages(10**6)
        first = build_stored_request(session, stored, exclude=answer, inputs=inputs, cache=cache)
        again = build_stored_request(session, stored, exclude=answer, inputs=inputs, cache=cache)
    assert first == expected
    assert [m.role for m in first.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "user",
    ]
    assert first.messages[1].content == "see these\n\n[Attached file: notes.txt]"
    assert first.messages[3].is_error is True and first.messages[5].attachments[0].data == png(4, 4)
    assert first.messages[6].status == "interrupted"  # the answer cut off mid-stream
    assert len(cache) == len(stored) - 2  # every row but the orphan result and the excluded answer
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))  # found again, not redone
    # The JSON columns read as the ORM reads them, the long number exact.
    assert orm[1].attachments[0]["size"] == HUGE and first.messages[1].attachments[0].file_id == "f1"


def _row(mid: str, content: str, status: str = "complete") -> StoredRow:
    return (mid, "assistant", content, "[]", None, None, status, 0)


def test_a_row_that_changed_is_converted_again() -> None:
    cache = ConvertedMessages(10**6)
    (before,) = cache.of(_row("m", "half an answ", "streaming"))
    (after,) = cache.of(_row("m", "half an answer, then the rest"))
    assert (before.content, before.status) == ("half an answ", "interrupted")
    assert (after.content, after.status) == ("half an answer, then the rest", "complete")
    assert cache.of(_row("m", "half an answ", "streaming"))[0] is before


def test_the_cache_keeps_within_its_bound_and_drops_the_least_recently_used() -> None:
    size = 512 + 1000 + 2 * 2  # an entry's overhead, its text and its attachments (twice "[]")
    cache = ConvertedMessages(3 * size)
    rows = [_row(f"m{i}", str(i) * 1000) for i in range(4)]
    first = [cache.of(row)[0] for row in rows[:3]]
    assert cache.of(rows[0])[0] is first[0]  # used again: now the most recent
    cache.of(rows[3])  # over the bound: the least recently used (m1) goes
    assert len(cache) == 3 and cache.held == 3 * size
    assert cache.of(rows[0])[0] is first[0] and cache.of(rows[2])[0] is first[2]
    again = cache.of(rows[1])[0]  # dropped: converted anew
    assert again is not first[1] and again == first[1]
    assert cache.held <= cache.budget
    # A row larger than the whole bound is converted and not kept.
    big = _row("big", "x" * 4 * size)
    assert cache.of(big)[0].content == "x" * 4 * size
    assert len(cache) == 3 and cache.held <= cache.budget


def _entry_size(text: str) -> int:
    return 512 + len(text) + 2 * 2


def test_conversations_that_do_not_all_fit_keep_those_that_do() -> None:
    """Steps read whole conversations in turn; when together they are more than the cache holds, the rows found
    again stay (plain least-recently-used would push out every row just before it is wanted: no hit at all)."""
    rows = [_row(f"m{i}", f"{i:04d}") for i in range(20)]
    cache = ConvertedMessages(10 * _entry_size("0000"))
    held: dict[str, object] = {}
    for _ in range(10):
        hits = 0
        for row in rows:
            message = cache.of(row)[0]
            hits += held.get(row[0]) is message
            held[row[0]] = message
    assert hits >= 8  # of the 10 rows the cache can hold, in the last pass over all 20
    assert cache.held <= cache.budget


def test_a_new_working_set_still_takes_the_cache_over() -> None:
    """Rows put in while the cache is full go in as the next to leave, but one in FULL_INSERT_EVERY as the most
    recent: rows nobody reads any more leave in the end, and the ones read now stay."""
    cache = ConvertedMessages(10 * _entry_size("0000"))
    for i in range(10):  # a cache full of rows nobody will read again
        cache.of(_row(f"old{i}", f"{i:04d}"))
    wanted = [_row(f"new{i}", f"{i:04d}") for i in range(8)]
    held: dict[str, object] = {}
    passes = 0
    while True:
        passes += 1
        hits = 0
        for row in wanted:
            message = cache.of(row)[0]
            hits += held.get(row[0]) is message
            held[row[0]] = message
        if hits == len(wanted):
            break
        assert passes < 500, "the rows read now never all stayed"
    assert passes > 1
