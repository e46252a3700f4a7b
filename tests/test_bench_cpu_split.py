"""The capacity benchmark's CPU split (``bench/cpu_split.py``): it names parts of the server by attribute, so a
rename must fail here rather than in a measurement; and a timed coroutine counts its own steps' CPU only, not
that of the tasks that ran while it awaited."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

from bench import cpu_split

pytestmark = pytest.mark.fast

STEP = 0.02  # seconds of CPU each busy step burns


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_every_part_names_what_the_server_has() -> None:
    parts = cpu_split.parts()
    assert len({label for label, *_ in parts}) == len(parts)
    for label, owner, name, is_coroutine in parts:
        fn = getattr(owner, name, None)
        assert fn is not None, f"{label}: {owner!r} has no {name}"
        assert inspect.iscoroutinefunction(fn) == is_coroutine, f"{label}: {name} changed kind"


async def test_a_timed_coroutine_counts_its_own_steps_not_other_tasks() -> None:
    resumed = asyncio.Event()

    async def measured() -> str:
        _burn(STEP)
        await resumed.wait()  # meanwhile another task burns three steps
        _burn(STEP)
        return "done"

    async def other() -> None:
        _burn(3 * STEP)
        resumed.set()

    key = "test part"
    cpu_split._totals.pop(key, None)
    cpu_split._calls.pop(key, None)
    timed = asyncio.ensure_future(cpu_split._Timed(measured(), key))
    await asyncio.sleep(0)  # the measured coroutine's first step runs and awaits
    await other()
    assert await timed == "done"
    assert 2 * STEP <= cpu_split._totals[key] < 3 * STEP
    assert cpu_split._calls[key] == 1


async def test_a_cancellation_reaches_the_timed_coroutine() -> None:
    seen: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = asyncio.ensure_future(cpu_split._Timed(waits(), "test cancelled"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]
