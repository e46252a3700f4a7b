"""Devices that know about each other in the web app, in Chromium: presence ("Also open on …", "… is typing…"),
a draft that follows to the other device and is cleared on both when sent, unread marks in the list, and the
service worker showing a push. Scenarios are in client_js/browser/presence_scenarios.mjs."""

from __future__ import annotations

from typing import Any

from web_support import Driver, WebServer, answered, second_device


def test_presence_drafts_and_unread_between_two_browsers(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    laptop_name = api.query("auth.me")["deviceName"]
    phone = second_device(web_server, "carol", "Phone")
    sid = api.mutate("session.create", {"title": "Plans"})["id"]
    other = api.mutate("session.create", {"title": "Elsewhere"})["id"]

    def check(label: str, data: Any) -> None:
        if label == "sent":
            assert data["alsoOpen"] == f"Also open on {laptop_name}"
            assert "hello from the laptop" in data["offered"]
            assert data["taken"] == "hello from the laptop"
            assert api.query("draft.get", {"sessionId": sid})["text"] == ""  # cleared for every device
            answered(web_server, "carol", sid, 1)
            users = [m["content"] for m in api.messages(sid) if m["role"] == "user"]
            assert users == ["hello from the laptop"]  # sent once, by the phone
        elif label == "elsewhere":
            api.mutate("message.send", {"sessionId": sid, "content": "while nobody looks"})
            answered(web_server, "carol", sid, 2)

    seen = browser.run(
        "presence_and_drafts",
        check,
        laptop=web_server.tokens["carol"],
        phone=phone,
        sessionId=sid,
        otherId=other,
        laptopName=laptop_name,
    )
    assert seen["problems"] == [], seen["problems"]
    assert seen["laptopComposer"] == "" and seen["gone"]
    assert "Plans" in seen["unreadName"] and "unread" in seen["unreadName"]
    listed = {i["id"]: i for i in api.query("session.list", {})["items"]}
    assert listed[sid]["unread"] is False  # opened on the phone: read everywhere


def test_a_push_to_the_service_worker_shows_a_notification_with_approve_and_deny(
    web_server: WebServer, browser: Driver
) -> None:
    payload = {
        "type": "approval-needed",
        "sessionId": "s-1",
        "title": "Plans",
        "body": "Approve calculator?",
        "tag": "s-1:approval-needed",
        "capability": "x.y",
        "actions": [{"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"}],
    }
    seen = browser.run("push_shows_a_notification", token=web_server.tokens["bob"], payload=payload)
    assert seen["problems"] == [], seen["problems"]
    assert seen["shown"] == [
        {"title": "Plans", "body": "Approve calculator?", "tag": "s-1:approval-needed", "actions": ["approve", "deny"]}
    ]
    # The worker keeps the app shell only: the page and its hashed assets, never the API or user data.
    assert "/" in seen["cached"] and all(p == "/" or p.startswith("/assets/") for p in seen["cached"])
