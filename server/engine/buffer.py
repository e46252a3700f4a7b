"""Partial texts: the text so far of every message this process is streaming right now (the path of a streamed
token is in docs/architecture.md).

Invariant: for a streaming message, ``text(message)`` is exactly the concatenation of every ``text-delta``
published for it so far, and each delta's ``offset`` is the buffer length before it was appended. The run loop
appends to the buffer *before* it publishes the delta, so a snapshot taken at any moment covers every delta
already on the bus; a subscriber drops deltas below its snapshot offset (``server.sync.delivery``) and so never
sees a character twice or misses one.

Offsets count Unicode code points (Python ``len``), not UTF-16 units.

This buffer serves the process running the stream. With several replicas the shared stream buffer
(``pubsub/streams.py``) also keeps the partial text where every replica can read it (an APPENDed Redis string
per message, written in the same pipeline as the delta's publish), so a client of another replica that joins
mid-stream gets the exact text too. Deliveries hold deltas that arrive while they read a snapshot and drop
the ones it covers (``server.sync.delivery``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field


@dataclass
class _Stream:
    parts: list[str] = field(default_factory=list)
    length: int = 0
    joined: str = ""

    def text(self) -> str:
        if len(self.joined) != self.length:
            self.joined = "".join(self.parts)
            self.parts = [self.joined]
        return self.joined


class PartialTexts(abc.ABC):
    """Partial text per in-progress message, grouped by session."""

    @abc.abstractmethod
    def start(self, session_id: str, message_id: str, initial: str = "") -> None:
        """Begin the stream of a message: empty for a new one, its text so far for an answer that goes on."""

    @abc.abstractmethod
    def append(self, session_id: str, message_id: str, delta: str) -> int:
        """Append a delta; returns its offset (the length before it)."""

    @abc.abstractmethod
    def text(self, session_id: str, message_id: str) -> str | None:
        """The text so far, or None when the message is not streaming here."""

    @abc.abstractmethod
    def end(self, session_id: str, message_id: str) -> None:
        """Forget a message whose final text is in the database."""

    @abc.abstractmethod
    def snapshot(self, session_id: str) -> list[dict[str, object]]:
        """``[{messageId, offset, text}]`` for the session's streaming messages held here."""


class MemoryPartialTexts(PartialTexts):
    """One process: a dict. Joining is lazy, so appending a token stays O(1)."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, _Stream]] = {}

    def start(self, session_id: str, message_id: str, initial: str = "") -> None:
        stream = _Stream([initial], len(initial), initial) if initial else _Stream()
        self._sessions.setdefault(session_id, {})[message_id] = stream

    def append(self, session_id: str, message_id: str, delta: str) -> int:
        stream = self._sessions[session_id][message_id]
        offset = stream.length
        stream.parts.append(delta)
        stream.length += len(delta)
        return offset

    def text(self, session_id: str, message_id: str) -> str | None:
        stream = self._sessions.get(session_id, {}).get(message_id)
        return None if stream is None else stream.text()

    def end(self, session_id: str, message_id: str) -> None:
        streams = self._sessions.get(session_id)
        if streams is not None:
            streams.pop(message_id, None)
            if not streams:
                del self._sessions[session_id]

    def snapshot(self, session_id: str) -> list[dict[str, object]]:
        return [
            {"messageId": mid, "offset": s.length, "text": s.text()}
            for mid, s in self._sessions.get(session_id, {}).items()
        ]
