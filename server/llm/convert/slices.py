"""Work done a slice at a time, so that a long conversation does not hold the event loop in one stretch.

The work is a generator that yields (nothing) between two slices and returns its result: :func:`at_once` runs it
through, :func:`sharing_loop` lets the event loop run other work at every yield. One body serves both, so the
result does not depend on which way it ran."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TypeVar, cast

T = TypeVar("T")

Sliced = Generator[None, None, T]


def at_once(work: Sliced[T]) -> T:
    """``work``'s result, run through without a pause."""
    while True:
        finished, result = _advance(work)
        if finished:
            return result


async def sharing_loop(work: Sliced[T]) -> T:
    """``work``'s result, with a turn of the event loop at each of its pauses."""
    while True:
        finished, result = _advance(work)
        if finished:
            return result
        await asyncio.sleep(0)


def _advance(work: Sliced[T]) -> tuple[bool, T]:
    """Runs ``work`` to its next pause (False) or to its end (True, with its result)."""
    try:
        next(work)
    except StopIteration as done:
        return True, done.value
    return False, cast(T, None)
