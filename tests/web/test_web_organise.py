"""Finding and keeping chats in the web app, and code in answers, on two devices of one user with the server as
the judge: search (titles and message texts) that follows a rename made elsewhere, pins and archive, export and
import, code blocks (Copy, the language, highlighting loaded on demand, settled blocks left alone while an answer
streams), the tab's title, the new-chat shortcut and the image preview. Scenarios are in
client_js/browser/organise_scenarios.mjs."""

from __future__ import annotations

import json
import sqlite3
import struct
import time
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

from web_support import Api, Driver, WebServer

CODE = (
    "Some code:\n\n```python\ndef greet(name):\n    return 'hello ' + name  # "
    + "a comment long enough to need scrolling sideways " * 4
    + "\n```\n\nDone."
)


def no_problems(result: dict[str, Any]) -> None:
    assert result["problems"] == [], result["problems"]


def answered(api: Api, session_id: str, text: str) -> None:
    """Send ``text`` and wait until the echo model's answer is complete on the server."""
    api.mutate("message.send", {"sessionId": session_id, "content": text})
    deadline = time.monotonic() + 60
    while True:
        snap = api.query("session.get", {"sessionId": session_id})
        done = [m for m in snap["messages"] if m["role"] == "assistant" and m["status"] == "complete"]
        if snap["session"]["status"] == "idle" and done:
            return
        assert time.monotonic() < deadline, "the answer did not finish"
        time.sleep(0.1)


def transcript(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(m["role"], m["content"], m["status"], m.get("toolCalls")) for m in messages]


def png(width: int = 24, height: int = 16) -> bytes:
    """A real PNG: a solid orange rectangle."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xf5\x9e\x0b" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_search_finds_message_text_and_follows_a_rename_on_the_other_device(
    web_server: WebServer, browser: Driver
) -> None:
    api = web_server.api("alice")
    garden = api.mutate("session.create", {"title": "Garden plans"})["id"]
    answered(api, garden, "the tomato seedlings need repotting")
    other = api.mutate("session.create", {"title": "Other things"})["id"]

    def step(label: str, data: dict[str, Any]) -> None:
        if label == "renamed":
            assert api.query("session.get", {"sessionId": garden})["session"]["title"] == "Greenhouse"
            found = api.query("session.list", {"search": "seedlings"})["items"]
            assert [s["id"] for s in found] == [garden]

    seen = browser.run("search", step, token=web_server.tokens["alice"])
    no_problems(seen)
    assert seen["focused"] is True  # Ctrl+K
    assert seen["axe"] == []
    assert sorted(seen["both"]) == ["Greenhouse", "Seedlings schedule"]
    assert api.query("session.get", {"sessionId": other})["session"]["title"] == "Seedlings schedule"
    assert "Today" in seen["groups"]


def test_chats_are_grouped_by_the_day_they_were_started(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    local_noon = datetime.now().astimezone().replace(hour=12, minute=0, second=0, microsecond=0)
    ages = {"Started today": None, "Started yesterday": 1, "Started three days ago": 3, "Started in the spring": 60}
    made = {title: api.mutate("session.create", {"title": title})["id"] for title in ages}
    # The server takes a session's start from its own clock: move three of them back, in its database.
    with sqlite3.connect(web_server.log.parent / "db.sqlite", timeout=30) as db:
        for title, days in ages.items():
            if days is not None:
                when = (local_noon - timedelta(days=days)).astimezone(UTC)
                (stored,) = db.execute("SELECT created_at FROM sessions WHERE id = ?", (made[title],)).fetchone()
                sep = " " if " " in stored else "T"
                db.execute("UPDATE sessions SET created_at = ? WHERE id = ?", (when.isoformat(sep), made[title]))
    seen = browser.run("groups", token=web_server.tokens["bob"], titles=list(ages))
    no_problems(seen)
    assert seen["where"] == {
        "Started today": "Today",
        "Started yesterday": "Yesterday",
        "Started three days ago": "Previous 7 days",
        "Started in the spring": "Older",
    }
    order = ["Pinned", "Today", "Yesterday", "Previous 7 days", "Older"]
    assert seen["headings"] == [h for h in order if h in seen["headings"]]


def test_pin_on_one_device_moves_the_chat_on_the_other(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    sid = api.mutate("session.create", {"title": "Pin me"})["id"]
    api.mutate("session.create", {"title": "Newer than the pinned one"})

    def session() -> dict[str, Any]:
        return api.query("session.get", {"sessionId": sid})["session"]

    def step(label: str, data: dict[str, Any]) -> None:
        if label == "pinned":
            assert session()["pinned"] is True
            assert api.query("session.list", {})["items"][0]["id"] == sid
        elif label == "unpinned":
            assert session()["pinned"] is False
        elif label == "archived":
            assert session()["archived"] is True
            assert sid not in [s["id"] for s in api.query("session.list", {})["items"]]
        elif label == "restored":
            assert session()["archived"] is False

    seen = browser.run("pin", step, token=web_server.tokens["bob"])
    no_problems(seen)
    assert seen["firstOnOther"] == "Pin me"  # first in the list, above newer chats
    assert seen["axe"] == [] and seen["axeArchived"] == []
    assert seen["pressed"] == "true"


def test_export_then_import_gives_the_same_transcript(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "Exported chat"})["id"]
    answered(api, sid, CODE)
    answered(api, sid, "and a second question")

    def step(label: str, data: dict[str, Any]) -> None:
        if label == "imported":
            assert data["importedId"] != sid
            original = api.messages(sid)
            copy = api.messages(data["importedId"])
            assert transcript(copy) == transcript(original) and len(copy) == 4
            assert api.query("session.get", {"sessionId": data["importedId"]})["session"]["title"] == "Exported chat"

    seen = browser.run("exportImport", step, token=web_server.tokens["carol"])
    no_problems(seen)
    assert seen["json"]["name"] == "Exported chat.json" and seen["markdown"]["name"] == "Exported chat.md"
    export = json.loads(seen["json"]["text"])
    assert export["format"] == "chatsync.session"
    assert [m["content"] for m in export["messages"]] == [m["content"] for m in api.messages(sid)]
    assert seen["markdown"]["text"].startswith("# Exported chat\n") and "```python" in seen["markdown"]["text"]
    assert seen["shown"] == ["user", "assistant", "user", "assistant"]
    assert seen["codeShown"] == 1  # in the answer: what the user typed is shown as typed
    assert seen["announced"] == "Imported “Exported chat”"
    assert seen["axe"] == []


def test_code_blocks_copy_and_are_highlighted_once_loaded(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    plain = api.mutate("session.create", {"title": "Plain chat"})["id"]
    answered(api, plain, "nothing but words")
    code = api.mutate("session.create", {"title": "Code chat"})["id"]
    answered(api, code, CODE)
    stream = api.mutate("session.create", {"title": "Streaming code"})["id"]
    # 10 s of answer: the highlighter loads while it streams, also on a busy host
    words = " ".join(f"w{i}" for i in range(200))
    stream_text = f"```js\nconst a = 1;\n```\n\n{words}"

    seen = browser.run(
        "codeBlock",
        token=web_server.tokens["carol"],
        plainId=plain,
        codeId=code,
        streamId=stream,
        streamText=stream_text,
    )
    for scheme in ("light", "dark"):
        shown = seen[scheme]
        no_problems(shown)
        assert shown["loadedBeforeCode"] == 0  # a chat without code never loads the highlighter
        assert shown["chunks"] == 1
        assert shown["label"] == "python" and "def" in shown["keywords"] and "return" in shown["keywords"]
        code_text = CODE.split("```python\n")[1].split("\n```")[0]
        assert shown["copied"] == code_text
        assert shown["scrolls"] == "auto" and shown["wide"] is True
        assert shown["axe"] == []
    no_problems(seen["streaming"])
    assert seen["streaming"]["kept"] is True and seen["streaming"]["stillStreaming"] == 1
    answer = [m for m in api.messages(stream) if m["role"] == "assistant"][-1]
    assert answer["content"] == stream_text and answer["status"] == "complete"


def test_tab_title_new_chat_shortcut_and_image_preview(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "Tab title"})["id"]
    image = api.upload("square.png", png())
    api.mutate("message.send", {"sessionId": sid, "content": "look", "attachments": [{"fileId": image["id"]}]})

    def step(label: str, data: dict[str, Any]) -> None:
        if label == "opened":
            api.mutate("session.setTitle", {"sessionId": sid, "title": "Renamed tab"})

    before = {s["id"] for s in api.query("session.list", {"limit": 200})["items"]}
    seen = browser.run("comfort", step, token=web_server.tokens["carol"], sessionId=sid)
    no_problems(seen)
    assert seen["titled"] == "Tab title – chatsync" and seen["renamed"] == "Renamed tab – chatsync"
    assert seen["big"] == 24 and seen["axe"] == [] and seen["focusBack"] is True
    assert seen["newId"] not in before
    assert seen["newTitle"] == "New chat – chatsync" and seen["composerFocused"] is True
    assert api.query("session.get", {"sessionId": seen["newId"]})["session"]["title"] == ""
