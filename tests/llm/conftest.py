"""Fixtures for the provider tests (helpers live in ``llm_replay``)."""

from __future__ import annotations

from collections.abc import Iterable

import httpx
import httpx2
import pytest
from llm_replay import Replay, Reply, Sleeps

from server.llm import RetryPolicy


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def retry_policy(sleeps: Sleeps) -> RetryPolicy:
    """Two retries, deterministic jitter (rand=1.0 -> full ceiling), no real waiting."""
    return RetryPolicy(max_retries=2, sleep=sleeps, rand=lambda: 1.0)


@pytest.fixture
async def httpx2_replay():
    """Factory ``make(replies) -> (Replay, httpx2.AsyncClient)`` for the openai/anthropic/google SDKs."""
    clients: list[httpx2.AsyncClient] = []

    def make(replies: Iterable[Reply]) -> tuple[Replay, httpx2.AsyncClient]:
        replay = Replay(httpx2, replies)
        client = httpx2.AsyncClient(transport=replay.transport())
        clients.append(client)
        return replay, client

    yield make
    for client in clients:
        await client.aclose()  # idempotent: a provider may have closed it already


@pytest.fixture
def httpx_replay():
    """Factory ``make(replies) -> (Replay, httpx.MockTransport)`` for ollama-python (plain httpx)."""

    def make(replies: Iterable[Reply]) -> tuple[Replay, httpx.MockTransport]:
        replay = Replay(httpx, replies)
        return replay, replay.transport()

    return make
