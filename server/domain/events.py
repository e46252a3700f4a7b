"""The session event union (API.md "Events") and the envelope that carries one event through the process.

Durable events have a ``seq`` (their place in the session's event log); ephemeral ones do not.
An event is serialised to JSON once, when it is created or read from the log, and every transport
builds its frames around that text — never once per subscriber.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

DURABLE_EVENT_TYPES = frozenset(
    {
        "queue-message-added",
        "queue-message-removed",
        "queue-cleared",
        "queue-message-updated",
        "queue-reordered",
        "queue-paused",
        "queue-resumed",
        "message-created",
        "message-completed",
        "run-started",
        "run-finished",
        "run-failed",
        "run-aborted",
        "tool-call-ready",
        "tool-approval-requested",
        "tool-approval-resolved",
        "tool-call-result",
        "session-updated",
        "title-changed",
        "session-deleted",
    }
)
EPHEMERAL_EVENT_TYPES = frozenset({"text-delta", "tool-call-start", "tool-call-delta", "stream-snapshot"})


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass(slots=True)
class EventEnvelope:
    """One event as it travels from the log or the bus to connections."""

    session_id: str
    seq: int | None
    type: str
    json: str  # the event object as clients receive it
    # Ephemeral stream events only: which message they extend and at which character offset.
    message_id: str | None = None
    offset: int | None = None
    _event_id: str | None = field(default=None, repr=False)
    _ws_tail: str | None = field(default=None, repr=False)
    _ws_tail_b: bytes | None = field(default=None, repr=False)
    # Whole WebSocket frames by subscription prefix: subscribers whose subscription ids are equal (tRPC
    # clients number them from 1 per socket, so most are) share one frame object.
    _frames: dict[bytes, bytes] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, session_id: str, seq: int | None, type_: str, fields: dict[str, Any]) -> EventEnvelope:
        if type_ not in DURABLE_EVENT_TYPES and type_ not in EPHEMERAL_EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
        if (seq is None) != (type_ in EPHEMERAL_EVENT_TYPES):
            raise ValueError(f"{type_} must {'not ' if seq is None else ''}carry a seq")
        body = {"type": type_, "sessionId": session_id, **fields}
        return cls(session_id, seq, type_, dumps(body), fields.get("messageId"), fields.get("offset"))

    @property
    def event_id(self) -> str:
        eid = self._event_id
        if eid is None:
            eid = self._event_id = str(self.seq)
        return eid

    def ws_tail(self) -> str:
        """The part of a tracked tRPC WebSocket data frame after the subscription id, built once per
        durable event and shared by every subscriber. A full frame is ``{"id":<subscription id>`` + this.
        """
        tail = self._ws_tail
        if tail is None:
            tail = self._ws_tail = tracked_tail(self.event_id, self.json)
        return tail

    def ws_tail_bytes(self) -> bytes:
        tail = self._ws_tail_b
        if tail is None:
            tail = self._ws_tail_b = self.ws_tail().encode()
        return tail

    def ws_frame_as(self, prefix: bytes, event_id: str, header: Callable[[int], bytes]) -> bytes:
        """A frame tracked under another event's id (ephemeral events carry the last durable id); shared
        by subscribers with the same prefix and the same id, like :meth:`ws_frame`."""
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        key = prefix + b"@" + event_id.encode()
        frame = frames.get(key)
        if frame is None:
            payload = prefix + tracked_tail(event_id, self.json).encode()
            frame = header(len(payload)) + payload
            if len(frames) < MAX_CACHED_FRAMES:
                frames[key] = frame
        return frame

    def ws_frame(self, prefix: bytes, header: Callable[[int], bytes]) -> bytes:
        """The complete frame (WebSocket header + ``prefix`` + shared tail), built once per prefix."""
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        frame = frames.get(prefix)
        if frame is None:
            payload = prefix + self.ws_tail_bytes()
            frame = header(len(payload)) + payload
            if len(frames) < MAX_CACHED_FRAMES:
                frames[prefix] = frame
        return frame


MAX_CACHED_FRAMES = 16


def tracked_tail(event_id: str, json: str) -> str:
    """``,"result":{...}}`` of a tracked tRPC data frame: the id appears inside data and beside it."""
    return ',"result":{"type":"data","data":{"id":"' + event_id + '","data":' + json + '},"id":"' + event_id + '"}}'


def untracked_tail(json: str) -> str:
    return ',"result":{"type":"data","data":' + json + "}}"
