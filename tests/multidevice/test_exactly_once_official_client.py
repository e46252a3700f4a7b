"""The official @trpc/client loses a reply with its socket after the server committed an enqueue, and the
call is repeated with the same clientRequestId: one queued message, one event — on PostgreSQL here (the
@trpc/client conformance suite runs the same file on SQLite)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from testkit import create_user, free_port, start_process, wait_ready

ROOT = Path(__file__).resolve().parents[2]


async def test_official_client_on_postgres(pg_url, tmp_path):
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": pg_url,
        "CHATSYNC_PORT": str(free_port()),
        "CHATSYNC_LOG_LEVEL": "warning",
        "CHATSYNC_TEST_LOG": str(tmp_path / "server.log"),
    }
    tokens = [create_user(env, "one"), create_user(env, "two")]
    proc = start_process(env)
    try:
        url = f"http://127.0.0.1:{env['CHATSYNC_PORT']}"
        await wait_ready(url, proc)
        node_env = {**os.environ, "CHATSYNC_URL": url, "CHATSYNC_TOKEN": tokens[0], "CHATSYNC_TOKEN2": tokens[1]}
        done = subprocess.run(
            ["node", "--test", "--test-reporter=spec", "test/exactly-once.test.js"],
            cwd=ROOT / "client_js",
            env=node_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        proc.terminate()
        proc.wait(30)
