"""Titles end to end: first message, model titles, user titles, regenerate, clear."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from engine_helpers import FAST, idle, subscribe
from session_helpers import LONG, LONG_MODEL_TITLE, LONG_TITLE, caught_up, get, observe_titles, seq, titles

from chatsync_client import TrpcError
from server.domain.titles import ELLIPSIS
from server.llm import Completion, ErrorEvent
from server.llm.providers.echo import EchoProvider
from server.services.titles import TITLE_INSTRUCTION
from server.settings import SettingsError, load_settings


async def test_first_message_sets_the_title_in_its_transaction(db_url, server_factory):
    live = await server_factory(db_url, **FAST)
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        assert (s["title"], s["titleSource"]) == ("", "none")
        st = await subscribe(c, s["id"])
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("run-finished")
        snap = await idle(c, s["id"])
        assert (snap["session"]["title"], snap["session"]["titleSource"]) == (LONG_TITLE, "truncate")
        # right behind the user message's message-created, before the run starts: one transaction
        created = seq(st, lambda e: e["type"] == "message-created" and e["message"]["id"] == res["message"]["id"])
        assert seq(st, lambda e: e["type"] == "title-changed") == created + 1
        assert seq(st, lambda e: e["type"] == "run-started") == created + 2
        # later messages leave it alone: exactly one event
        await c.mutation("message.send", {"sessionId": s["id"], "content": "something else entirely"})
        await st.until_type("run-finished", 2)
        await idle(c, s["id"])
        assert titles(st) == [(LONG_TITLE, "truncate")]
        assert (await get(c, s["id"]))["title"] == LONG_TITLE


async def test_first_message_from_the_queue_sets_the_title(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        st = await subscribe(c, s["id"])
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "Größe   der\nPools ändern"})
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "second one"})
        assert (await get(c, s["id"]))["titleSource"] == "none"  # queued is not stored in the history
        await c.mutation("message.resumeQueue", {"sessionId": s["id"]})  # auto-send from the queue
        await st.until_type("run-finished", 2)
        await idle(c, s["id"])
        assert titles(st) == [("Größe der Pools ändern", "truncate")]
        sent = seq(st, lambda e: e["type"] == "queue-message-removed")
        assert seq(st, lambda e: e["type"] == "title-changed") == sent + 2  # removed, message-created, title


async def test_multibyte_first_message_is_truncated_on_code_points(engine):
    text = (
        "日本語のテキストで非常に長い最初のメッセージを書いて"
        "タイトルの切り詰めが文字単位で正しく行われることを確認します"
    )
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": text})
        session = (await idle(c, s["id"]))["session"]
        assert session["title"] == text[:50] + ELLIPSIS and session["titleSource"] == "truncate"


async def test_a_user_title_is_never_overwritten(engine, model_engine):
    for live in (engine, model_engine):
        async with live.client() as c:
            s = await c.mutation("session.create", {})
            st = await subscribe(c, s["id"])
            await c.mutation("session.setTitle", {"sessionId": s["id"], "title": "Mine"})
            await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
            await st.until_type("run-finished")
            await idle(c, s["id"])
            await caught_up(live, c, st, s["id"])
            assert titles(st) == [("Mine", "user")]
            assert ((await get(c, s["id"]))["title"], (await get(c, s["id"]))["titleSource"]) == ("Mine", "user")
            # a title given at creation is a user title too
            t = await c.mutation("session.create", {"title": "Given"})
            await c.mutation("message.send", {"sessionId": t["id"], "content": LONG})
            await idle(c, t["id"])
            await caught_up(live, c, await subscribe(c, t["id"]), t["id"])
            assert ((await get(c, t["id"]))["title"], (await get(c, t["id"]))["titleSource"]) == ("Given", "user")


async def test_system_messages_name_nothing_the_next_user_message_does(engine):
    # (steer policy: if the instructions run is still going, the user message is steered into it)
    async with engine.client() as c:
        s = await c.mutation("session.create", {"busyPolicy": "steer"})
        st = await subscribe(c, s["id"])
        run = await c.mutation("message.addInstructions", {"sessionId": s["id"], "instructions": "be brief"})
        assert run["runId"]
        assert (await get(c, s["id"]))["titleSource"] == "none"  # a system message names nothing
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": "steered in"})
        await idle(c, s["id"])
        await caught_up(engine, c, st, s["id"])
        assert titles(st) == [("steered in", "truncate")]
        assert res["status"] in ("steered", "started")


def test_title_mode_setting_is_validated():
    assert load_settings().title_mode == "truncate"
    assert load_settings(title_mode="model").title_mode == "model"
    with pytest.raises(SettingsError, match="CHATSYNC_TITLE_MODE"):
        load_settings(title_mode="llm")


async def test_model_title_after_the_first_answer(db_url, server_factory):
    model_engine = await server_factory(db_url, title_mode="model", **FAST)
    observe_titles(model_engine)
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until(lambda e: e["type"] == "title-changed" and e["source"] == "model")
        assert titles(st) == [(LONG_TITLE, "truncate"), (LONG_MODEL_TITLE, "model")]
        # the answer was not held back: its run-finished came first
        finished = seq(st, lambda e: e["type"] == "run-finished" and e["runId"] == res["runId"])
        assert seq(st, lambda e: e["type"] == "title-changed" and e["source"] == "model") > finished
        snap = await idle(c, s["id"])
        assert (snap["session"]["title"], snap["session"]["titleSource"]) == (LONG_MODEL_TITLE, "model")
        # the title request is separate: the history holds only the exchange
        assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
        # later answers ask no more
        await c.mutation("message.send", {"sessionId": s["id"], "content": "and another question please"})
        await st.until_type("run-finished", 2)
        await idle(c, s["id"])
        await caught_up(model_engine, c, st, s["id"])
        assert len(st.of("title-changed")) == 2


class GatedTitles:
    """Wraps the echo model so title requests wait for ``gate``; chat requests pass straight through."""

    def __init__(self, inner: EchoProvider) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self.failure: str | None = None

    @property
    def input_target(self) -> str:
        return self.inner.input_target

    def stream(self, request: Any) -> Any:
        return self.inner.stream(request)

    async def complete(self, request: Any) -> Any:
        if request.options.system_prompt == TITLE_INSTRUCTION:
            self.asked.set()
            await self.gate.wait()
            if self.failure == "error":
                return Completion(error=ErrorEvent(code="unavailable", message="down", retryable=True))
            if self.failure == "raise":
                raise RuntimeError("a bug in an adapter")
            if self.failure == "empty":
                return Completion(text=' "" \n', finish_reason="stop")
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def gate_titles(live: Any) -> GatedTitles:
    gated = GatedTitles(EchoProvider(delay=0.001))
    live.services.orchestrator._providers["echo"] = gated  # the process's one echo instance (a cache)
    return gated


async def test_a_slow_model_title_delays_neither_the_answer_nor_the_queue(model_engine):
    gated = gate_titles(model_engine)
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        q = await c.mutation("message.send", {"sessionId": s["id"], "content": "queued behind it"})
        assert q["status"] in ("queued", "started")
        await asyncio.wait_for(gated.asked.wait(), 10)
        # while the title request hangs, the first answer finished and the queued message was answered
        await st.until_type("run-finished", 2)
        snap = await idle(c, s["id"])
        assert [m["content"] for m in snap["messages"]] == [LONG, LONG, "queued behind it", "queued behind it"]
        assert snap["session"]["titleSource"] == "truncate"
        gated.gate.set()
        await st.until(lambda e: e["type"] == "title-changed" and e["source"] == "model")
        assert titles(st) == [(LONG_TITLE, "truncate"), (LONG_MODEL_TITLE, "model")]


async def test_a_title_changed_meanwhile_wins_over_the_model(model_engine):
    gated = gate_titles(model_engine)
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await asyncio.wait_for(gated.asked.wait(), 10)
        await c.mutation("session.setTitle", {"sessionId": s["id"], "title": "Set while it thought"})
        gated.gate.set()
        await idle(c, s["id"])
        await caught_up(model_engine, c, st, s["id"])
        assert titles(st) == [(LONG_TITLE, "truncate"), ("Set while it thought", "user")]
        assert (await get(c, s["id"]))["title"] == "Set while it thought"


@pytest.mark.parametrize("failure", ["error", "raise", "empty"])
async def test_model_failure_keeps_the_truncated_title(model_engine, failure):
    gated = gate_titles(model_engine)
    gated.failure = failure
    gated.gate.set()
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("run-finished")
        await asyncio.wait_for(gated.asked.wait(), 10)
        await idle(c, s["id"])
        await caught_up(model_engine, c, st, s["id"])
        assert titles(st) == [(LONG_TITLE, "truncate")]
        # and the session goes on as usual
        await c.mutation("message.send", {"sessionId": s["id"], "content": "next"})
        await st.until_type("run-finished", 2)


async def test_clear_title_then_the_next_message_names_the_session_again(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "first question"})
        await idle(c, s["id"])
        cleared = await c.mutation("session.clearTitle", {"sessionId": s["id"]})
        assert (cleared["title"], cleared["titleSource"]) == ("", "none")
        assert (await c.mutation("session.clearTitle", {"sessionId": s["id"]}))["titleSource"] == "none"
        await c.mutation("message.send", {"sessionId": s["id"], "content": "second question"})
        await idle(c, s["id"])
        await caught_up(engine, c, st, s["id"])
        # from the first user message, as before the clear; one event per change, none for the second clear
        assert titles(st) == [("first question", "truncate"), ("", "none"), ("first question", "truncate")]


async def test_regenerate_title_by_truncation(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"title": "Mine"})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.regenerateTitle", {"sessionId": s["id"]})
        assert err.value.code == "PRECONDITION_FAILED"  # no user message yet
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "later"})
        await st.until_type("run-finished", 2)
        # explicit request: replaces even a user title, from the first user message
        out = await c.mutation("session.regenerateTitle", {"sessionId": s["id"]})
        assert (out["title"], out["titleSource"]) == (LONG_TITLE, "truncate")
        again = await c.mutation("session.regenerateTitle", {"sessionId": s["id"], "method": "truncate"})
        assert again["title"] == LONG_TITLE
        await idle(c, s["id"])
        await caught_up(engine, c, st, s["id"])
        assert titles(st) == [(LONG_TITLE, "truncate")]  # the unchanged second one wrote nothing


async def test_regenerate_title_by_model(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"title": "Mine"})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": '"Deploy" the app: on Kubernetes, safely'})
        await idle(c, s["id"])
        out = await c.mutation("session.regenerateTitle", {"sessionId": s["id"], "method": "model"})
        assert (out["title"], out["titleSource"]) == ("Deploy the app on Kubernetes", "model")
        assert (await get(c, s["id"]))["title"] == "Deploy the app on Kubernetes"
        await caught_up(engine, c, st, s["id"])
        assert titles(st) == [("Deploy the app on Kubernetes", "model")]


async def test_regenerate_by_model_falls_back_to_truncation(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"title": "Mine"})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "Explain pools\n/fail"})
        await idle(c, s["id"])
        out = await c.mutation("session.regenerateTitle", {"sessionId": s["id"], "method": "model"})
        assert (out["title"], out["titleSource"]) == ("Explain pools /fail", "truncate")


async def test_regenerate_defaults_to_the_configured_mode(model_engine):
    async with model_engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await idle(c, s["id"])
        await c.mutation("session.setTitle", {"sessionId": s["id"], "title": "Mine"})
        out = await c.mutation("session.regenerateTitle", {"sessionId": s["id"]})
        assert (out["title"], out["titleSource"]) == (LONG_MODEL_TITLE, "model")


@pytest.mark.parametrize(
    "inp",
    [
        {"method": "llm"},
        {"method": None, "extra": 1},
        {"sessionId": ""},
    ],
)
async def test_regenerate_title_bad_input(engine, inp):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"title": "Mine"})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.regenerateTitle", {"sessionId": s["id"], **inp})
        assert err.value.code == "BAD_REQUEST"
        assert (await get(c, s["id"]))["title"] == "Mine"
