"""End to end: a file uploaded to a real chatsync server and attached to a message queued while the model answers
reaches the provider's request (OpenAI's SDK over a replaying transport) as an image part once the queue sends it;
a model without vision gets a placeholder and the clients get a notice saying why."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from attachment_files import png
from llm_replay import SSE, fixture_bytes

from chatsync_client import ChatClient
from chatsync_client.view import SessionView
from server.llm.providers.openai import OpenAIProvider

pytestmark = pytest.mark.timeout(60)


class HeldProvider:
    """OpenAI's Chat Completions over a replaying transport: records each request body; the first answer waits
    until ``release`` is set, so the model is still answering while the test queues a message."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.requests = asyncio.Condition()

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        async with self.requests:
            self.bodies.append(json.loads(request.content))
            self.requests.notify_all()
        if len(self.bodies) == 1:
            await self.release.wait()
        return httpx2.Response(200, content=fixture_bytes("openai_text.sse"), headers=SSE)

    async def wait_for(self, count: int) -> None:
        async with self.requests:
            await asyncio.wait_for(self.requests.wait_for(lambda: len(self.bodies) >= count), 30)

    def install(self, live: Any) -> None:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        # The orchestrator keeps one provider per id and closes it at shutdown.
        live.services.orchestrator._providers["openai"] = OpenAIProvider(api_key="sk-test", http_client=client)


@pytest.fixture
async def served(db_url: str, server_factory: Any, tmp_path: Path) -> Any:
    """A server on SQLite keeping files in a directory, and on PostgreSQL keeping them in the database."""
    files_url = "database:" if db_url.startswith("postgresql") else str(tmp_path / "files")
    return await server_factory(db_url, files_url=files_url)


async def test_an_image_queued_while_the_model_answers_reaches_the_provider(served: Any, tmp_path: Path) -> None:
    live = served
    provider = HeldProvider()
    provider.install(live)
    image = png(320, 200, (10, 120, 240))
    (tmp_path / "chart.png").write_bytes(image)
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        session = await chat.create_session(title="charts", provider="openai", model="gpt-4o")
        await chat.send(session.id, "Hello")
        await provider.wait_for(1)  # the first answer is under way
        uploaded = await chat.upload(tmp_path / "chart.png")
        queued = await chat.enqueue(session.id, "What does this chart show?", [uploaded])
        assert [(a["name"], a["mediaType"]) for a in queued.attachments] == [("chart.png", "image/png")]
        provider.release.set()
        await provider.wait_for(2)  # auto-sent from the queue when the first answer finished

    last = provider.bodies[1]["messages"][-1]
    assert last["role"] == "user"
    kinds = [p["type"] for p in last["content"]]
    assert kinds == ["text", "image_url", "text"]
    assert last["content"][0]["text"] == "[Attached file: chart.png]"
    url = last["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == image
    assert last["content"][2] == {"type": "text", "text": "What does this chart show?"}
    # The first request, sent before the file existed, had no file in it.
    assert all(isinstance(m.get("content"), str) for m in provider.bodies[0]["messages"])


async def test_a_model_without_vision_gets_a_placeholder_and_the_user_a_notice(live: Any, tmp_path: Path) -> None:
    provider = HeldProvider()
    provider.release.set()
    provider.install(live)
    (tmp_path / "cat.png").write_bytes(png(50, 50))
    changes: asyncio.Queue[Any] = asyncio.Queue()
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        session = await chat.create_session(title="old model", provider="openai", model="gpt-3.5-turbo")
        view = SessionView(chat, session.id)
        view.add_listener(changes.put_nowait)
        await view.start()
        try:
            uploaded = await chat.upload(tmp_path / "cat.png")
            await chat.send(session.id, "Describe it", attachments=[uploaded])

            async def answer_completed() -> dict[str, Any]:
                while True:
                    event = (await changes.get()).event or {}
                    if event.get("type") == "message-completed" and event["message"]["role"] == "assistant":
                        return event

            completed = await asyncio.wait_for(answer_completed(), 30)
        finally:
            await view.close()
    content = provider.bodies[0]["messages"][-1]["content"]
    assert content == "[Attached file cat.png was not sent: this model does not take images.]\n\nDescribe it"
    notice = {
        "code": "attachment-not-sent",
        "fileId": uploaded.id,
        "name": "cat.png",
        "message": "cat.png was not given to the model: this model does not take images.",
    }
    assert completed["message"]["notices"] == [notice]
    async with ChatClient(live.url, live.tokens["alice"]) as again:  # kept: a device opening the chat later
        snapshot = await again.get_session(session.id)
    assert [m.notices and [n.wire() for n in m.notices] for m in snapshot.messages if m.role == "assistant"] == [
        [notice]
    ]
