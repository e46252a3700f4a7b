"""``chatsync sessions export`` and ``chatsync sessions import`` as real commands: a session written to a file
comes back as the same transcript in a new session; ``list --archived`` and ``--search`` over message texts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import chatsync

from chatsync_client import ChatClient
from chatsync_client.cli_sessions import EXIT_ERROR, EXIT_NOT_FOUND

pytestmark = pytest.mark.timeout(60)


def auth(live: Any, user: str = "alice") -> list[str]:
    return ["--url", live.url, "--token", live.tokens[user]]


def seen(messages: list[Any]) -> list[tuple[str, str, str]]:
    return [(m.role, m.content, m.status) for m in messages]


async def test_export_to_a_file_and_import_it_back(fast: Any, tmp_path: Path) -> None:
    async with ChatClient(fast.url, fast.tokens["alice"]) as chat:
        s = await chat.create_session(title="Groceries")
        await chat.prompt_streaming(s.id, "apples and a pear", lambda _c: None)
        original = (await chat.get_session(s.id)).messages
    out = tmp_path / "groceries.json"
    exported = await chatsync("sessions", "export", s.id, "-o", str(out), *auth(fast))
    assert exported.code == 0, exported.err
    assert json.loads(out.read_text())["session"]["title"] == "Groceries"

    imported = await chatsync("sessions", "import", str(out), "--json", *auth(fast, "bob"))
    assert imported.code == 0, imported.err
    copy_id = json.loads(imported.out)["id"]
    async with ChatClient(fast.url, fast.tokens["bob"]) as chat:
        assert seen((await chat.get_session(copy_id)).messages) == seen(original)
        assert [x.id for x in await chat.list_sessions(search="pear")] == [copy_id]

    md = await chatsync("sessions", "export", s.id, "--format", "markdown", *auth(fast))
    assert md.code == 0 and md.out.startswith("# Groceries\n") and "apples and a pear" in md.out

    missing = await chatsync("sessions", "import", str(tmp_path / "nope.json"), *auth(fast))
    assert missing.code == EXIT_ERROR and "cannot read" in missing.err
    (tmp_path / "bad.json").write_text("{}")
    bad = await chatsync("sessions", "import", str(tmp_path / "bad.json"), *auth(fast))
    assert bad.code == EXIT_ERROR and "BAD_REQUEST" in bad.err
    gone = await chatsync("sessions", "export", "no-such-session", *auth(fast))
    assert gone.code == EXIT_NOT_FOUND


async def test_list_archived_sessions_apart(fast: Any) -> None:
    async with ChatClient(fast.url, fast.tokens["alice"]) as chat:
        kept = await chat.create_session(title="kept")
        old = await chat.create_session(title="old")
        await chat.trpc.mutation("session.update", {"sessionId": old.id, "archived": True})
    main = await chatsync("sessions", "list", "--json", *auth(fast))
    archived = await chatsync("sessions", "list", "--archived", "--json", *auth(fast))
    assert [s["id"] for s in json.loads(main.out)] == [kept.id]
    assert [s["id"] for s in json.loads(archived.out)] == [old.id]
