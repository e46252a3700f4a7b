"""The Python client uploads a local file and attaches it to a message, a queued message and an edit."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from chatsync_client import ChatClient, TrpcError


async def test_upload_and_attach(live: Any, tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    data = b"%PDF-1.4\n" + os.urandom(50_000)
    path.write_bytes(data)
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        uploaded = await chat.upload(path)
        assert (uploaded.name, uploaded.media_type, uploaded.size) == ("report.pdf", "application/pdf", len(data))
        assert uploaded.sha256 == hashlib.sha256(data).hexdigest()
        assert await chat.download(uploaded.id) == data
        shown = {"fileId": uploaded.id, "name": "report.pdf", "mediaType": "application/pdf", "size": len(data)}

        session = await chat.create_session(queue_paused=True)
        queued = await chat.enqueue(session.id, "read this", [uploaded])
        assert queued.attachments == [shown]
        edited = await chat.update_queued(session.id, queued.id, attachments=[uploaded.id, {"path": "/etc/hosts"}])
        assert edited.attachments == [shown, {"path": "/etc/hosts"}] and edited.content == "read this"
        other = await chat.create_session()
        sent = await chat.send(other.id, "and this", attachments=[uploaded])
        assert sent.message is not None and sent.message.attachments == [shown]

    async with ChatClient(live.url, live.tokens["bob"]) as chat:
        with pytest.raises(TrpcError) as err:
            await chat.download(uploaded.id)
        assert err.value.code == "NOT_FOUND"
