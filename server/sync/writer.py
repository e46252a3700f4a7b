"""Where fan-out writes: the small interface between sync and the transports.

One name per part of the path to the socket:

* :class:`EventWriter` — a subscriber connection's writer, as sync sees it (the transports' ``ConnectionWriter``
  in ``rpc/writer.py`` is one);
* :class:`SubscriptionWriter` — one subscription on such a connection: the connection's writer and the frame
  prefix ``{"id":<subscription id>``.

A subscription over a WebSocket hands its delivery a :class:`SubscriptionWriter`. Fan-out
(``delivery.fan_out``) decides, in Python only, which subscribers take an event as it is, then gives all their
subscription writers to one connection writer's ``send_event_many`` (or ``send_tracked_many``) at once: a
transport that can write faster in a batch overrides those two; the defaults write one subscription at a time.
The transports live in ``rpc/``; sync knows only this module.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from ..domain.events import EventEnvelope


class EventWriter(abc.ABC):
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
    def send_event_many(targets: list[SubscriptionWriter], events: Sequence[EventEnvelope]) -> None:
        """Send consecutive durable events to many subscriptions (called on any one of their connections)."""
        for target in targets:
            for env in events:
                target.connection.send_event(target.prefix, env)

    @staticmethod
    def send_tracked_many(targets: list[tuple[SubscriptionWriter, str]], env: EventEnvelope) -> None:
        """Send one ephemeral event to many subscriptions, each tracked under its own event id."""
        for target, event_id in targets:
            target.connection.send_event_as(target.prefix, env, event_id)


class SubscriptionWriter:
    """Where one subscription's events go: its connection's writer and the frame prefix. Called with a
    durable event it sends it (the event's own id is the tracked one)."""

    __slots__ = ("connection", "prefix")

    def __init__(self, connection: EventWriter, prefix: bytes) -> None:
        self.connection = connection
        self.prefix = prefix

    def __call__(self, env: EventEnvelope) -> None:
        self.connection.send_event(self.prefix, env)
