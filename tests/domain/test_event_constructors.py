"""The event constructors are the one place events are made: each type of the union has exactly one, and what
it builds has the fields its typed dict (``EVENT_FIELDS``, from which the TypeScript type is generated) promises
clients."""

from __future__ import annotations

import inspect
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from server.domain import events
from server.domain.events import DURABLE_EVENT_TYPES, EPHEMERAL_EVENT_TYPES, Event, EventEnvelope
from server.domain.models import Message, QueuedMessage

pytestmark = pytest.mark.fast

QUEUED = QueuedMessage(id="queue-1", content="hi", attachments=[], enqueued_at=1)
MESSAGE = Message(id="m1", session_id="s1", role="user", content="hi", attachments=[], status="complete", created_at=1)

# One call of every constructor of a session event.
CALLS: dict[str, Any] = {
    "queue_message_added": lambda: events.queue_message_added(QUEUED),
    "queue_message_removed": lambda: events.queue_message_removed("queue-1", "sent"),
    "queue_cleared": events.queue_cleared,
    "queue_message_updated": lambda: events.queue_message_updated(QUEUED),
    "queue_reordered": lambda: events.queue_reordered(["queue-2", "queue-1"]),
    "queue_paused": events.queue_paused,
    "queue_resumed": events.queue_resumed,
    "message_created": lambda: events.message_created(MESSAGE),
    "message_completed": lambda: events.message_completed(MESSAGE),
    "message_continued": lambda: events.message_continued(MESSAGE),
    "branch_changed": lambda: events.branch_changed("m0", [MESSAGE]),
    "run_resumed": lambda: events.run_resumed("r1", "m1"),
    "run_started": lambda: events.run_started("r1", "queue", "req-1"),
    "run_finished": lambda: events.run_finished("r1", "stop", {"inputTokens": 1, "outputTokens": 2}),
    "run_failed": lambda: events.run_failed("r1", {"code": "PROVIDER_ERROR", "message": "x", "retryable": True}),
    "run_aborted": lambda: events.run_aborted("r1"),
    "tool_call_ready": lambda: events.tool_call_ready("c1", "search", "{}", "client", True),
    "tool_approval_requested": lambda: events.tool_approval_requested("c1"),
    "tool_approval_resolved": lambda: events.tool_approval_resolved("c1", False, {"userId": "u", "userName": "a"}, 1),
    "tool_call_result": lambda: events.tool_call_result("c1", "out", "ok"),
    "session_updated": lambda: events.session_updated({"id": "s1", "status": "idle"}),
    "title_changed": lambda: events.title_changed("Hello", "truncate"),
    "session_deleted": events.session_deleted,
    "text_delta": lambda: events.text_delta("s1", "m1", 5, "lo"),
    "stream_snapshot": lambda: events.stream_snapshot("s1", "m1", 5, "hello"),
    "tool_call_start": lambda: events.tool_call_start("s1", "m1", "c1", "search", 0),
    "tool_call_delta": lambda: events.tool_call_delta("s1", "m1", "c1", 2, '{"'),
    "tool_call_progress": lambda: events.tool_call_progress("s1", "c1", 1, 4, "a quarter done"),
}


def _constructors() -> set[str]:
    """Public functions of ``domain.events`` that make a session event."""
    return {
        name
        for name, fn in inspect.getmembers(events, inspect.isfunction)
        if fn.__module__ == events.__name__
        and not name.startswith("_")
        and fn.__annotations__.get("return") in ("Event", "EventEnvelope")
    }


def _promised(type_: str) -> tuple[set[str], set[str]]:
    """The fields the typed dict of ``type_`` requires, and all it names (``sessionId`` and ``type`` aside)."""
    schema = TypeAdapter(events.EVENT_FIELDS[type_]).json_schema(mode="serialization")
    return set(schema.get("required", ())), set(schema.get("properties", {}))


def _client_body(made: Event | EventEnvelope) -> dict[str, Any]:
    env = made if isinstance(made, EventEnvelope) else EventEnvelope.build("s1", 1, made.type, made.fields)
    body: dict[str, Any] = orjson.loads(env.json)
    return body


def test_every_constructor_is_exercised_here():
    assert _constructors() == set(CALLS)


def test_each_event_type_has_exactly_one_constructor():
    made = [_client_body(call())["type"] for call in CALLS.values()]
    assert sorted(made) == sorted(DURABLE_EVENT_TYPES | EPHEMERAL_EVENT_TYPES)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_fields_are_those_clients_are_promised(name):
    body = _client_body(CALLS[name]())
    assert body.pop("sessionId") == "s1"
    type_ = body.pop("type")
    required, named = _promised(type_)
    assert required <= set(body) <= named, type_


def test_streaming_previews_carry_their_position_for_delivery():
    delta = events.text_delta("s1", "m1", 5, "lo")
    assert (delta.seq, delta.message_id, delta.offset) == (None, "m1", 5)
    # A tool call's offset counts characters of its arguments, not of the message text a snapshot covers.
    assert events.tool_call_delta("s1", "m1", "c1", 2, "x").offset is None
