"""Versions and branches in the web app, two devices in Chromium (client_js/browser/versions_scenarios.mjs): an
edit on device 1 shows on device 2, "Previous version" on device 2 shows on device 1, a message queued during a
regenerate goes out after it on the new branch, Fork opens a new chat; the server's state is the judge."""

from __future__ import annotations

import uuid
from typing import Any

from web_support import Driver, WebServer


def test_edit_switch_regenerate_and_fork_on_two_devices(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    tag = uuid.uuid4().hex[:6]
    first, second = f"first question {tag}", f"second question {tag}"
    # Long enough (60 words at the web server's echo pace) that its answers are still streaming when device 2 sends.
    edited = f"second question, edited {tag} " + " ".join(f"word{i}" for i in range(60))
    queued = f"sent during the regenerate {tag}"
    sid = api.mutate("session.create", {"title": f"versions {tag}"})["id"]
    for text in (first, second):
        api.mutate("message.send", {"sessionId": sid, "content": text})
        idle(api, sid)

    def path() -> list[dict[str, Any]]:
        return api.query("session.get", {"sessionId": sid})["messages"]

    def check(label: str, _data: Any) -> None:
        if label == "cancelled":
            assert [m["content"] for m in path() if m["role"] == "user"] == [first, second]
        elif label == "edited":
            users = [m for m in path() if m["role"] == "user"]
            assert [m["content"] for m in users] == [first, edited]
            assert users[1]["versions"] == {"index": 1, "count": 2}
        elif label == "switched":
            assert [m["content"] for m in path() if m["role"] == "user"] == [first, edited]

    seen = browser.run(
        "versions",
        check,
        token=web_server.tokens["bob"],
        sessionId=sid,
        second=second,
        edited=edited,
        queued=queued,
    )
    assert seen["problems"] == [], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert seen["editedCount"] == "2 / 2" and seen["backCount"] == "1 / 2"
    assert seen["options"][0].startswith("Same model")
    final = idle(api, sid)["messages"]
    assert [m["content"] for m in final if m["role"] == "user"] == [first, edited, queued]
    answer = final[3]
    assert answer["role"] == "assistant" and answer["versions"] == {"index": 1, "count": 2}
    assert final[4]["parentId"] == answer["id"]  # the queued message went onto the new branch
    fork_id = seen["forkUrl"].rsplit("/", 1)[-1]
    forked = api.query("session.get", {"sessionId": fork_id})["messages"]
    assert [m["content"] for m in forked] == [first]


def idle(api: Any, sid: str) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + 60
    while True:
        snap = api.query("session.get", {"sessionId": sid})
        if snap["run"] is None and not snap["queue"]:
            return snap
        assert time.monotonic() < deadline, "the session did not settle"
        time.sleep(0.1)
