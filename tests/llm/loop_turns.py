"""How often the event loop turned while some work ran: work done a slice at a time lets other work run between
its slices; work done in one stretch lets none."""

from __future__ import annotations

import asyncio
from types import TracebackType


class LoopTurns:
    """``async with LoopTurns() as turns: await work()`` — then ``turns.count`` is how many times another task
    got the loop while the work ran."""

    def __init__(self) -> None:
        self.count = 0
        self._going = True
        self._task: asyncio.Task[None] | None = None

    async def _other_work(self) -> None:
        while self._going:
            self.count += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.create_task(self._other_work())
        await asyncio.sleep(0)  # it runs once before the work starts
        self.count = 0
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._going = False
        assert self._task is not None
        await self._task
