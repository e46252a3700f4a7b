"""Where a benchmarked server's CPU goes, by part of the run path: the exact CPU time of chosen coroutines' own
steps, read by ``bench/capacity.py --cpu-split``.

A sampling profiler (``--profile``) attributes busy time, which includes time a thread spends in system calls
that wait (a commit's writes, a checkpoint's fsync), and py-spy cannot follow a coroutine across its awaits.
This counts only CPU: each chosen coroutine is driven through a wrapper that reads the thread's CPU clock
(``time.thread_time``, nanoseconds) around every step of it, so what other tasks do while it awaits is not
counted, and what the coroutines and functions it awaits do is (the parts nest: a send's commit is in both
"the send" and "commit"). Plain functions are timed around each call.

Installed in the server process (``bench/streaming.py --serve`` with ``BENCH_CPU_SPLIT`` set to a file path),
it writes its totals to ``<path>.<n>`` each time the process gets ``SIGUSR1`` (n counting from 0); the
benchmark signals at the start and the end of its load, and the difference is the load's.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import signal
import time
from collections.abc import Callable, Generator
from typing import Any

_cpu = time.thread_time
_totals: dict[str, float] = {}
_calls: dict[str, int] = {}


class _Timed:
    """Awaits ``coro``, adding the CPU time of each of its steps to ``key``."""

    __slots__ = ("coro", "key")

    def __init__(self, coro: Any, key: str) -> None:
        self.coro, self.key = coro, key

    def __await__(self) -> Generator[Any, Any, Any]:
        it, key, totals = self.coro.__await__(), self.key, _totals
        _calls[key] = _calls.get(key, 0) + 1
        value: Any = None
        error: BaseException | None = None
        while True:
            started = _cpu()
            try:
                step = it.throw(error) if error is not None else it.send(value)
            except StopIteration as stop:
                totals[key] = totals.get(key, 0.0) + _cpu() - started
                return stop.value
            except BaseException:
                totals[key] = totals.get(key, 0.0) + _cpu() - started
                raise
            totals[key] = totals.get(key, 0.0) + _cpu() - started
            try:
                value, error = (yield step), None
            except BaseException as exc:  # thrown in (a cancellation): passed on to the coroutine
                value, error = None, exc


def _timed_coroutine(owner: Any, name: str, key: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        return await _Timed(fn(*args, **kwargs), key)

    setattr(owner, name, timed)


def _timed_function(owner: Any, name: str, key: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        _calls[key] = _calls.get(key, 0) + 1
        started = _cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            _totals[key] = _totals.get(key, 0.0) + _cpu() - started

    setattr(owner, name, timed)


def parts() -> list[tuple[str, Any, str, bool]]:
    """(label, owner, attribute, is a coroutine function) of every part timed. Module functions are replaced on
    their module, which is where the run path looks them up (``transitions.x``, ``repo.x``)."""
    from server.engine import orchestrator, run
    from server.pubsub.memory import MemoryBus
    from server.rpc.ws import WsConnection
    from server.services import transitions
    from server.services.runs import RunService
    from server.services.uow import SessionTx, UnitOfWork
    from server.store import eventlog, repo, session_row, sqlite_inline
    from server.sync.delivery import Delivery
    from server.sync.hub import Hub

    return [
        ("a call over a WebSocket (parse, admit, run, reply)", WsConnection, "_call", True),
        ("  the send (RunService.send)", RunService, "send", True),
        ("    the run's first step, started in the send", orchestrator.Orchestrator, "first_step", True),
        ("the token path (RunLoop._consume)", run.RunLoop, "_consume", True),
        ("a step's end (RunLoop._finish_step)", run.RunLoop, "_finish_step", True),
        ("  the queue's next run, started at a step's end", transitions, "next_question_or_idle", True),
        ("the run loop's heartbeat task", run.RunLoop, "_tick", True),
        ("a subscriber's catch-up", Delivery, "_catch_up", True),
        ("fan-out of a published batch (all of it)", Hub, "_on_message", False),
        ("  of a durable batch, after its commit", MemoryBus, "_deliver", False),
        ("a transaction: lock the session row", session_row, "lock", True),
        ("a transaction: before its commit (row, ledger, log, feed)", SessionTx, "finish", True),
        ("  the owner's session-list feed", SessionTx, "_feed", True),
        ("  the session's log", eventlog, "append", True),
        ("a transaction: commit", sqlite_inline.InlineConnection, "commit", True),
        ("a transaction: publish", UnitOfWork, "publish_tx", True),
        ("a message inserted", transitions, "add_message", True),
        ("a step's history read", repo, "stored_history", True),
    ]


def _collector_label(generation: int) -> str:
    return f"the garbage collector, generation {generation}"


def install(path: str) -> None:
    """Time every part of :func:`parts`, and write the totals to ``<path>.<n>`` on each ``SIGUSR1``."""
    labels = []
    for label, owner, name, is_coroutine in parts():
        (_timed_coroutine if is_coroutine else _timed_function)(owner, name, label)
        labels.append(label)
    started: list[float] = []

    def collector(phase: str, info: dict[str, int]) -> None:
        """The cyclic garbage collector's passes, by generation: they run inside whatever allocated last."""
        if phase == "start":
            started.append(_cpu())
        elif started:
            key = _collector_label(info["generation"])
            _totals[key] = _totals.get(key, 0.0) + _cpu() - started.pop()
            _calls[key] = _calls.get(key, 0) + 1

    gc.callbacks.append(collector)
    labels += [_collector_label(generation) for generation in range(3)]
    snapshots = 0

    def snapshot(*_: Any) -> None:
        nonlocal snapshots
        state = {
            "process_cpu": time.process_time(),
            "parts": {label: [_totals.get(label, 0.0), _calls.get(label, 0)] for label in labels},
        }
        with open(f"{path}.{snapshots}.tmp", "w") as f:
            json.dump(state, f)
        os.replace(f"{path}.{snapshots}.tmp", f"{path}.{snapshots}")
        snapshots += 1

    signal.signal(signal.SIGUSR1, snapshot)


def take(pid: int, path: str, n: int, timeout: float = 10.0) -> dict[str, Any]:
    """Ask the server ``pid`` for its snapshot number ``n`` and return it."""
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not os.path.exists(f"{path}.{n}"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no CPU split snapshot from process {pid}")
        time.sleep(0.01)
    with open(f"{path}.{n}") as f:
        state: dict[str, Any] = json.load(f)
    return state


def report(before: dict[str, Any], after: dict[str, Any], answers: int, print_: Callable[[str], None] = print) -> None:
    """Print the load's CPU per answer, by part: what ``after`` counted more than ``before``."""
    total = after["process_cpu"] - before["process_cpu"]
    print_(f"    CPU split per answer ({answers} answers; parts nest, indented under what contains them):")
    print_(f"    {'the whole process':<62} {total * 1e6 / max(answers, 1):8.0f} µs   100.0%")
    for label, (cpu, calls) in after["parts"].items():
        cpu0, calls0 = before["parts"].get(label, [0.0, 0])
        spent, count = cpu - cpu0, calls - calls0
        share = 100 * spent / total if total else 0.0
        print_(f"    {label:<62} {spent * 1e6 / max(answers, 1):8.0f} µs {share:6.1f}%   ({count} calls)")
