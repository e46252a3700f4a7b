"""The conversation in the web app keeps the reader's place and says what went wrong: tool calls that end each
their own way, the log following the newest message, failures with their reason and Retry, messages written
while the server is away. Scenarios live in client_js/browser/core_scenarios.mjs; the tests' own tRPC calls are
the judge of what the server holds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from servers import ServerProcess
from web_support import Api, Driver, WebServer


def no_problems(result: dict[str, Any]) -> None:
    assert result["problems"] == [], result["problems"]


def wait_idle(api: Any, session_id: str) -> None:
    """Until the session has no run in progress, read from ``session.get`` (each read waits on the server)."""
    for _ in range(600):
        if api.query("session.get", {"sessionId": session_id})["run"] is None:
            return
    raise AssertionError("the run did not end")


def tool_results(api: Any, session_id: str) -> list[tuple[str, str]]:
    """(outcome, text) of each tool result the server holds, in history order."""
    return [(m["outcome"], m["content"]) for m in api.messages(session_id) if m["role"] == "tool"]


def test_failed_denied_and_unknown_tool_calls_each_say_so(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"tools": [{"name": "calculator", "requiresApproval": True}]})["id"]
    seen = browser.run("tool_outcomes", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    stored = tool_results(api, sid)
    assert [outcome for outcome, _ in stored] == ["error", "denied", "ok", "unknown-tool"]
    assert "division by zero" in stored[0][1] and stored[1][1].startswith("The user denied this tool call.")
    assert stored[2][1] == "42"
    for shown in (*seen["live"], seen["reloaded"]):
        assert shown["calculator"] == ["Failed", "Denied", "Done"]
        assert shown["unknown"] == "Unknown tool"
        assert shown["outcomes"] == ["error", "denied", "ok", "unknown-tool"]
        # a failure does not look like a success: the card's edge differs from a done call's
        edges = shown["edges"]
        assert edges[0] != edges[2] and edges[1] != edges[2] and edges[3] != edges[2]
    assert seen["axe"] == [[], []]


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_the_conversation_follows_new_messages_unless_the_reader_scrolled_up(
    web_server: WebServer, browser: Driver, viewport: dict[str, int]
) -> None:
    seen = browser.run("follow", token=web_server.tokens["alice"], viewport=viewport)
    no_problems(seen)
    # the newest message was in view on both devices after every send and every answer
    for label in ("first sent", "queued 2", "queued 3", "answer 1", "answer 2", "answer 3", "long answered"):
        assert f"{label} 1" in seen["checks"] and f"{label} 2" in seen["checks"]
    # the reader who scrolled up stayed there while two messages arrived, and was told so
    assert seen["count"] == "2 new messages"
    assert seen["awayVisible"] is False and seen["topAfter"] == seen["topBefore"]
    assert seen["axe"] == []


def test_a_failed_answer_says_why_after_a_reload_and_retries(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    title = "flaky provider chat"
    sid = api.mutate("session.create", {"title": title})["id"]
    # sent by a client that is no browser, while no device looks at the chat: it fails once, then answers
    api.mutate("message.send", {"sessionId": sid, "content": "please answer\n/fail times=1 the provider is overloaded"})
    wait_idle(api, sid)
    seen = browser.run("failure", token=web_server.tokens["bob"], sessionId=sid, title=title)
    no_problems(seen)
    assert "failed" in seen["badgeBefore"] and "failed" not in seen["badgeAfter"]
    assert seen["shown"] == seen["afterReload"] == ["Failed: the provider is overloaded"]
    messages = api.messages(sid)
    failed, retried = [m for m in messages if m["role"] == "assistant"]
    assert failed["error"]["message"] == "the provider is overloaded" and failed["status"] == "error"
    assert retried["status"] == "complete" and retried["content"] == "please answer"
    assert [m["role"] for m in messages].count("user") == 1  # Retry sends no message of its own
    assert seen["answers"] == [{"status": "error", "text": ""}, {"status": "complete", "text": "please answer"}]
    assert seen["axe"] == []


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of its own, which the test stops and starts again (same port, same database)."""
    with ServerProcess(tmp_path, users=("dana",), ECHO_DELAY="0.01") as served:
        yield served


def test_a_message_written_while_the_server_is_down_is_sent_once_when_it_is_back(
    restartable: ServerProcess, browser: Driver
) -> None:
    api = Api(restartable.url, restartable.tokens["dana"])
    sid = api.mutate("session.create", {"title": "written offline"})["id"]
    text = "written while the server was away"

    def step(label: str, data: Any) -> None:
        if label == "ready":
            restartable.stop()
        elif label == "reloaded":
            restartable.start().wait_ready()

    seen = browser.run("offline", step, url=restartable.url, token=restartable.tokens["dana"], sessionId=sid, text=text)
    no_problems(seen)
    assert seen["box"] == "" and seen["shown"] == text  # the box emptied, the message shown at once
    assert seen["afterReload"] == {"text": text, "id": seen["sent"]}  # kept across the reload, same request id
    users = [m for m in api.messages(sid) if m["role"] == "user"]
    assert [(m["content"], m["clientRequestId"]) for m in users] == [(text, seen["sent"])]  # sent once
    assert seen["users"] == [text]
    # The banner says the app is offline and what waits, also after the reload; it goes when the server is back.
    for banner in (seen["bannerBefore"], seen["bannerAfterReload"]):
        assert banner.startswith("Offline") and "1 message waiting to be sent" in banner


def test_the_message_box_grows_and_escape_stops_the_answer(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "comfort"})["id"]
    seen = browser.run("composer_comfort", token=web_server.tokens["carol"], sessionId=sid)
    no_problems(seen)
    assert seen["six"] > seen["empty"] * 1.5  # six lines: taller than the empty box
    assert seen["six"] < seen["many"] <= seen["window"] / 3 + 4 and seen["scrolls"]  # capped, then it scrolls
    assert seen["emptyAgain"] == seen["empty"]  # and back when emptied
    assert seen["ending"] == "Stopped by you"
    answer = api.messages(sid)[-1]
    assert answer["role"] == "assistant" and answer["status"] == "interrupted" and answer["stoppedBy"]
    assert seen["axe"] == []


def test_copy_a_message_as_markdown_or_plain_text_and_see_when_it_was_written(
    web_server: WebServer, browser: Driver
) -> None:
    api = web_server.api("carol")
    sid = api.mutate("session.create", {"title": "copy me"})["id"]
    text = "Some **bold** words and a [link](https://example.com/a)."
    api.mutate("message.send", {"sessionId": sid, "content": text})
    wait_idle(api, sid)
    seen = browser.run("message_actions", token=web_server.tokens["carol"], sessionId=sid)
    no_problems(seen)
    user, answer = api.messages(sid)
    assert seen["hidden"] == "0"  # the bar waits for the pointer (or the keyboard's focus)
    assert seen["markdown"] == answer["content"] == text  # as written
    assert seen["plain"] == "Some bold words and a link."  # as read
    assert seen["userCopy"] == user["content"]
    assert seen["userActions"] == ["Copy"]
    # the time it was written, exact in the machine-readable value, spelt out in the tooltip
    assert seen["stamp"]["iso"] == datetime.fromtimestamp(answer["createdAt"] / 1000, UTC).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    assert seen["stamp"]["text"] and len(seen["stamp"]["title"]) > len(seen["stamp"]["text"])
    assert seen["axe"] == []
