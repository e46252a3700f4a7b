"""ChatClient and SessionView against a real server: typed calls, live state, resume after a dropped socket."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatsync_client import (
    ChatClient,
    ConnectionRejected,
    RunFailed,
    ServerUnreachable,
    TrpcError,
)
from server.domain import close_codes

pytestmark = pytest.mark.timeout(30)

LONG = " ".join(f"word{i}" for i in range(80))


async def test_typed_session_and_queue_calls(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session(title="typed", queue_paused=True)
        assert s.queue_paused and s.title == "typed"
        a = await chat.enqueue(s.id, "first")
        b = await chat.enqueue(s.id, "second")
        assert [q.id for q in await chat.move_queued(s.id, b.id, 0)] == [b.id, a.id]
        assert (await chat.update_queued(s.id, a.id, "first, edited")).content == "first, edited"
        await chat.remove_queued(s.id, b.id)
        assert [q.content for q in await chat.get_queue(s.id)] == ["first, edited"]
        assert (await chat.set_title(s.id, "renamed")).title_source == "user"
        assert [x.id for x in await chat.list_sessions()] == [s.id]
        await chat.delete_session(s.id)
        with pytest.raises(TrpcError) as err:
            await chat.get_session(s.id)
        assert err.value.code == "NOT_FOUND"


async def test_view_follows_another_clients_changes(paced: Any) -> None:
    async with (
        ChatClient(paced.url, paced.tokens["alice"]) as mine,
        ChatClient(paced.url, paced.tokens["alice"]) as other,
    ):
        s = await mine.create_session(queue_paused=True)
        view = await mine.open_session(s.id)
        async with view:
            q = await other.enqueue(s.id, "from elsewhere")
            await view.wait_until(lambda v: [x.id for x in v.queue] == [q.id])
            await other.set_title(s.id, "set elsewhere")
            await view.wait_until(lambda v: v.session is not None and v.session.title == "set elsewhere")
            await other.remove_queued(s.id, q.id)
            await view.wait_until(lambda v: v.queue == [])
            await other.delete_session(s.id)
            await view.wait_until(lambda v: v.deleted)


async def test_view_resumes_mid_stream_with_full_text_and_no_duplicate(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        view = await chat.open_session(s.id)
        states: list[str] = []
        view.add_listener(lambda c: states.append(view.connection) if c.kind == "connection" else None)
        async with view:
            sent = await chat.send(s.id, LONG)
            assert sent.status == "started"

            def answer_started(v: Any) -> bool:
                return any(m.role == "assistant" and len(m.content.split()) >= 5 for m in v.messages)

            await view.wait_until(answer_started)
            partial = next(m for m in view.messages if m.role == "assistant").content
            assert partial != LONG, "the answer finished before the drop; nothing was tested"
            await chat.trpc.drop_connection()
            await view.wait_until(lambda v: v.run is None and v.messages[-1].status == "complete", timeout=15)
            answer = view.messages[-1]
            assert answer.role == "assistant" and answer.content == LONG
            # the server's stored text is the same: nothing was appended twice or lost
            stored = (await chat.get_session(s.id)).messages[-1]
            assert stored.content == LONG
            assert chat.trpc.connects == 2
            assert states[:2] == ["reconnecting", "resumed"]
            assert view.resyncs == 0


async def test_prompt_streaming_calls_back_once_per_delta_in_order(paced: Any) -> None:
    async with (
        ChatClient(paced.url, paced.tokens["alice"]) as chat,
        ChatClient(paced.url, paced.tokens["alice"]) as watcher,
    ):
        s = await chat.create_session()
        snap = await watcher.get_session(s.id)
        raw = await watcher.trpc.subscribe("session.events", {"sessionId": s.id}, last_event_id=snap.last_event_id)
        await raw.wait_started()
        chunks: list[str] = []
        final = await chat.prompt_streaming(s.id, LONG, chunks.append)
        assert final.role == "assistant" and final.status == "complete"
        assert "".join(chunks) == final.content == LONG
        deltas: list[str] = []
        while True:
            _id, e = await raw.next(5)
            if e["type"] == "text-delta" and e["messageId"] == final.id:
                deltas.append(e["delta"])
            if e["type"] == "run-finished":
                break
        assert len(deltas) > 1
        assert chunks == deltas  # one call per delta, same pieces, same order


async def test_prompt_streaming_survives_a_dropped_socket(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        chunks: list[str] = []

        def on_chunk(c: str) -> None:
            chunks.append(c)
            if len(chunks) == 5:
                asyncio.get_running_loop().create_task(chat.trpc.drop_connection())

        final = await chat.prompt_streaming(s.id, LONG, on_chunk)
        assert chat.trpc.connects == 2
        assert "".join(chunks) == final.content == LONG


async def test_prompt_streaming_on_a_busy_session_waits_for_the_queue(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        first = await chat.send(s.id, LONG)
        assert first.status == "started"
        chunks: list[str] = []
        final = await chat.prompt_streaming(s.id, "second question here", chunks.append)
        assert "".join(chunks) == final.content == "second question here"
        snap = await chat.get_session(s.id)
        assert [m.content for m in snap.messages if m.role == "assistant"] == [LONG, "second question here"]


async def test_prompt_streaming_raises_when_aborted(paced: Any) -> None:
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        chunks: list[str] = []

        def on_chunk(c: str) -> None:
            chunks.append(c)
            if len(chunks) == 3:
                asyncio.get_running_loop().create_task(chat.abort(s.id))

        with pytest.raises(RunFailed) as err:
            await chat.prompt_streaming(s.id, LONG, on_chunk)
        assert err.value.reason == "run-aborted"
        assert err.value.message is not None and err.value.message.status == "interrupted"
        assert err.value.message.content.startswith("".join(chunks[:3]))


async def test_connection_errors_are_typed(paced: Any) -> None:
    async with ChatClient(paced.url, "not-a-token") as chat:
        with pytest.raises((TrpcError, ConnectionRejected)) as err:
            await chat.list_sessions()
        assert getattr(err.value, "code", None) in ("UNAUTHORIZED", close_codes.UNAUTHORIZED)
        for _ in range(100):  # the server then closes with UNAUTHORIZED: the client must not retry forever
            if chat.trpc.rejected is not None:
                break
            await asyncio.sleep(0.02)
        assert chat.trpc.rejected is not None and chat.trpc.rejected.code == close_codes.UNAUTHORIZED
        # The connection loop ends instead of trying again (a retry would open a second socket first).
        await asyncio.wait_for(asyncio.shield(chat.trpc._runner), 10)
        assert chat.trpc.connects == 1
    with pytest.raises(ServerUnreachable):
        async with ChatClient("http://127.0.0.1:9", "x", reconnect=False, connect_timeout=2):
            pass


async def test_view_resyncs_on_an_offset_gap_or_resync_required(paced: Any) -> None:
    """The server never sends a bad offset, so the bad items are put into the view's own subscription."""
    async with ChatClient(paced.url, paced.tokens["alice"]) as chat:
        s = await chat.create_session()
        answer = await chat.prompt_streaming(s.id, "one two three", lambda _c: None)
        view = await chat.open_session(s.id)
        async with view:

            def inject(event: dict[str, Any]) -> None:
                assert view._sub is not None
                view._sub._sub.items.put_nowait((view.last_event_id, {"sessionId": s.id, **event}))

            # a repeat of text we already have (what a snapshot covered) is dropped, not a resync
            inject({"type": "text-delta", "messageId": answer.id, "offset": 4, "delta": "two"})
            # a delta past the end: a gap, so the local copy is refetched
            inject({"type": "text-delta", "messageId": answer.id, "offset": 99, "delta": " four"})
            await view.wait_until(lambda v: v.resyncs == 1)
            assert view.message(answer.id).content == "one two three"  # type: ignore[union-attr]
            inject({"type": "resync-required", "lastEventId": "1"})
            await view.wait_until(lambda v: v.resyncs == 2)
            # still live after resubscribing
            q = await chat.enqueue(s.id, "later")
            await view.wait_until(
                lambda v: any(m.content == "later" for m in v.messages) or [x.id for x in v.queue] == [q.id]
            )
            assert next(m.content for m in view.messages if m.role == "assistant") == "one two three"


async def test_versions_and_branches_through_the_client_and_a_view(paced: Any) -> None:
    """Edit, regenerate, continue, switch and fork with ChatClient; another client's SessionView keeps the active
    path from the events alone and ends equal to the server's."""
    async with (
        ChatClient(paced.url, paced.tokens["alice"]) as chat,
        ChatClient(paced.url, paced.tokens["alice"]) as other,
    ):
        s = await chat.create_session()
        view = await other.open_session(s.id)
        async with view:
            await chat.send(s.id, "alpha beta gamma\n/length after=1")
            await view.wait_until(lambda v: not v.busy and len(v.messages) == 2)
            assert view.messages[1].finish_reason == "length"
            went_on = await chat.continue_answer(s.id)
            await view.wait_until(lambda v: not v.busy and v.messages[1].content == "alpha beta gamma")
            assert went_on["messageId"] == view.messages[1].id
            first_user = view.messages[0]
            edited = await chat.edit_message(s.id, first_user.id, "delta")
            await view.wait_until(lambda v: not v.busy and [m.content for m in v.messages] == ["delta", "delta"])
            assert edited.message is not None and view.messages[0].versions is not None
            assert (view.messages[0].versions.index, view.messages[0].versions.count) == (1, 2)
            regen = await chat.regenerate(s.id)
            await view.wait_until(lambda v: not v.busy and v.messages[1].id != edited.message.id)
            await view.wait_until(lambda v: not v.busy and v.messages[-1].run_id == regen["runId"])
            await chat.switch_branch(s.id, first_user.id)
            await view.wait_until(lambda v: v.messages[0].id == first_user.id)
            snap = await chat.get_session(s.id)
            assert [(m.id, m.content) for m in view.messages] == [(m.id, m.content) for m in snap.messages]
            assert view.resyncs == 0  # no refetch for any of it
            page, _ = await chat.list_messages(s.id, leaf_id=edited.message.id)
            assert [m.content for m in page] == ["delta"]
            fork = await chat.fork_session(s.id, first_user.id, title="forked")
            assert fork.title == "forked"
            assert [m.content for m in (await chat.get_session(fork.id)).messages] == [
                "alpha beta gamma\n/length after=1"
            ]
