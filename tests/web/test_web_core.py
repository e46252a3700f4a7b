"""The conversation in the web app keeps the reader's place and says what went wrong: tool calls that end each
their own way, the log following the newest message, failures with their reason and Retry, messages written
while the server is away. Scenarios live in client_js/browser/core_scenarios.mjs; the tests' own tRPC calls are
the judge of what the server holds."""

from __future__ import annotations

from typing import Any

import pytest
from web_support import Driver, WebServer


def no_problems(result: dict[str, Any]) -> None:
    assert result["problems"] == [], result["problems"]


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
