"""The /admin page in a real browser: headless Chromium (Debian's, via playwright-core from client_js) against
a real server. It must list every user's sessions once given an admin token, show a session's detail and
event log when clicked, and render what users typed as text — a title made of HTML stays text."""

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "client_js" / "browser" / "admin_page.mjs"
HOSTILE = '<img src=x onerror="alert(1)">'


async def test_admin_page_in_chromium(live):
    node = shutil.which("node")
    if node is None or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the browser test needs node and /usr/bin/chromium (bash scripts/setup.sh --with-node)")
    async with live.client("alice") as c:
        hostile = await c.mutation("session.create", {"title": HOSTILE, "queuePaused": True})
        await c.mutation("message.enqueueMessage", {"sessionId": hostile["id"], "content": "queued for later"})
    async with live.client("bob") as c:
        await c.mutation("session.create", {"title": "bob plans", "queuePaused": True})

    proc = await asyncio.create_subprocess_exec(
        node,
        str(SCRIPT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={
            **os.environ,
            "CHATSYNC_URL": live.url,
            "CHATSYNC_ADMIN_TOKEN": live.tokens["admin"],
            "CHATSYNC_OPEN_TITLE": HOSTILE,
        },
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    seen = json.loads(out.decode().strip().splitlines()[-1])

    assert seen["beforeToken"] == 0  # nothing is shown before a token is given
    assert [(r[0], r[1]) for r in seen["rows"]] == [("bob plans", "bob"), (HOSTILE, "alice")]
    assert seen["rows"][1][3] == "1" and "queue paused" in seen["rows"][1][2]
    assert seen["injected"] == 0 and seen["dialogs"] == []  # the title stayed text
    assert "users: 3" in seen["stats"]
    assert seen["detailTitle"] == HOSTILE
    assert seen["detail"]["snapshot"]["session"]["id"] == hostile["id"]
    assert [q["content"] for q in seen["detail"]["snapshot"]["queue"]] == ["queued for later"]
    assert seen["events"] == [["1", "queue-message-added"]]
    assert seen["afterReload"] == 2
    assert seen["pageErrors"] == [] and seen["cspViolations"] == []
