"""Session settings and devices in the web app, end to end in Chromium (client_js/browser/settings_scenarios.mjs):
what is set in "Session settings" reaches the server and the next answer is made with it."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from web_support import Driver, WebServer, answers


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
    link = api.mutate("auth.createLink", {"deviceName": name})
    spent = httpx.post(web_server.url + "/auth/link", json={"code": link["code"], "deviceName": None})
    assert spent.status_code == 200, spent.text
    calculator = next(t for t in api.query("tool.builtins") if t["name"] == "calculator")
    sid = api.mutate("session.create", {"title": "approval kept", "tools": [{**calculator, "requiresApproval": True}]})[
        "id"
    ]
    seen = browser.run("approval_after_reload", token=spent.json()["token"], sessionId=sid)
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
