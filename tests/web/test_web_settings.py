"""Session settings, devices and notifications in the web app, end to end in Chromium
(client_js/browser/settings_scenarios.mjs): what is set in "Session settings" reaches the server and the next
answer is made with it; linking a device by QR code, the live Devices page, Sign out; an upload during an outage;
who approved a tool call after a reload; first chats on a phone; a hidden tab's own notifications, a newer push
withdrawing an older one, and approving from a notification."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from devices_kit import PushService
from web_support import Api, Driver, WebServer, answered, answers, second_device


def test_settings_made_in_the_app_reach_the_server_and_the_next_answer(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    picker = {"name": "pick_color", "executor": "client", "description": "Asks the user for a colour"}
    sid = api.mutate(
        "session.create", {"title": "settings", "provider": "ollama", "model": "llama3.2", "tools": [picker]}
    )["id"]

    def check(label: str, _data: Any) -> None:
        session = api.query("session.get", {"sessionId": sid})["session"]
        assert (session["provider"], session["model"]) == ("echo", "echo-large")
        assert session["systemPrompt"] == "Answer like a pirate."
        assert session["busyPolicy"] == "steer"
        assert [(t["name"], t["executor"]) for t in session["tools"]] == [
            ("pick_color", "client"),
            ("calculator", "server"),
        ]

    seen = browser.run("session_settings", check, token=web_server.tokens["carol"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert seen["before"] == {"provider": "ollama", "model": "llama3.2"}
    assert "OLLAMA_HOST" in seen["hint"]  # the session's provider is not available here, and it says why
    assert seen["openaiDisabled"]  # no key for it on this server: offered greyed out
    assert seen["declared"] == ["pick_color (runs on a client)"]
    assert seen["modelAfterSwitch"] == "echo"  # not ollama's llama3.2
    expected = "[model echo-large; system prompt: Answer like a pirate.; tools: pick_color, calculator]"
    assert seen["answer"].endswith(expected)
    assert answers(api, sid)[-1]["content"].endswith(expected)
    assert seen["reopened"] == {"prompt": "Answer like a pirate.", "calculator": True, "model": "echo-large"}


def test_a_device_renamed_in_the_app_is_renamed_on_the_server(web_server: WebServer, browser: Driver) -> None:
    seen = browser.run("rename_device", token=web_server.tokens["carol"])
    assert seen["problems"] == [], seen["problems"]
    assert "Kitchen laptop" in [d["name"] for d in web_server.api("carol").query("auth.devices", None)]


def test_link_a_device_by_qr_code_and_the_devices_page_is_live(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    name = f"Kitchen phone {uuid.uuid4().hex[:6]}"
    other = f"Hall tablet {uuid.uuid4().hex[:6]}"
    made: dict[str, Any] = {}

    def named(device_name: str) -> list[dict[str, Any]]:
        return [d for d in api.query("auth.devices", None) if d["name"] == device_name]

    def check(label: str, _data: Any) -> Any:
        if label == "signed-in":
            assert len(named(name)) == 1  # the link carried the name: not the browser's "Chrome on Linux"
            made.update(api.mutate("auth.createLink", {"deviceName": other}))
            return {"url": made["url"], "deviceName": other}
        assert label == "cancelled" and len(named(name)) == 1  # Cancel revoked nothing
        return None

    seen = browser.run("link_qr_and_live_devices", check, token=web_server.tokens["bob"], account="bob", name=name)
    assert seen["problems"] == [], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert seen["qr"]["text"] == seen["link"]  # the QR code reads back as the link
    assert seen["linkGone"]  # a spent link is not offered any more
    assert name in seen["afterSignIn"]
    assert seen["keptAfterCancel"] == 1
    assert seen["d3Token"] is None
    assert named(name) == [] and named(other) == []  # revoked, and signed out (its link-issued token revoked)


def test_an_upload_during_an_outage_says_so_and_retries(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "upload outage"})["id"]
    seen = browser.run("upload_outage", token=web_server.tokens["carol"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert "No connection to the server" in seen["failedText"] and "Failed to fetch" not in seen["failedText"]
    assert seen["heldBack"] == "with the file"
    users = [m for m in api.messages(sid) if m["role"] == "user"]
    assert [m["content"] for m in users] == ["with the file"]
    assert [a["name"] for a in users[0]["attachments"]] == ["outage.txt"]


def test_who_approved_a_tool_call_shows_after_a_reload(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    name = f"Desk PC {uuid.uuid4().hex[:6]}"
    token = second_device(web_server, "carol", name)
    calculator = next(t for t in api.query("tool.builtins") if t["name"] == "calculator")
    sid = api.mutate("session.create", {"title": "approval kept", "tools": [{**calculator, "requiresApproval": True}]})[
        "id"
    ]
    seen = browser.run("approval_after_reload", token=token, sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert seen["live"] == "Approved on this device"
    assert seen["reloaded"] == f"Approved on {name}"
    assert seen["later"] == f"Approved on {name}"


def test_first_chats_on_a_phone(web_server: WebServer, browser: Driver) -> None:
    seen = browser.run("phone_first_chats", token=web_server.tokens["dana"])
    assert seen["problems"] == [], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert seen["emptyButtonVisible"] and not seen["sidebarButtonVisible"]  # the hint's button is on screen
    assert seen["again"] == seen["first"]  # New chat on an empty chat opens that one, no second empty chat
    assert seen["second"] != seen["first"]  # once it has a message, New chat makes another
    assert len(web_server.api("dana").query("session.list", {})["items"]) == 2
    assert seen["statusInNewChat"] == ""  # "Answer finished" was about the other chat
    assert seen["queuePanels"] == 0
    assert sorted((r["current"], r["rename"]) for r in seen["renameVisible"]) == [(False, False), (True, True)]


def test_a_message_sent_while_new_chat_is_made_goes_to_the_new_chat(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    sid = api.mutate("session.create", {"title": f"Old chat {uuid.uuid4().hex[:6]}"})["id"]
    api.mutate("message.send", {"sessionId": sid, "content": "already here"})
    answered(web_server, "bob", sid, 1)
    before = {s["id"] for s in api.query("session.list", {"limit": 200})["items"]}
    seen = browser.run("send_while_new_chat_is_made", token=web_server.tokens["bob"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert seen["urlWhileHeld"] == seen["old"]  # the new chat was not made yet when Enter was pressed
    assert seen["boxWhileHeld"] == ""  # the message left the box at once, as any send does
    new = {s["id"] for s in api.query("session.list", {"limit": 200})["items"]} - before
    assert len(new) == 1  # the second press opened the same chat, not another one
    (made,) = new
    assert seen["opened"].endswith(f"/s/{made}")
    assert [m["content"] for m in api.messages(sid) if m["role"] == "user"] == ["already here"]
    assert [m["content"] for m in api.messages(made) if m["role"] == "user"] == ["written before the chat existed"]


def test_a_hidden_tab_without_push_shows_a_notification(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": f"Hidden {uuid.uuid4().hex[:6]}"})["id"]

    def unread() -> bool:
        return next(i for i in api.query("session.list", {"limit": 200})["items"] if i["id"] == sid)["unread"]

    def check(label: str, _data: Any) -> None:
        assert label == "hidden"
        # The tab's "not visible" reaches the server at its own pace: an answer that finishes before it is seen
        # there, and marks nothing unread; the next one does.
        for n in range(1, 6):
            api.mutate("message.send", {"sessionId": sid, "content": f"while hidden {n}"})
            answered(web_server, "carol", sid, n)
            if unread():
                return
        raise AssertionError("the hidden tab never counted as not looking")

    seen = browser.run("hidden_tab_notifies", check, token=web_server.tokens["carol"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    title = api.query("session.get", {"sessionId": sid})["session"]["title"]
    assert [(n["title"], n["body"]) for n in seen["shown"]] == [(title, "An answer is ready")]
    assert not unread()  # looked at again: read everywhere


def test_a_newer_push_for_a_chat_withdraws_the_older_one(web_server: WebServer, browser: Driver) -> None:
    def note(session_id: str, kind: str, body: str) -> dict[str, Any]:
        return {"type": kind, "sessionId": session_id, "title": "Plans", "body": body, "tag": f"{session_id}:{kind}"}

    payloads = [
        note("s-2", "approval-needed", "Approve calculator?"),
        note("s-3", "answer-finished", "Elsewhere: an answer is ready"),
        note("s-2", "answer-finished", "An answer is ready"),
    ]
    seen = browser.run("newer_push_withdraws_older", token=web_server.tokens["bob"], payloads=payloads)
    assert seen["problems"] == [], seen["problems"]
    assert sorted((n["sessionId"], n["body"]) for n in seen["shown"]) == [
        ("s-2", "An answer is ready"),
        ("s-3", "Elsewhere: an answer is ready"),
    ]


@contextmanager
def push_service(vapid_public_key: str) -> Iterator[tuple[PushService, asyncio.AbstractEventLoop]]:
    """The test's push service (``devices_kit.PushService``: checks and decrypts what the server sends) on a
    loop of its own, beside the synchronous browser driver."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    receiver = PushService(lambda: vapid_public_key)
    asyncio.run_coroutine_threadsafe(receiver.start(), loop).result(10)
    try:
        yield receiver, loop
    finally:
        asyncio.run_coroutine_threadsafe(receiver.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_approve_from_a_notification(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    name = f"Lock screen {uuid.uuid4().hex[:6]}"
    phone = Api(web_server.url, second_device(web_server, "carol", name))
    calculator = next(t for t in api.query("tool.builtins") if t["name"] == "calculator")
    sid = api.mutate(
        "session.create", {"title": "From the lock screen", "tools": [{**calculator, "requiresApproval": True}]}
    )["id"]
    with push_service(api.query("push.publicKey")) as (receiver, loop):
        phone.mutate("push.subscribe", {**receiver.subscription("phone"), "events": ["approval-needed"]})
        try:
            api.mutate("message.send", {"sessionId": sid, "content": '/tool calculator {"expression": "6*7"}'})

            def approval(got: list[Any]) -> bool:
                return any(r.payload["type"] == "approval-needed" and r.payload["sessionId"] == sid for r in got)

            got = asyncio.run_coroutine_threadsafe(receiver.wait_for(approval), loop).result(60)
        finally:
            phone.mutate("push.unsubscribe", {"endpoint": receiver.subscription("phone")["endpoint"]})
        assert receiver.problems == []
    payload = next(r.payload for r in got if r.payload["type"] == "approval-needed" and r.payload["sessionId"] == sid)
    seen = browser.run("approve_from_notification", token=phone.token, payload=payload)
    assert seen["problems"] == [], seen["problems"]
    assert [n["actions"] for n in seen["shown"]] == [["approve", "deny"]]
    assert [n["body"] for n in seen["after"]] == ["Approved from this device."]
    answered(web_server, "carol", sid, 1)
    messages = api.messages(sid)
    decisions = [c["decision"] for m in messages for c in m["toolCalls"] or []]
    assert [(d["approved"], d["deviceName"]) for d in decisions] == [(True, name)]
    assert "returned: 42" in answers(api, sid)[-1]["content"]


def test_the_queue_panel_only_when_something_is_queued_and_send_now_says_it_interrupts(
    web_server: WebServer, browser: Driver
) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "Paused and empty", "queuePaused": True})["id"]

    def check(label: str, _data: Any) -> None:
        assert label == "answering"
        api.mutate("message.enqueueMessage", {"sessionId": sid, "content": "after that"})

    seen = browser.run("queue_panel_words", check, token=web_server.tokens["carol"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert seen["emptyPanels"] == 0  # not "0 message(s) queued (paused)"
    assert seen["heading"] == "1 message queued"
    assert "stops the current answer" in seen["description"]
