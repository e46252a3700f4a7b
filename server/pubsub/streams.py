"""Shared stream texts: the partial text of every streaming message, where each replica can read it.

A replica that did not run a stream still has to give a client that joins mid-answer the exact text so far
(streamed text reaches every subscriber exactly once: the invariants in docs/architecture.md). The process running
the stream keeps its own copy (``engine/buffer.py``); this interface keeps the shared one, beside the bus whose
deltas it must stay in step with: ``append`` adds a delta to the message's text *before* the delta is published, so
a snapshot read at any moment covers every delta already on the bus, and a subscriber drops the deltas below its
snapshot's offset.

A backend is made by its bus (``Bus.shared_stream_texts``), since it shares the bus's connection: on Redis the
APPEND and the PUBLISH of a delta go in one pipeline, in that order. Every call is best-effort: a failure
is logged, and ``snapshot`` answers None when the shared text cannot be read (the caller then falls back to
the text last flushed to the database).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from ..domain.events import EventEnvelope

if TYPE_CHECKING:
    from .base import Bus


class SharedStreamTexts(abc.ABC):
    """Shared partial texts of a deployment's streaming messages."""

    @abc.abstractmethod
    async def started(self, session_id: str, message_id: str, initial: str = "") -> None:
        """A message of the session starts streaming (called before its first delta), with ``initial``, the
        text it has when it goes on after a stop."""

    @abc.abstractmethod
    async def append(self, session_id: str, env: EventEnvelope, message_id: str, delta: str) -> None:
        """Append ``delta`` to the message's shared text, then publish its event ``env`` on the bus."""

    @abc.abstractmethod
    async def ended(self, session_id: str, message_id: str) -> None:
        """The message's final text is in the database; forget its partial text."""

    @abc.abstractmethod
    async def snapshot(self, session_id: str) -> list[dict[str, object]] | None:
        """``[{messageId, offset, text}]`` of the session's streaming messages; None when not shared here
        (one process) or unreadable now."""


class UnsharedStreamTexts(SharedStreamTexts):
    """One process: nothing to share (the running stream's own buffer is every subscriber's source)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def started(self, session_id: str, message_id: str, initial: str = "") -> None:
        return None

    async def append(self, session_id: str, env: EventEnvelope, message_id: str, delta: str) -> None:
        await self.bus.publish(session_id, (env,))

    async def ended(self, session_id: str, message_id: str) -> None:
        return None

    async def snapshot(self, session_id: str) -> list[dict[str, object]] | None:
        return None
