"""The request a run's step builds from the stored history (``repo.stored_history`` and
``engine.history.build_stored_request``): the same request as from the ORM's rows on both databases, each message
converted once and found again by the session's next step, within the cache's bound."""

from __future__ import annotations

import base64
import gc
import tracemalloc
import uuid
from typing import Any

import pytest
from attachment_files import png
from engine_helpers import FAST, idle
from loop_turns import LoopTurns

from server.engine.history import (
    CONVERT_SLICE,
    ENTRY_OVERHEAD,
    Conversations,
    build_request,
    build_stored_request,
)
from server.llm import ModelInputs
from server.llm.convert.history import normalize
from server.settings import Settings
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
        cache = Conversations(10**6)
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
    assert len(cache) == 1
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))  # found again, not redone
    # The JSON columns read as the ORM reads them, the long number exact.
    assert orm[1].attachments[0]["size"] == HUGE and first.messages[1].attachments[0].file_id == "f1"


def _row(mid: str, content: str, status: str = "complete", role: str = "assistant") -> StoredRow:
    return (mid, role, content, "[]", None, None, status, 0)


def _size(text: str) -> int:
    return ENTRY_OVERHEAD + len(text) + 2 * 2  # an entry's overhead, its text and its attachments (twice "[]")


def _chat(n: int, prefix: str = "m") -> list[StoredRow]:
    return [_row(f"{prefix}{i}", f"text {i}", role="user" if i % 2 == 0 else "assistant") for i in range(n)]


async def test_a_long_path_is_read_whole_in_pages(migrated_db: Database) -> None:
    """The active path of a chat longer than a page, with messages off it between, comes back whole and in order,
    a page at a time."""
    db = migrated_db
    n = 2 * repo.STORED_PAGE + 7
    async with db.write() as s:
        user = User(id=str(uuid.uuid4()), name=f"u-{uuid.uuid4().hex[:8]}")
        s.add(user)
        await s.flush()
        session = ChatSession(id=str(uuid.uuid4()), owner_id=user.id)
        s.add(session)
        await s.flush()
        await s.execute(
            Message.__table__.insert(),
            [
                {
                    "id": str(uuid.uuid4()),
                    "session_id": session.id,
                    "ordinal": i + 1,
                    "role": "user",
                    "content": f"m{i}",
                    "attachments": [],
                    "active": i % 3 != 1,  # every third one an older version, off the path
                }
                for i in range(n)
            ],
        )
        async with LoopTurns() as turns:
            stored = await repo.stored_history(s.plain, session.id)
        orm = await repo.list_messages(s, session.id)
    assert turns.count >= len(stored) // repo.STORED_PAGE  # other work runs between pages (SQLite reads on the loop)
    assert len(stored) > repo.STORED_PAGE * 1.3
    assert [r[0] for r in stored] == [m.id for m in orm]
    assert [r[2] for r in stored] == [f"m{i}" for i in range(n) if i % 3 != 1]


async def test_converting_a_long_conversation_lets_other_work_run() -> None:
    """A step makes its messages outside its transaction, a slice of rows at a time: another session's work runs
    between two slices, and the messages are those made in one go (kept for the next step the same way)."""
    rows = _chat(5 * CONVERT_SLICE + 3)
    last = rows[-1][0]  # the answer being written
    cache = Conversations(10**9)
    async with LoopTurns() as turns:
        shared = await cache.messages_sharing_loop("s", rows, exclude=last)
    assert turns.count >= 5  # a turn of the loop after every slice, not one stretch for the whole chat
    assert shared == Conversations(10**9).messages("s", rows, exclude=last)
    assert len(cache) == 1
    again = await cache.messages_sharing_loop("s", rows, exclude=last)
    assert all(a is b for a, b in zip(shared, again, strict=True))  # the next step finds them all


def test_a_step_converts_only_the_rows_the_last_step_did_not_read() -> None:
    cache = Conversations(10**6)
    rows = [*_chat(6), _row("a", "", "streaming")]
    first = cache.messages("s", rows, exclude="a")
    assert [m.content for m in first] == [f"text {i}" for i in range(6)]  # the answer being written left out
    # The answer was written, a question and a new answer came: the six rows before are found, the rest converted.
    rows = [*_chat(6), _row("a", "the answer"), _row("q", "and then?", role="user"), _row("b", "", "streaming")]
    second = cache.messages("s", [tuple(r) for r in rows], exclude="b")  # rows read anew: equal, not the same
    assert all(a is b for a, b in zip(first, second[:6], strict=True))
    assert [(m.content, m.status) for m in second[6:]] == [("the answer", "complete"), ("and then?", "complete")]
    # A continued answer is the path's last row, not left out (exclude None): it is there as it stands.
    third = cache.messages("s", [*rows[:-1], _row("b", "half", "streaming")])
    assert all(a is b for a, b in zip(second, third[:8], strict=True))
    assert (third[-1].content, third[-1].status) == ("half", "interrupted")


def test_an_edit_or_a_branch_switch_converts_from_where_the_paths_part() -> None:
    cache = Conversations(10**6)
    rows = _chat(10)
    first = cache.messages("s", rows)
    edited = [*rows[:4], _row("m4b", "text 4, edited", role="user"), _row("m5b", "another answer")]
    second = cache.messages("s", edited)
    assert all(a is b for a, b in zip(first[:4], second[:4], strict=True))
    assert [m.content for m in second[4:]] == ["text 4, edited", "another answer"]
    # A row changed in the middle of the path (a status, any column): converted again, and everything after it.
    changed = [*rows[:3], _row("m3", "text 3", "streaming"), *rows[4:]]
    third = cache.messages("s", changed)
    assert third[3].status == "interrupted" and third[:3] == first[:3] and third[4:] == first[4:]
    assert all(a is b for a, b in zip(first[:3], third[:3], strict=True))
    # Back to the first path: equal to a conversion of every row.
    assert cache.messages("s", rows) == Conversations(0).messages("s", rows) == first


def test_a_row_left_out_in_the_middle_is_neither_sent_nor_kept() -> None:
    cache = Conversations(10**6)
    rows = _chat(6)
    left_out = cache.messages("s", rows, exclude="m2")
    assert [m.content for m in left_out] == ["text 0", "text 1", "text 3", "text 4", "text 5"]
    # Read again with nothing left out: the rows before it are found, the rest converted.
    again = cache.messages("s", rows)
    assert [m.content for m in again] == [f"text {i}" for i in range(6)]
    assert all(a is b for a, b in zip(left_out[:2], again[:2], strict=True)) and again[3] is not left_out[2]


def test_a_tool_result_without_its_call_id_is_left_out() -> None:
    orphan: StoredRow = ("t", "tool", "lost", "[]", None, None, "complete", 0)
    assert [m.content for m in Conversations(10**6).messages("s", [*_chat(2), orphan, *_chat(1, "n")])] == [
        "text 0",
        "text 1",
        "text 0",
    ]


def test_the_cache_keeps_within_its_bound_and_drops_the_least_recently_used() -> None:
    size = 2 * _size("x" * 1000)  # a conversation of two rows
    cache = Conversations(3 * size)
    chats = {f"s{i}": [_row(f"s{i}-q", "x" * 1000, role="user"), _row(f"s{i}-a", "x" * 1000)] for i in range(4)}
    first = {sid: cache.messages(sid, rows)[0] for sid, rows in list(chats.items())[:3]}
    assert cache.messages("s0", chats["s0"])[0] is first["s0"]  # found again: now the most recent
    # Not held while the cache is full: converted, and not kept.
    assert cache.messages("s3", chats["s3"])[0].content == "x" * 1000
    assert len(cache) == 3 and cache.held == 3 * size and "s3" not in cache._entries
    # A conversation held that grows stays: the least recently used (s2; s1 is now the most recent) goes.
    grown = cache.messages("s1", [*chats["s1"], _row("s1-q2", "y", role="user")])
    assert grown[0] is first["s1"] and set(cache._entries) == {"s0", "s1"} and cache.held <= cache.budget
    again = cache.messages("s2", chats["s2"])[0]  # dropped: converted anew
    assert again is not first["s2"] and again == first["s2"]
    # A conversation larger than the whole bound is converted and not kept.
    big = [_row("big", "x" * 4 * size)]
    assert cache.messages("big", big)[0].content == "x" * 4 * size
    assert "big" not in cache._entries and cache.held <= cache.budget


def test_conversations_that_do_not_all_fit_keep_those_that_do() -> None:
    """Steps read whole conversations in turn; when together they are more than the cache holds, the
    conversations found again stay (plain least-recently-used would push out each one just before it is wanted:
    no hit at all)."""
    chats = {f"s{i}": [_row(f"s{i}", f"{i:04d}")] for i in range(20)}
    cache = Conversations(10 * _size("0000"))
    held: dict[str, object] = {}
    for _ in range(10):
        hits = 0
        for sid, rows in chats.items():
            message = cache.messages(sid, rows)[0]
            hits += held.get(sid) is message
            held[sid] = message
    assert hits >= 8  # of the 10 conversations the cache can hold, in the last pass over all 20
    assert cache.held <= cache.budget


def test_a_new_working_set_still_takes_the_cache_over() -> None:
    """Conversations put in while the cache is full go in as the next to leave, but one in FULL_INSERT_EVERY as
    the most recent: conversations nobody reads any more leave in the end, and the ones read now stay."""
    cache = Conversations(10 * _size("0000"))
    for i in range(10):  # a cache full of conversations nobody will read again
        cache.messages(f"old{i}", [_row(f"old{i}", f"{i:04d}")])
    wanted = {f"new{i}": [_row(f"new{i}", f"{i:04d}")] for i in range(8)}
    held: dict[str, object] = {}
    passes = 0
    while True:
        passes += 1
        hits = 0
        for sid, rows in wanted.items():
            message = cache.messages(sid, rows)[0]
            hits += held.get(sid) is message
            held[sid] = message
        if hits == len(wanted):
            break
        assert passes < 500, "the conversations read now never all stayed"
    assert passes > 1


def _fresh(*parts: str) -> str:
    """A new string object, as each row SQLite returns holds its own (no interned or shared literal)."""
    return "".join(parts)


def test_the_bound_counts_at_least_the_memory_a_conversation_holds() -> None:
    """``budget`` bounds the process's memory: what a kept conversation holds (the rows read, their messages,
    the normalization a provider resumes from) is no more than what it counts for, for short and long rows."""
    for text_length in (0, 10, 2000):
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            cache = Conversations(10**12)
            for chat in range(10):
                rows = [
                    (
                        str(uuid.uuid4()),
                        _fresh("us", "er") if i % 2 == 0 else _fresh("assis", "tant"),
                        _fresh("x" * text_length, ""),
                        _fresh("[", "]"),
                        None,
                        None,
                        _fresh("comp", "lete"),
                        0,
                    )
                    for i in range(200)
                ]
                normalize(cache.messages(f"s{chat}", rows))  # as every adapter does with the request's messages
                del rows
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert len(cache) == 10
        assert held <= cache.held, (text_length, held / 2000, cache.held / 2000)  # bytes a row: real, counted
        assert cache.held <= 2 * held  # and not so far over that the cache holds a fraction of what it could


@pytest.mark.parametrize("budget", [0, None], ids=["none kept", "the default"])
async def test_a_server_keeps_the_conversations_its_setting_allows(
    server_factory: Any, sqlite_url: str, budget: int | None
) -> None:
    """``CHATSYNC_CONVERSATION_CACHE_BYTES`` bounds the server's conversations: 0 keeps none (every step converts
    its whole conversation), the default keeps the one just answered."""
    overrides = {} if budget is None else {"conversation_cache_bytes": budget}
    live = await server_factory(sqlite_url, **FAST, **overrides)
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hello there"})
        snap = await idle(c, s["id"])
    assert [m["status"] for m in snap["messages"]] == ["complete", "complete"]
    cache = live.services.orchestrator.run_context.conversations
    if budget == 0:
        assert (cache.budget, len(cache), cache.held) == (0, 0, 0)
    else:
        assert cache.budget == Settings.model_fields["conversation_cache_bytes"].default == 64 * 1024 * 1024
        assert len(cache) == 1 and cache.held > 0
