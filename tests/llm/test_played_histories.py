"""Histories the server can really store, played out through the engine's state transitions (``played.py``),
convert to a valid request for every target: OpenAI, OpenAI-compatible, the strict (Mistral-style) template
profile, Anthropic, Gemini and Ollama. ``CHATSYNC_PLAYED_HISTORIES`` sets how many (``bench/played_histories.py``
runs 100,000)."""
from __future__ import annotations

import os
import random

import played
from test_llm_convert_properties import check_anthropic, check_google, check_ollama, check_openai

from server.llm import ChatRequest
from server.llm.convert import (
    COMPATIBLE,
    MISTRAL,
    OPENAI,
    to_anthropic_request,
    to_google_request,
    to_ollama_request,
    to_openai_request,
)
from server.pubsub.memory import MemoryBus
from server.services.auth import AuthService
from server.services.uow import UnitOfWork
from server.store import migrate
from server.store.db import Database

HISTORIES = int(os.environ.get("CHATSYNC_PLAYED_HISTORIES", "600"))


def check_every_target(request: ChatRequest) -> None:
    check_openai(to_openai_request(request, OPENAI)["messages"], compatible=False, mistral_ids=False)
    check_openai(to_openai_request(request, COMPATIBLE)["messages"], compatible=True, mistral_ids=False)
    check_openai(to_openai_request(request, MISTRAL)["messages"], compatible=True, mistral_ids=True)
    check_anthropic(to_anthropic_request(request))
    check_google(to_google_request(request))
    check_ollama(to_ollama_request(request)["messages"])


async def play_many(url: str, count: int, seed: int = 0) -> tuple[int, int]:
    """Play ``count`` sessions; returns (sessions, requests checked). A failure names the seed to replay."""
    async with Database(url) as db:
        await migrate.upgrade(db)
        user, _token = await AuthService(db).create_user(f"player-{seed}")
        uow = UnitOfWork(db, MemoryBus(), retention=10_000)
        checked = 0
        for i in range(count):
            rng = random.Random(seed * 1_000_003 + i)
            try:
                checked += await played.play(uow, user, rng, check_every_target)
            except AssertionError as exc:
                raise AssertionError(f"history {seed * 1_000_003 + i}: {exc}") from exc
        return count, checked


async def test_played_histories_convert_for_every_target(tmp_path):
    sessions, checked = await play_many(f"sqlite+aiosqlite:///{tmp_path / 'played.db'}", HISTORIES)
    assert sessions == HISTORIES and checked > HISTORIES  # every session asked the model at least once
