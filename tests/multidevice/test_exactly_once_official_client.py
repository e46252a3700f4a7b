"""The official @trpc/client loses a reply with its socket after the server committed an enqueue, and the
call is repeated with the same clientRequestId: one queued message, one event — on PostgreSQL here (the
@trpc/client conformance suite runs the same file on SQLite)."""

from __future__ import annotations

import os
import subprocess

from servers import ServerProcess
from testkit import CLIENT_JS


async def test_official_client_on_postgres(pg_url, tmp_path):
    server = ServerProcess(tmp_path, database_url=pg_url, users=("one", "two"))
    server.start()
    try:
        await server.ready()
        tokens = server.tokens
        node_env = {
            **os.environ,
            "CHATSYNC_URL": server.url,
            "CHATSYNC_TOKEN": tokens["one"],
            "CHATSYNC_TOKEN2": tokens["two"],
        }
        done = subprocess.run(
            ["node", "--test", "--test-reporter=spec", "conformance/exactly-once.test.js"],
            cwd=CLIENT_JS,
            env=node_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        await server.terminate()
