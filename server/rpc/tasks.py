"""Ending a connection's tasks for certain: a cancellation that a call swallowed is made again.

On Python 3.11, ``asyncio.wait_for`` returns normally instead of raising when the cancel lands just as the
work it waits for completes, and libraries use it inside their calls (redis-py wraps every command it sends
in one when a socket timeout is set). A task whose cancellation was swallowed that way runs on: a subscription
of a client that stopped it, or left, would stay attached and hold the server's shutdown. Its next wait is
cancelled again. The rounds are spaced (``RECANCEL_SECONDS``), not back to back: a task that took the first
cancellation and is cleaning up (detaching from the hub, unsubscribing on the bus) is left time to finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Any

log = logging.getLogger(__name__)

RECANCEL_SECONDS = 1.0  # between two cancellations of a task that has not ended
CANCEL_ROUNDS = 5  # cancellations after the first, at most, before giving up on a task (logged)


async def wait_cancelled(tasks: Collection[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Wait until ``tasks``, cancelled by the caller, end; cancel again those still running every
    ``RECANCEL_SECONDS``, at most ``CANCEL_ROUNDS`` times. Returns the tasks still running then (each logged).
    What the ended tasks raised is retrieved (and dropped: they were cancelled because they are not wanted)."""
    pending = {task for task in tasks if not task.done()}
    for _round in range(CANCEL_ROUNDS + 1):
        if not pending:
            break
        if _round:
            for task in pending:
                task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=RECANCEL_SECONDS)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()
    for task in pending:
        log.warning("task %s did not end although cancelled %d times", task.get_name(), CANCEL_ROUNDS + 1)
    return pending
