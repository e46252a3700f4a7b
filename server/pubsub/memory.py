"""In-process bus: one process, no network. Delivery is deferred to the loop so a publisher never runs
subscriber code inside its own call stack."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..domain.events import EventEnvelope
from .base import Bus


class MemoryBus(Bus):
    """The bus of a single process (``memory://``): publish hands the events to this process's subscribers on
    a later turn of the loop."""

    def __init__(self) -> None:
        super().__init__()
        self._channels: set[str] = set()

    async def connect(self) -> None:
        pass

    async def disconnect(self) -> None:
        self._channels.clear()

    async def subscribe(self, session_id: str) -> None:
        self._channels.add(session_id)

    async def unsubscribe(self, session_id: str) -> None:
        self._channels.discard(session_id)

    async def publish(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        if session_id in self._channels and events:
            asyncio.get_running_loop().call_soon(self._deliver, session_id, tuple(events))

    def _deliver(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        if session_id in self._channels:
            self._on_message(session_id, events)
