"""A session out and back in: ``GET /sessions/{id}/export`` (JSON and Markdown) and ``POST /sessions/import``
over real HTTP, on SQLite and PostgreSQL. An import is the same transcript in a new session of the importer's,
applied once per ``Idempotency-Key``; what is refused changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from engine_helpers import FAST, Stream

CODE_ANSWER = "Here is **some** code:\n\n```python\nprint('hi')\n```\n\nand `inline` too"
CALCULATOR = {"name": "calculator", "description": "arithmetic", "executor": "server"}


@pytest.fixture
async def tx(db_url: str, server_factory: Callable[..., Any]) -> Any:
    return await server_factory(db_url, users=("alice", "bob"), max_import_bytes=64 * 1024, **FAST)


def http(live: Any, user: str | None = "alice") -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {live.tokens[user]}"} if user else {}
    return httpx.AsyncClient(base_url=live.url, headers=headers, timeout=30)


async def run_to_end(c: Any, session_id: str, text: str, attachments: list[Any] | None = None) -> None:
    sub = await c.subscribe("session.events", {"sessionId": session_id})
    await sub.wait_started()  # from now: the send must come after the subscription started
    st = Stream(sub)
    inp: dict[str, Any] = {"sessionId": session_id, "content": text}
    if attachments:
        inp["attachments"] = attachments
    sent = await c.mutation("message.send", inp)
    await st.until(lambda e: e["type"] == "run-finished" and e["runId"] == sent["runId"], timeout=30)
    await st.sub.close()


def transcript(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a reader of the chat sees of each message (ids and times aside)."""
    return [
        (
            m["role"],
            m["content"],
            [(c["name"], c["arguments"]) for c in m.get("toolCalls") or []],
            m.get("toolCallId"),
            m["status"],
            [a.get("name") for a in m.get("attachments") or []],
            m.get("finishReason"),
        )
        for m in messages
    ]


async def a_chat(live: Any) -> tuple[str, str]:
    """Alice's session with a code answer, a tool call and its result, and an uploaded file; and the file id."""
    async with http(live) as h:
        reply = await h.post("/files", files={"file": ("notes.txt", b"remember the milk")})
        assert reply.status_code == 200, reply.text
        file_id = reply.json()["id"]
    async with live.client("alice") as c:
        s = await c.mutation(
            "session.create", {"title": "Code & tools", "systemPrompt": "Be brief.", "tools": [CALCULATOR]}
        )
        await run_to_end(c, s["id"], CODE_ANSWER)
        await run_to_end(c, s["id"], 'add these\n/tool calculator {"expression": "6*7"}')
        await run_to_end(c, s["id"], "what is in the file?", [{"fileId": file_id}])
    return s["id"], file_id


async def test_export_then_import_gives_the_same_transcript_once(tx):
    sid, file_id = await a_chat(tx)
    async with http(tx) as h, tx.client("alice") as c, tx.client("alice") as phone:
        reply = await h.get(f"/sessions/{sid}/export")
        assert reply.status_code == 200, reply.text
        assert reply.headers["content-type"].startswith("application/json")
        assert reply.headers["cache-control"] == "no-store"
        assert reply.headers["content-disposition"] == 'attachment; filename="Code-tools.json"'
        export = reply.json()
        assert export["format"] == "chatsync.session" and export["version"] == 1
        assert export["session"]["title"] == "Code & tools" and export["session"]["systemPrompt"] == "Be brief."
        original = (await c.query("session.get", {"sessionId": sid}))["messages"]
        assert transcript(export["messages"]) == transcript(original)
        assert any(m["role"] == "tool" for m in original) and any(m.get("attachments") for m in original)

        listed = await phone.query("session.list", {})
        feed = Stream(await phone.subscribe("session.feed", {"lastEventId": listed["feedEventId"]}))
        body = reply.content
        key = {"idempotency-key": "import-1", "content-type": "application/json"}
        first = await h.post("/sessions/import", content=body, headers=key)
        assert first.status_code == 200, first.text
        imported = first.json()
        assert imported["id"] != sid and imported["title"] == "Code & tools"
        assert imported["systemPrompt"] == "Be brief." and [t["name"] for t in imported["tools"]] == ["calculator"]
        again = await h.post("/sessions/import", content=body, headers=key)  # a retry after a lost reply
        assert again.status_code == 200 and again.json()["id"] == imported["id"]
        e = await feed.until(lambda e: e["type"] == "session-created")
        assert e["session"]["id"] == imported["id"] and e["session"]["title"] == "Code & tools"
        assert sorted(await session_ids(c)) == sorted([sid, imported["id"]])  # one import, not two

        copy = (await c.query("session.get", {"sessionId": imported["id"]}))["messages"]
        assert transcript(copy) == transcript(original)
        assert {m["id"] for m in copy}.isdisjoint({m["id"] for m in original})
        assert [m["createdAt"] for m in copy] == [m["createdAt"] for m in original]
        file = next(a for m in copy for a in m.get("attachments") or [])
        assert file["fileId"] == file_id  # alice's own file: carried over, and still hers to read
        assert (await h.get(f"/files/{file_id}")).content == b"remember the milk"

        # the imported chat goes on: the model is given its whole history, tool call and result included
        await run_to_end(c, imported["id"], "and now?")
        after = (await c.query("session.get", {"sessionId": imported["id"]}))["messages"]
        assert [m["content"] for m in after[-2:]] == ["and now?", "and now?"]

        # the same id for another body is a conflict, and imports nothing
        other = await h.post("/sessions/import", content=body.replace(b"Be brief.", b"Be long."), headers=key)
        assert other.status_code == 409 and other.json()["error"]["code"] == "CONFLICT"
        assert len(await session_ids(c)) == 2
        await feed.sub.close()


async def session_ids(c: Any) -> list[str]:
    return [s["id"] for s in (await c.query("session.list", {"archived": None, "limit": 200}))["items"]]


async def test_someone_elses_files_stay_behind_and_markdown_reads_as_the_chat(tx):
    sid, _file_id = await a_chat(tx)
    async with http(tx) as alice, http(tx, "bob") as bob, tx.client("bob") as c:
        export = (await alice.get(f"/sessions/{sid}/export")).content
        reply = await bob.post("/sessions/import", content=export)
        assert reply.status_code == 200, reply.text
        copy = (await c.query("session.get", {"sessionId": reply.json()["id"]}))["messages"]
        original = json.loads(export)["messages"]
        assert [m["content"] for m in copy] == [m["content"] for m in original]
        assert all(not m["attachments"] for m in copy)  # alice's file is not bob's

        md = await alice.get(f"/sessions/{sid}/export", params={"format": "markdown"})
        assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
        assert md.headers["content-disposition"] == 'attachment; filename="Code-tools.md"'
        text = md.text
        assert text.startswith("# Code & tools\n")
        assert "## You\n\n" + CODE_ANSWER in text and "## Assistant\n\n" + CODE_ANSWER in text
        assert 'Tool call `calculator`:\n\n```json\n{"expression": "6*7"}\n```' in text
        assert "Result of `calculator`:\n\n```\n42\n```" in text
        assert "Attached: notes.txt" in text


async def test_refusals_are_typed_and_change_nothing(tx):
    async with http(tx) as h, http(tx, "bob") as bob, http(tx, None) as anonymous, tx.client("alice") as c:
        s = await c.mutation("session.create", {"title": "mine"})
        export = (await h.get(f"/sessions/{s['id']}/export")).json()
        assert (await anonymous.get(f"/sessions/{s['id']}/export")).status_code == 401
        assert (await anonymous.post("/sessions/import", json=export)).status_code == 401
        missing = await bob.get(f"/sessions/{s['id']}/export")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        assert (await h.get(f"/sessions/{s['id']}/export", params={"format": "pdf"})).status_code == 400

        def refused(reply: httpx.Response, code: str, status: int = 400) -> None:
            assert reply.status_code == status, reply.text
            assert reply.json()["error"]["code"] == code

        refused(await h.post("/sessions/import", content=b"{not json"), "BAD_REQUEST")
        refused(await h.post("/sessions/import", json={"format": "something else"}), "BAD_REQUEST")
        refused(await h.post("/sessions/import", json={**export, "version": 2}), "BAD_REQUEST")
        bad_role = {**export, "messages": [{"role": "wizard", "content": "x"}]}
        refused(await h.post("/sessions/import", json=bad_role), "BAD_REQUEST")
        nul = {**export, "messages": [{"role": "user", "content": "a\u0000b"}]}
        refused(await h.post("/sessions/import", json=nul), "BAD_REQUEST")
        unknown = {**export, "session": {**export["session"], "provider": "nobody"}}
        refused(await h.post("/sessions/import", json=unknown), "BAD_REQUEST")
        big = {**export, "messages": [{"role": "user", "content": "x" * 70_000}]}
        refused(await h.post("/sessions/import", json=big), "PAYLOAD_TOO_LARGE", 413)
        long_key = {"idempotency-key": "k" * 65}
        refused(await h.post("/sessions/import", json=export, headers=long_key), "BAD_REQUEST")
        assert await session_ids(c) == [s["id"]]
        # fields a newer server may add are passed over, not refused
        newer = {**export, "messages": [{"role": "user", "content": "hi", "outcome": "ok", "parentId": None}]}
        assert (await h.post("/sessions/import", json=newer)).status_code == 200


async def test_an_import_past_the_sessions_bound_is_refused(db_url, server_factory):
    live = await server_factory(db_url, users=("alice",), max_sessions_per_user=1, **FAST)
    async with http(live) as h, live.client("alice") as c:
        s = await c.mutation("session.create", {"title": "the only one"})
        export = (await h.get(f"/sessions/{s['id']}/export")).content
        reply = await h.post("/sessions/import", content=export, headers={"idempotency-key": "one-too-many"})
        assert reply.status_code == 412 and reply.json()["error"]["code"] == "PRECONDITION_FAILED"
        assert await session_ids(c) == [s["id"]]
        await c.mutation("session.delete", {"sessionId": s["id"]})
        # the refusal was not recorded: the same key imports once there is room
        again = await h.post("/sessions/import", content=export, headers={"idempotency-key": "one-too-many"})
        assert again.status_code == 200 and await session_ids(c) == [again.json()["id"]]
