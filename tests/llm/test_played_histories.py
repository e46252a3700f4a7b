"""Histories the server can really store, played out through the engine's state transitions (``played.py``),
convert to a valid request for every target: OpenAI, OpenAI-compatible, the strict (Mistral-style) template
profile, Anthropic, Gemini and Ollama. The test plays 4,000 histories (``CHATSYNC_PLAYED_HISTORIES`` sets another
count; ``bench/played_histories.py`` runs 100,000), on one process per core: on a two-core machine with the rest of
the suite running beside it, 10,000 took three minutes of both cores, the largest single part of a run."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
from concurrent.futures import ProcessPoolExecutor

import played
import pytest
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

HISTORIES = int(os.environ.get("CHATSYNC_PLAYED_HISTORIES", "4000"))
BRANCHING = 0.5  # see played.play: how often a played session forks into two continuations


def check_every_target(request: ChatRequest) -> None:
    check_openai(to_openai_request(request, OPENAI)["messages"], compatible=False, mistral_ids=False)
    check_openai(to_openai_request(request, COMPATIBLE)["messages"], compatible=True, mistral_ids=False)
    check_openai(to_openai_request(request, MISTRAL)["messages"], compatible=True, mistral_ids=True)
    check_anthropic(to_anthropic_request(request))
    check_google(to_google_request(request))
    check_ollama(to_ollama_request(request)["messages"])


async def play_many(url: str, count: int, seed: int = 0) -> tuple[int, int]:
    """Play trees of sessions until ``count`` histories are done; returns (histories, requests checked). A
    failure names the tree's seed, which replays it."""
    async with Database(url) as db:
        await migrate.upgrade(db)
        user, _token = await AuthService(db).create_user(f"player-{seed}")
        uow = UnitOfWork(db, MemoryBus(), retention=10_000)
        histories = checked = 0
        tree = 0
        while histories < count:
            tree_seed = seed * 1_000_003 + tree
            try:
                played_here, checked_here = await played.play(
                    uow, user, random.Random(tree_seed), check_every_target, branching=BRANCHING
                )
            except AssertionError as exc:
                raise AssertionError(f"history tree {tree_seed}: {exc}") from exc
            histories, checked, tree = histories + played_here, checked + checked_here, tree + 1
        return histories, checked


def _play_in_process(directory: str, count: int, seed: int) -> tuple[int, int]:
    return asyncio.run(play_many(f"sqlite+aiosqlite:///{directory}/played-{seed}.db", count, seed))


def play_on_every_core(directory: str, count: int, seed: int = 0, workers: int | None = None) -> tuple[int, int]:
    """``play_many`` split over one process per core (each with its own SQLite file and seeds)."""
    workers = workers or os.cpu_count() or 1
    share = -(-count // workers)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(
            pool.map(
                _play_in_process, [directory] * workers, [share] * workers, [seed * workers + i for i in range(workers)]
            )
        )
    return sum(r[0] for r in results), sum(r[1] for r in results)


@pytest.mark.timeout(900)  # 4,000 histories: about 40 s on two free cores
def test_played_histories_convert_for_every_target(tmp_path):
    histories, checked = play_on_every_core(str(tmp_path), HISTORIES)
    assert histories >= HISTORIES and checked >= histories  # every history ends by asking the model
