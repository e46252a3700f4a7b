"""Helpers for the versions-and-branches tests: a provider fake that records every request, and a viewer that
keeps a session's active path from its events the way a UI store does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from server.llm import ChatRequest, TurnEvent
from server.llm.providers.echo import EchoProvider


class Recording(EchoProvider):
    """The echo model under any provider id, keeping every request it gets."""

    def __init__(self, provider_id: str = "echo", delay: float = 0.001) -> None:
        super().__init__(delay=delay)
        self.provider_id = provider_id
        self.requests: list[ChatRequest] = []

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        self.requests.append(request)
        async for event in super()._attempt(request):
            yield event


def record(live: Any, provider_id: str = "echo", delay: float = 0.001) -> Recording:
    """Make the server's ``provider_id`` a :class:`Recording` (its runs ask it from now on)."""
    fake = Recording(provider_id, delay)
    live.services.orchestrator._providers[provider_id] = fake
    return fake


def canonical(request: ChatRequest) -> list[tuple[str, str]]:
    """(role, text) of each message of a request."""
    return [(m.role, m.content) for m in request.messages]


class Viewer:
    """A subscriber that keeps the active path and each message's text from the events alone: messages by id,
    the path as ids; ``branch-changed`` cuts the path at its parent and appends what it carries, a new message is
    appended, text grows by offset-checked deltas."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub
        self.messages: dict[str, dict[str, Any]] = {}
        self.path: list[str] = []
        self.texts: dict[str, str] = {}
        self.last_id = "0"
        self.seen: list[dict[str, Any]] = []

    def apply(self, event_id: str | None, e: dict[str, Any]) -> None:
        self.seen.append(e)
        if event_id is not None and event_id != self.last_id:  # stream events carry the last durable id
            assert int(event_id) == int(self.last_id) + 1, (event_id, self.last_id)  # in order, none missing
            self.last_id = event_id
        kind = e["type"]
        if kind == "message-created":
            m = e["message"]
            assert m["parentId"] == (self.path[-1] if self.path else None), "a new message goes after the leaf"
            self.messages[m["id"]] = m
            self.texts[m["id"]] = m["content"]
            self.path.append(m["id"])
        elif kind in ("message-completed", "message-continued"):
            m = e["message"]
            self.messages[m["id"]] = {**self.messages.get(m["id"], {}), **{k: v for k, v in m.items() if v is not None}}
            if kind == "message-completed" or len(m["content"]) >= len(self.texts.get(m["id"], "")):
                assert m["content"].startswith(self.texts.get(m["id"], "")[: len(m["content"])])
                self.texts[m["id"]] = m["content"]
        elif kind == "branch-changed":
            cut = self.path.index(e["parentId"]) + 1 if e["parentId"] is not None else 0
            self.path = self.path[:cut]
            for m in e["path"]:
                self.messages[m["id"]] = m
                self.texts[m["id"]] = m["content"]
                self.path.append(m["id"])
        elif kind == "text-delta":
            text = self.texts.get(e["messageId"], "")
            if e["offset"] == len(text):
                self.texts[e["messageId"]] = text + e["delta"]
            else:
                assert e["offset"] < len(text), "a delta past the text: something was missed"
        elif kind == "stream-snapshot":
            self.texts[e["messageId"]] = e["text"]

    async def until(self, pred: Any, timeout: float = 15) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not pred(self):
            event_id, e = await self.sub.next(max(0.01, deadline - loop.time()))
            self.apply(event_id, e)

    async def caught_up(self, last_event_id: str, timeout: float = 15) -> None:
        """Read until the durable event ``last_event_id`` (a ``session.get``'s) is applied."""
        await self.until(lambda v: int(v.last_id) >= int(last_event_id), timeout)

    def shown(self) -> list[tuple[str, str]]:
        """(id, text) of each message on the active path."""
        return [(mid, self.texts[mid]) for mid in self.path]


def snapshot_shown(snap: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["id"], m["content"]) for m in snap["messages"]]
