"""Helpers for the engine tests: read event streams the way a UI does, wait for conditions, run real
`chatsync serve` processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

FAST = {"echo_delay": 0.001, "sweep_seconds": 0.2, "stream_flush_seconds": 0.2}


class Stream:
    """Everything one subscription received, with helpers to wait for events."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub
        self.items: list[tuple[str | None, dict[str, Any]]] = []

    @property
    def events(self) -> list[dict[str, Any]]:
        return [e for _i, e in self.items]

    def of(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] in types]

    async def until(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict[str, Any]:
        """Read until an event satisfies ``pred`` (also looks at what was already read)."""
        for e in self.events:
            if pred(e):
                return e
        deadline = time.monotonic() + timeout
        while True:
            item = await self.sub.next(max(0.01, deadline - time.monotonic()))
            self.items.append(item)
            if pred(item[1]):
                return item[1]

    async def until_type(self, type_: str, count: int = 1, timeout: float = 10) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.of(type_)) < count:
            item = await self.sub.next(max(0.01, deadline - time.monotonic()))
            self.items.append(item)
        return self.of(type_)[:count]

    def text_of(self, message_id: str) -> str:
        """The text a UI shows for a message from this stream's events: snapshot + deltas, then the final text.

        Where the stream gave text of the message, the final text must agree with it. A subscriber whose catch-up
        read was in flight for the whole answer gets no snapshot or delta of it, only its final text (docs/sync.md):
        that is what it shows."""
        text, streamed = "", False
        for e in self.events:
            if e["type"] == "stream-snapshot" and e["messageId"] == message_id:
                text, streamed = e["text"], True
            elif e["type"] == "text-delta" and e["messageId"] == message_id:
                assert e["offset"] == len(text), (e["offset"], len(text))
                text, streamed = text + e["delta"], True
            elif e["type"] == "message-completed" and e["message"]["id"] == message_id:
                final = e["message"]["content"]
                assert final == text or not streamed, "deltas disagree with the stored final text"
                text = final
        return text


async def subscribe(client: Any, session_id: str, last_event_id: str | None = "0") -> Stream:
    input_: dict[str, Any] = {"sessionId": session_id}
    if last_event_id is not None:
        input_["lastEventId"] = last_event_id
    sub = await client.subscribe("session.events", input_)
    await sub.wait_started()
    return Stream(sub)


async def wait_for(pred: Callable[[], Any], timeout: float = 10, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(interval)


async def idle(client: Any, session_id: str, timeout: float = 10) -> dict[str, Any]:
    """Wait until the session has no run in progress; returns its snapshot."""

    async def check() -> Any:
        snap = await client.query("session.get", {"sessionId": session_id})
        return snap if snap["run"] is None and snap["session"]["status"] in ("idle", "error") else None

    return await wait_for(check, timeout)


def server_tool(name: str) -> dict[str, Any]:
    """A session's definition of the server tool ``name`` (runs without approval)."""
    return {
        "name": name,
        "description": name,
        "parameters": {"type": "object", "properties": {}},
        "executor": "server",
        "requiresApproval": False,
    }
