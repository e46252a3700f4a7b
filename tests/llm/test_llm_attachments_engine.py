"""From stored rows to the request: uploaded files are named by build_request and read through the real Files
service by load_files (newest first, within a budget); path references stay a text line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from attachment_files import png

from chatsync_client import ChatClient
from server.engine import history
from server.engine.history import GONE, NOT_SERVED, build_request, load_files, notices
from server.engine.orchestrator import VISION_MODELS_ENV, vision_overrides
from server.llm import ModelInputs
from server.llm.capabilities import parse_overrides
from server.llm.convert import to_openai_request
from server.llm.convert.files import OVER_BUDGET
from server.settings import SettingsError, load_settings
from server.store import repo
from server.store.models import ChatSession
from server.store.models import Message as Row


def row(id: str, role: str, content: str, attachments: list[dict[str, Any]] | None = None) -> Row:
    return Row(
        id=id,
        role=role,
        content=content,
        status="complete",
        tool_calls=None,
        tool_call_id=None,
        attachments=attachments or [],
        is_error=False,
    )


SESSION = ChatSession(model="gpt-4o", defaults={}, tools=[], system_prompt=None)


def test_path_references_stay_a_line_and_uploaded_files_become_attachments():
    rows = [
        row(
            "1",
            "user",
            "look",
            [
                {"path": "/home/a/src/main.py", "relativePath": "src/main.py"},
                {"fileId": "f1", "name": "chart.png", "mediaType": "image/png", "size": 10},
            ],
        )
    ]
    request = build_request(SESSION, rows, inputs=ModelInputs(images=False, documents=False))
    (message,) = request.messages
    assert message.content == "look\n\n[Attached file: src/main.py]"
    assert [(a.file_id, a.name, a.media_type, a.data) for a in message.attachments] == [
        ("f1", "chart.png", "image/png", b"")
    ]
    assert request.options.inputs == ModelInputs(images=False, documents=False)


async def test_files_are_read_through_the_files_service(live: Any, tmp_path: Path, monkeypatch):
    image = png(20, 10)
    (tmp_path / "a.png").write_bytes(image)
    (tmp_path / "b.txt").write_text("second file\n")
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        session = await chat.create_session(title="files")
        first = await chat.upload(tmp_path / "a.png")
        second = await chat.upload(tmp_path / "b.txt")
    async with live.services.db.read() as s:
        owner = (await repo.get_session(s, session.id)).owner_id
    files = live.services.files
    rows = [
        row("1", "user", "older", [{"fileId": first.id, "name": "a.png", "mediaType": "image/png"}]),
        row("2", "assistant", "seen"),
        row(
            "3",
            "user",
            "newer",
            [
                {"fileId": second.id, "name": "b.txt", "mediaType": "text/plain"},
                {"fileId": "no-such-file", "name": "gone.pdf", "mediaType": "application/pdf"},
            ],
        ),
    ]
    request = build_request(SESSION, rows, inputs=ModelInputs(images=False, documents=False))

    cache: dict[str, bytes] = {}
    loaded = await load_files(request, lambda file_id: files.read(owner, file_id), cache)
    (a,) = loaded.messages[0].attachments
    b, gone = loaded.messages[2].attachments
    assert a.data == image and b.data == b"second file\n"
    assert gone.missing == GONE and gone.data == b""
    assert set(cache) == {first.id, second.id}
    # Another user's reader cannot see alice's files: they are gone for it, not an error.
    as_other = await load_files(request, lambda file_id: files.read("another-user", file_id))
    assert all(att.missing == GONE for m in as_other.messages for att in m.attachments)

    # The user hears about the files of the message being answered (not of older ones), in the model's words.
    assert notices(loaded) == [
        {
            "code": "attachment-not-sent",
            "fileId": "no-such-file",
            "name": "gone.pdf",
            "message": f"gone.pdf was not given to the model: {GONE}",
        }
    ]
    text = to_openai_request(loaded)["messages"][-1]["content"]
    assert text.startswith('<file name="b.txt">\nsecond file\n\n</file>\n\n[Attached file gone.pdf is not available')
    images = to_openai_request(loaded)["messages"][0]["content"]
    assert images.startswith("[Attached file a.png was not sent: this model does not take images.]")

    # Without Files to read from, and past the budget (newest messages keep their files).
    unserved = await load_files(request, None)
    assert {att.missing for m in unserved.messages for att in m.attachments} == {NOT_SERVED}
    monkeypatch.setattr(history, "LOAD_BUDGET_BYTES", len(b"second file\n"))
    squeezed = await load_files(request, lambda file_id: files.read(owner, file_id))
    assert squeezed.messages[2].attachments[0].data == b"second file\n"
    assert squeezed.messages[0].attachments[0].missing == OVER_BUDGET


def test_the_orchestrator_decides_per_provider_and_model(live: Any, monkeypatch):
    orchestrator = live.services.orchestrator
    # A provider that cannot be built (no key in the tests' environment): no decision, the step fails anyway.
    assert orchestrator.model_inputs("openai", "gpt-4o") is None
    assert orchestrator.model_inputs("echo", "echo") == ModelInputs(images=True, documents=True)
    monkeypatch.setattr(orchestrator, "vision_overrides", parse_overrides(["echo:blind*=off"]))
    assert orchestrator.model_inputs("echo", "Blind-1") == ModelInputs(images=False, documents=False)
    assert orchestrator.model_inputs("echo", "echo").images is True


def test_overrides_come_from_the_environment_and_a_bad_one_stops_start_up(monkeypatch):
    monkeypatch.setenv(VISION_MODELS_ENV, "ollama:my-llava*=on, openai:gpt-4o-mini=off")
    overrides = vision_overrides(load_settings())
    assert [(o.provider, o.pattern, o.images) for o in overrides] == [
        ("ollama", "my-llava*", True),
        ("openai", "gpt-4o-mini", False),
    ]
    monkeypatch.setenv(VISION_MODELS_ENV, "ollama:my-llava*=maybe")
    with pytest.raises(SettingsError, match="CHATSYNC_VISION_MODELS: 'ollama:my-llava\\*=maybe'"):
        vision_overrides(load_settings())
