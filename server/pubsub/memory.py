"""In-process bus: one process, no network.

Events are delivered on a later turn of the loop, so a publisher (a transaction's ending, presence, device
revocations) never runs subscriber code inside its own call stack — except a stream delta (a text or tool-call
delta of a message: no ``seq``, a ``message_id``), which is delivered at once, inside ``publish``, unless a
batch of the same session is still waiting for its turn, behind which it queues to keep the session's order.

Deferring the deltas too made each one wait for everything queued on the loop before it: on a busy process
that is a write transaction or two (SQLite runs on the loop, ``store/sqlite_inline.py``), and a token's way
from the model to the subscribers' sockets took a millisecond instead of microseconds. Delivering a delta is a
few non-blocking socket writes (``sync/delivery.py``); a failure there is logged, never the publisher's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ..domain.events import EventEnvelope
from .base import Bus

log = logging.getLogger(__name__)


class MemoryBus(Bus):
    """The bus of a single process (``memory://``): publish hands the events to this process's subscribers on
    a later turn of the loop, a stream delta at once (see the module's doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._channels: set[str] = set()
        # Batches waiting for the loop's next turn, by session, in publishing order.
        self._waiting: dict[str, list[tuple[EventEnvelope, ...]]] = {}

    async def connect(self) -> None:
        pass

    async def disconnect(self) -> None:
        self._channels.clear()
        self._waiting.clear()

    async def subscribe(self, session_id: str) -> None:
        self._channels.add(session_id)

    async def unsubscribe(self, session_id: str) -> None:
        self._channels.discard(session_id)

    async def publish(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        if session_id not in self._channels or not events:
            return
        waiting = self._waiting.get(session_id)
        if waiting is not None:  # a batch of this session waits for its turn: keep the order behind it
            waiting.append(tuple(events))
        elif len(events) == 1 and events[0].seq is None and events[0].message_id is not None:
            self._hand_over(session_id, events)
        else:
            self._waiting[session_id] = [tuple(events)]
            asyncio.get_running_loop().call_soon(self._deliver, session_id)

    def _deliver(self, session_id: str) -> None:
        for events in self._waiting.pop(session_id, ()):
            if session_id not in self._channels:
                return
            self._hand_over(session_id, events)

    def _hand_over(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        try:
            self._on_message(session_id, events)
        except Exception:  # logged as the loop would for a callback of its own; the next batches go on
            log.exception("delivering events of session %s failed", session_id)
