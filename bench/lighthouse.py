"""Lighthouse's accessibility and best-practices scores for the web app, desktop and mobile.

    .venv/bin/python bench/lighthouse.py

Starts a server with the echo model, makes a chat with markdown, a code block, a finished tool call, a pending
approval and a queued message, then audits with Lighthouse 12.2.3 (the last release that runs on Node 20) on
Debian's Chromium: the sign-in page, the chat and the Devices page, each as Lighthouse's desktop and mobile
configurations. Lighthouse is installed into bench/lighthouse/ on first use (it is not part of the app or the
tests). Prints each page's scores and the audits that did not pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, run_server
from chatsync_client import TrpcClient

HERE = os.path.join(ROOT, "bench", "lighthouse")
TOOL = '/tool calculator {{"expression": "{}"}}'  # the echo model's directive for a tool call


async def chat(url: str, token: str) -> str:
    """A chat in the states people see most: answered (markdown, code, a tool call), waiting for an approval,
    with a message queued behind it."""
    async with TrpcClient(url, token) as c:
        tools = [{"name": "calculator", "executor": "server"}]
        s = await c.mutation("session.create", {"title": "audited chat", "tools": tools})
        sid = s["id"]
        first = "Some **markdown** with `code`:\n\n```python\nprint('hello')\n```\n" + TOOL.format("6*7")
        await c.mutation("message.send", {"sessionId": sid, "content": first})
        await until_idle(c, sid)
        await c.mutation("session.update", {"sessionId": sid, "tools": [{**tools[0], "requiresApproval": True}]})
        await c.mutation("message.send", {"sessionId": sid, "content": TOOL.format("2+2")})
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "waiting in the queue"})
        return sid


async def until_idle(c: TrpcClient, sid: str) -> None:
    while (await c.query("session.get", {"sessionId": sid, "messageLimit": 1}))["session"]["status"] != "idle":
        await asyncio.sleep(0.2)


def main() -> None:
    if not os.path.isdir(os.path.join(HERE, "node_modules", "lighthouse")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True)
    with run_server(CHATSYNC_ECHO_DELAY="0.001") as server:
        sid = asyncio.run(chat(server.url, server.token))
        pages = [
            {"name": "sign-in", "path": "/", "signedIn": False},
            {"name": "chat", "path": f"/s/{sid}"},
            {"name": "devices", "path": "/devices"},
        ]
        env = {**os.environ, "CHATSYNC_URL": server.url, "CHATSYNC_TOKEN": server.token}
        env["AUDIT_PAGES"] = json.dumps(pages)
        done = subprocess.run(["node", "audit.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"audit.mjs failed:\n{done.stderr[-4000:]}")
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        scores = ", ".join(f"{k} {v}" for k, v in r["scores"].items())
        failed = "; ".join(f"{a['id']} ({a['title']})" for a in r["failed"]) or "none"
        shown = r["shown"]
        print(
            f"{r['page']:8} {r['formFactor']:7} {scores} ({r['audits']} audits); not passed: {failed}; "
            f"shown: {shown['title']!r}, conversation {shown['conversation']}, sign-in form {shown['signIn']}"
        )


if __name__ == "__main__":
    main()
