"""Every reply has exactly the shape its handler declares: a tour of the procedures on a live server checks each
reply (and each event the tour causes) against the JSON schema of the declared output type, the one the
TypeScript types are generated from. A key the type does not name, a missing key, or a value of another type
fails, so the generated types cannot drift from what the services build."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import TypeAdapter

from chatsync_client import TrpcClient
from scripts import typegen
from server.api import build_router
from server.domain import events

PROCEDURES = build_router().procedures

# Not on the tour: they need what a test server cannot give (a push service, a capability sent in a notification).
NOT_TOURED = {"push.subscribe", "push.decide"}


def _schema(tp: Any) -> dict[str, Any]:
    return TypeAdapter(tp).json_schema(mode="serialization", by_alias=True)


def problems(value: Any, schema: dict[str, Any], defs: dict[str, Any], where: str = "") -> list[str]:
    """How ``value`` departs from ``schema``; objects with named properties allow no other keys."""
    if "$ref" in schema:
        return problems(value, defs[schema["$ref"].rsplit("/", 1)[-1]], defs, where)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            tried = [problems(value, s, defs, where) for s in schema[key]]
            return [] if any(not t for t in tried) else min(tried, key=len)
    if "const" in schema:
        return [] if value == schema["const"] else [f"{where}: {value!r} is not {schema['const']!r}"]
    if "enum" in schema:
        return [] if value in schema["enum"] else [f"{where}: {value!r} not in {schema['enum']}"]
    kind = schema.get("type")
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    if kind is None:
        return []
    if not checks[kind](value):
        return [f"{where}: {value!r} is not {kind}"]
    if kind == "array":
        return [
            p for i, item in enumerate(value) for p in problems(item, schema.get("items", {}), defs, f"{where}[{i}]")
        ]
    if kind != "object":
        return []
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return [p for k, v in value.items() for p in problems(v, extra, defs, f"{where}.{k}")]
        return []
    found = [f"{where}.{k}: not in the type" for k in value if k not in props]
    found += [f"{where}.{k}: missing" for k in schema.get("required", ()) if k not in value]
    for k, v in value.items():
        if k in props:
            found += problems(v, props[k], defs, f"{where}.{k}")
    return found


def check(value: Any, tp: Any) -> list[str]:
    schema = _schema(tp)
    return problems(value, schema, schema.pop("$defs", {}), "")


def check_event(data: dict[str, Any], fields_of: dict[str, Any]) -> list[str]:
    """An event: its ``type`` names its fields; ``sessionId`` is on every one."""
    body = dict(data)
    type_ = body.pop("type")
    if type_ not in fields_of:
        return [f"unknown event type {type_!r}"]
    if not isinstance(body.get("sessionId"), str):
        return [f"{type_}: no sessionId"]
    fields = fields_of[type_]
    if "sessionId" not in _schema(fields).get("properties", {}):
        body.pop("sessionId")
    return [f"{type_}{p}" for p in check(body, fields)]


def check_item(path: str, item: tuple[str | None, Any]) -> list[str]:
    """A subscription's item: an event of the log or of the feed (tracked), ``resync-required``, or the type the
    handler declares."""
    tracked_id, data = item
    if path in ("session.events", "session.feed"):
        if tracked_id is None:
            return check(data, events.ResyncRequired)
        return check_event(data, events.EVENT_FIELDS if path == "session.events" else events.FEED_EVENT_FIELDS)
    return check(data, typegen.output_type(PROCEDURES[path].handler))


class Tour:
    def __init__(self, client: TrpcClient) -> None:
        self.client = client
        self.checked: set[str] = set()

    async def call(self, path: str, inp: Any = None) -> Any:
        proc = PROCEDURES[path]
        if proc.kind == "query":
            out = await self.client.query(path, inp)
        else:
            out = await self.client.mutation(path, inp)
        found = check(out, typegen.output_type(proc.handler))
        assert not found, (path, found, out)
        self.checked.add(path)
        return out

    async def first_item(self, path: str, inp: Any = None) -> Any:
        sub = await self.client.subscribe(path, inp)
        try:
            item = await sub.next(10)
        finally:
            await sub.close()
        found = check_item(path, item)
        assert not found, (path, found, item)
        self.checked.add(path)
        return item

    async def settled(self, sid: str, *, until: str = "idle") -> dict[str, Any]:
        """``session.get`` once the session's status is ``until`` (the run it started has ended or is waiting)."""
        for _ in range(500):
            snap = await self.call("session.get", {"sessionId": sid})
            if snap["session"]["status"] == until:
                return snap
            await asyncio.sleep(0.02)
        raise AssertionError(f"session {sid} never became {until}")


async def test_every_reply_has_the_shape_its_handler_declares(live):
    async with live.client("alice") as c:
        tour = Tour(c)
        tool = {"name": "lookup", "executor": "client", "requiresApproval": True}
        s = await tour.call("session.create", {"title": "tour", "queuePaused": True, "tools": [tool]})
        sid = s["id"]
        base = {"sessionId": sid}
        # Everything the tour makes the session log, checked at the end (streaming previews too).
        events_sub = await c.subscribe("session.events", {**base, "lastEventId": str(s["lastSeq"])})
        feed_sub = await c.subscribe("session.feed", {"lastEventId": "0"})

        q1 = await tour.call("message.enqueueMessage", {**base, "content": "one"})
        q2 = await tour.call("message.enqueueMessage", {**base, "content": "two"})
        await tour.call("message.getQueuedMessages", base)
        await tour.call("message.updateQueuedMessage", {**base, "messageId": q1["id"], "content": "uno"})
        await tour.call("message.moveQueuedMessage", {**base, "messageId": q2["id"], "toIndex": 0})
        assert (await tour.call("message.dequeueMessage", base))["id"] == q2["id"]
        await tour.call("message.removeQueuedMessage", {**base, "messageId": q1["id"]})
        await tour.call("message.pauseQueue", base)
        await tour.call("message.clearQueue", base)
        assert await tour.call("message.dequeueMessage", base) is None

        # A run that waits for an approval, then for the client's tool output: session.get's run is typed too.
        sent = await tour.call("message.send", {**base, "content": "look it up\n/tool lookup {}"})
        assert sent["status"] == "started"
        snap = await tour.settled(sid, until="requires-action")
        assert snap["run"] is not None and snap["run"]["pendingApprovals"]
        call_id = snap["run"]["pendingApprovals"][0]["callId"]
        await tour.call("tool.approve", {**base, "callId": call_id, "approved": True})
        out = {"callId": call_id, "output": "found it"}
        await tour.call("tool.submitOutputs", {**base, "toolOutputs": [out]})
        await tour.settled(sid)

        first = await tour.call("message.send", {**base, "content": "hello there"})
        await tour.settled(sid)
        await tour.call("message.list", base)
        await tour.call("message.addInstructions", {**base, "instructions": "be brief", "respond": False})
        await tour.call("message.resumeQueue", base)
        assert (await tour.call("run.abort", base)) == {"aborted": False}
        await tour.call("run.regenerate", base)
        await tour.settled(sid)
        user_id = first["message"]["id"]
        await tour.call("message.edit", {**base, "messageId": user_id, "content": "hello again"})
        await tour.settled(sid)
        await tour.call("session.switchBranch", {**base, "messageId": user_id})
        await tour.call("message.send", {**base, "content": "cut short\n/length after=1"})
        await tour.settled(sid)
        await tour.call("run.continue", base)
        await tour.settled(sid)
        await tour.call("message.send", {**base, "content": "/fail nope"})
        await tour.settled(sid, until="idle")
        q3 = await tour.call("message.enqueueMessage", {**base, "content": "now"})
        await tour.call("message.sendQueuedNow", {**base, "messageId": q3["id"], "mode": "next"})
        await tour.settled(sid)
        await tour.call("session.fork", {**base, "messageId": user_id})

        await tour.call("session.setTitle", {**base, "title": "mine"})
        await tour.call("session.clearTitle", base)
        await tour.call("session.regenerateTitle", {**base, "method": "truncate"})
        await tour.call("session.switchContext", {**base, "directory": "/work", "agent": "coder"})
        await tour.call("session.update", {**base, "model": "m2", "pinned": True})
        await tour.call("session.list", {})
        await tour.call("session.markRead", base)

        await tour.call("auth.me")
        link = await tour.call("auth.createLink", {"deviceName": "phone"})
        await tour.call("auth.links")
        await tour.call("auth.revokeLink", {"linkId": link["id"]})
        spent = await live.services.links.exchange((await tour.call("auth.createLink"))["code"], "tablet")
        await tour.call("auth.devices")
        await tour.call("auth.renameDevice", {"deviceId": spent["deviceId"], "name": "old tablet"})
        await tour.call("auth.revokeDevice", {"deviceId": spent["deviceId"]})
        await tour.first_item("auth.watchDevices")
        await tour.call("provider.list")
        await tour.call("tool.builtins")
        await tour.call("mcp.servers")

        await tour.call("presence.update", {**base, "visible": True, "typing": True})
        draft = await tour.call("draft.get", base)
        saved = await tour.call("draft.save", {**base, "text": "half typed", "baseVersion": draft["version"]})
        await tour.call("draft.clear", {**base, "baseVersion": saved["draft"]["version"]})
        await tour.first_item("presence.watch", base)
        await tour.call("presence.leave", base)
        await tour.call("push.publicKey")
        await tour.call("push.subscriptions")
        await tour.call("push.unsubscribe", {"endpoint": "https://push.example.com/x"})

        await tour.call("session.delete", base)
        # The log and the feed: every event up to the session's deletion (it ends the subscription).
        seen_types = set()
        for sub, path in ((events_sub, "session.events"), (feed_sub, "session.feed")):
            while True:
                try:
                    item = await sub.next(10)
                except (StopAsyncIteration, TimeoutError):
                    break
                found = check_item(path, item)
                assert not found, (path, found, item)
                seen_types.add(item[1]["type"])
                tour.checked.add(path)
                if path == "session.events" and item[1]["type"] == "session-deleted":
                    break
                if path == "session.feed" and item[1]["type"] == "session-deleted" and item[1]["sessionId"] == sid:
                    break
            await sub.close()
        assert {"run-failed", "tool-approval-resolved", "tool-call-result", "session-updated"} <= seen_types

    left = set(PROCEDURES) - tour.checked - NOT_TOURED
    assert not left, f"procedures the tour did not check: {sorted(left)}"


def test_the_checker_refuses_a_key_the_type_does_not_name_a_missing_one_and_a_wrong_type():
    aborted = typegen.output_type(PROCEDURES["run.abort"].handler)
    assert check({"aborted": True}, aborted) == []
    assert check({"aborted": True, "extra": 1}, aborted) == [".extra: not in the type"]
    assert check({}, aborted) == [".aborted: missing"]
    assert check({"aborted": "yes"}, aborted) == [".aborted: 'yes' is not boolean"]
