"""Many tRPC mutations at once over plain HTTP, each on a connection of its own, for tests of bounds that must
hold under concurrency: every call is in flight together, and each answer is kept (its data, or its error code)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Answer:
    data: Any = None
    code: str | None = None  # the tRPC error code key, None for a success

    @property
    def ok(self) -> bool:
        return self.code is None


async def mutate(http: httpx.AsyncClient, url: str, token: str, path: str, inp: Any) -> Answer:
    r = await http.post(f"{url}/trpc/{path}", json=inp, headers={"authorization": f"Bearer {token}"})
    body = r.json()
    if "error" in body:
        return Answer(code=body["error"]["data"]["code"])
    assert r.status_code == 200, r.text
    return Answer(data=body["result"]["data"])


async def all_at_once(calls: list[tuple[str, str, str, Any]], timeout: float = 120) -> list[Answer]:
    """``(server url, token, path, input)`` calls, all in flight together; answers in call order."""
    limits = httpx.Limits(max_connections=len(calls) + 1, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
        return list(await asyncio.gather(*(mutate(http, *call) for call in calls)))


def codes(answers: list[Answer]) -> Counter[str | None]:
    """How many answers succeeded (key None) and failed with each code."""
    return Counter(a.code for a in answers)
