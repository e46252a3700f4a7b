"""A message's wire JSON built without the wire model (``repo.message_json``, what a send and a step's start emit)
is the model's own JSON, key for key and in order, for every shape of message."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from server.store import repo
from server.store.models import Message
from server.store.run_rows import MessageRow

pytestmark = pytest.mark.fast

WHEN = datetime(2026, 11, 26, 20, 0, 0, 123456, tzinfo=UTC)


def row(**fields: Any) -> MessageRow:
    base: dict[str, Any] = {
        "id": "m2",
        "session_id": "s",
        "ordinal": 2,
        "parent_id": "m1",
        "role": "user",
        "content": "hi",
        "created_at": WHEN,
    }
    return MessageRow(**(base | fields))


SHAPES = [
    row(),
    row(parent_id=None),
    row(role="assistant", content="", status="streaming", run_id="r"),
    row(client_request_id="c", run_id="r"),
    row(role="tool", tool_call_id="t", outcome="error", is_error=True),
    row(role="assistant", status="complete", finish_reason="stop", usage={"inputTokens": 1, "outputTokens": 2}),
    row(attachments=[{"fileId": "f", "name": "a.png", "mediaType": "image/png", "size": 3}]),
    row(role="assistant", tool_calls=[{"id": "c1", "name": "calc", "arguments": "{}"}]),
    row(role="assistant", notices=[{"code": "attachment-not-sent", "fileId": "f", "name": "a", "message": "no"}]),
    row(role="assistant", status="error", error={"code": "PROVIDER_ERROR", "message": "x", "retryable": False}),
]


@pytest.mark.parametrize("message", SHAPES)
@pytest.mark.parametrize("versions", [None, {}, {"m1": ["m0", "m2"]}, {None: ["m2"]}, {"m1": ["other"]}], ids=repr)
def test_message_json_is_the_wire_models_json(message: MessageRow, versions: Any) -> None:
    expected = repo.message_wire(message, versions).wire()
    got = repo.message_json(message, versions)
    assert got == expected
    assert list(got) == list(expected)


def test_an_orm_message_too() -> None:
    orm = Message(
        id="m2",
        session_id="s",
        ordinal=2,
        parent_id=None,
        role="user",
        content="hi",
        created_at=WHEN,
        attachments=[],
        status="complete",
    )
    assert repo.message_json(orm, {None: ["m2"]}) == repo.message_wire(orm, {None: ["m2"]}).wire()
