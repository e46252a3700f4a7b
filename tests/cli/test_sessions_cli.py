"""``chatsync sessions ...`` run as a real command against a real server: output, JSON, exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_helpers import chatsync

from chatsync_client import ChatClient
from chatsync_client.cli_sessions import EXIT_NOT_FOUND, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE

pytestmark = pytest.mark.timeout(60)


def auth(live: Any, user: str = "alice") -> list[str]:
    return ["--url", live.url, "--token", live.tokens[user]]


async def answered_session(live: Any, title: str, question: str) -> str:
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        s = await chat.create_session(title=title)
        await chat.prompt_streaming(s.id, question, lambda _c: None)
        await chat.pause_queue(s.id)
        await chat.enqueue(s.id, "waiting in line")
        return s.id


async def test_list_and_show_as_tables_and_json(fast: Any) -> None:
    sid = await answered_session(fast, "Groceries", "apples and pears")
    listed = await chatsync("sessions", "list", *auth(fast))
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()
    assert header.split() == ["ID", "TITLE", "STATUS", "MODEL", "UPDATED"]
    assert row.startswith(sid) and "Groceries" in row and "idle" in row

    as_json = await chatsync("sessions", "list", "--json", *auth(fast))
    assert [(s["id"], s["title"]) for s in json.loads(as_json.out)] == [(sid, "Groceries")]

    shown = await chatsync("sessions", "show", sid, *auth(fast))
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == "Groceries"
    assert "Messages (2)" in lines and "Queue (1)" in lines
    assert any(line.split() == ["user", "apples", "and", "pears"] for line in lines)
    assert any(line.split() == ["assistant", "apples", "and", "pears"] for line in lines), shown.out
    assert any("waiting in line" in line for line in lines)
    assert any(line.split()[:3] == ["usage", "3", "input"] for line in lines), shown.out
    assert any("(queue paused)" in line for line in lines)

    snap = json.loads((await chatsync("sessions", "show", sid, "--json", *auth(fast))).out)
    assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
    assert [q["content"] for q in snap["queue"]] == ["waiting in line"]
    assert snap["session"]["usage"]["outputTokens"] == 3


async def test_set_title_delete_and_not_found(fast: Any) -> None:
    async with ChatClient(fast.url, fast.tokens["alice"]) as chat:
        sid = (await chat.create_session(title="old")).id
    renamed = await chatsync("sessions", "set-title", sid, "Trip to Lyon", *auth(fast))
    assert (renamed.code, renamed.out.strip()) == (0, "Trip to Lyon")
    async with ChatClient(fast.url, fast.tokens["alice"]) as chat:
        session = (await chat.get_session(sid)).session
        assert (session.title, session.title_source) == ("Trip to Lyon", "user")

    # someone else's session is not found, and stays
    theirs = await chatsync("sessions", "delete", sid, *auth(fast, "bob"))
    assert theirs.code == EXIT_NOT_FOUND and theirs.out == ""

    deleted = await chatsync("sessions", "delete", sid, "--json", *auth(fast))
    assert deleted.code == 0 and json.loads(deleted.out) == {"deleted": sid}
    gone = await chatsync("sessions", "show", sid, *auth(fast))
    assert gone.code == EXIT_NOT_FOUND
    assert gone.err.startswith("chatsync: ") and len(gone.err.strip().splitlines()) == 1
    assert gone.out == ""


async def test_url_and_token_from_the_environment(fast: Any) -> None:
    async with ChatClient(fast.url, fast.tokens["bob"]) as chat:
        await chat.create_session(title="bob's")
    r = await chatsync(
        "sessions", "list", "--json", env={"CHATSYNC_URL": fast.url, "CHATSYNC_TOKEN": fast.tokens["bob"]}
    )
    assert r.code == 0, r.err
    assert [s["title"] for s in json.loads(r.out)] == ["bob's"]
    # a flag wins over the variable
    r = await chatsync(
        "sessions",
        "list",
        "--json",
        "--token",
        fast.tokens["alice"],
        env={"CHATSYNC_URL": fast.url, "CHATSYNC_TOKEN": fast.tokens["bob"]},
    )
    assert json.loads(r.out) == []


async def test_bad_or_missing_token_and_unreachable_server(fast: Any) -> None:
    bad = await chatsync("sessions", "list", "--url", fast.url, "--token", "wrong")
    assert bad.code == EXIT_UNAUTHORIZED and "token" in bad.err and bad.out == ""
    assert len(bad.err.strip().splitlines()) == 1, bad.err
    missing = await chatsync("sessions", "list", "--url", fast.url)
    assert missing.code == EXIT_UNAUTHORIZED, missing.err
    down = await chatsync("sessions", "list", "--url", "http://127.0.0.1:9", "--token", "x")
    assert down.code == EXIT_UNREACHABLE
    assert down.err.strip() == "chatsync: cannot reach the server at http://127.0.0.1:9"


async def test_regenerate_title_from_the_first_message(fast: Any) -> None:
    """Needs the server's ``session.regenerateTitle``."""
    sid = await answered_session(fast, "custom", "planning a weekend in the mountains")
    r = await chatsync("sessions", "regenerate-title", sid, "--json", *auth(fast))
    assert r.code == 0, r.err
    session = json.loads(r.out)
    assert session["title"] == "planning a weekend in the mountains"
    assert session["titleSource"] == "truncate"
