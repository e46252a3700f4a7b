"""Where fan-out writes: the small interface between sync and the transports.

A subscription over a WebSocket hands its delivery an :class:`EventSink` (its connection's :class:`Outlet`
and the frame prefix ``{"id":<subscription id>``). Fan-out (``delivery.fan_out``) decides, in Python only,
which subscribers take an event as it is, then gives all their sinks to one outlet's ``send_event_many``
(or ``send_tracked_many``) at once: a transport that can write faster in a batch overrides those two;
the defaults write one sink at a time. The transports live in ``rpc/``; sync knows only this module.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from ..domain.events import EventEnvelope


class Outlet(abc.ABC):
    """A subscriber connection's writer, as fan-out sees it. Never blocks: a slow client is the
    transport's to bound (it closes the connection), never the caller's to wait for."""

    __slots__ = ()

    @abc.abstractmethod
    def send_event(self, prefix: bytes, env: EventEnvelope) -> None:
        """Send a durable event, tracked under its own id (``prefix`` is ``{"id":<subscription id>``)."""

    @abc.abstractmethod
    def send_event_as(self, prefix: bytes, env: EventEnvelope, event_id: str) -> None:
        """Send an ephemeral event, tracked under ``event_id`` (the last durable id the subscriber has)."""

    @staticmethod
    def send_event_many(sinks: list[EventSink], events: Sequence[EventEnvelope]) -> None:
        """Send consecutive durable events to many subscriptions (called on any one of their outlets)."""
        for sink in sinks:
            for env in events:
                sink.outbox.send_event(sink.prefix, env)

    @staticmethod
    def send_tracked_many(targets: list[tuple[EventSink, str]], env: EventEnvelope) -> None:
        """Send one ephemeral event to many subscriptions, each tracked under its own event id."""
        for sink, event_id in targets:
            sink.outbox.send_event_as(sink.prefix, env, event_id)


class EventSink:
    """Where one subscription's events go: its connection's outlet and the frame prefix. Called with a
    durable event it sends it (the event's own id is the tracked one)."""

    __slots__ = ("outbox", "prefix")

    def __init__(self, outbox: Outlet, prefix: bytes) -> None:
        self.outbox = outbox
        self.prefix = prefix

    def __call__(self, env: EventEnvelope) -> None:
        self.outbox.send_event(self.prefix, env)
