"""The `chatsync` command: database upgrade, users, and the owner token printed once on first start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servers import ServerProcess
from sqlalchemy import inspect

from server.store.db import Database


def run(args, env, **kw):
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], env=env, capture_output=True, text=True, timeout=60, **kw
    )


async def test_db_upgrade_creates_the_schema(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'up.db'}"
    out = run(["db", "upgrade"], {**os.environ, "CHATSYNC_DATABASE_URL": url})
    assert out.returncode == 0, out.stderr
    async with Database(url) as db, db.write_engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert {"sessions", "queued_messages", "events", "alembic_version"} <= tables


async def _serve_once(tmp_path: Path, name: str, stderr: int | None = None) -> ServerProcess:
    """``chatsync serve`` in ``tmp_path`` (its database ``db.sqlite`` there) until it is ready, then stopped."""
    server = ServerProcess(tmp_path, name=name, cwd=tmp_path, LOG_LEVEL="info")
    server.start(stderr=subprocess.STDOUT if stderr is None else stderr)
    try:
        await server.ready()
    finally:
        server.stop()
    return server


async def test_first_start_creates_the_owner_and_prints_its_token_once_on_a_terminal(tmp_path):
    import pty

    leader, follower = pty.openpty()
    try:
        await _serve_once(tmp_path, "tty", stderr=follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert b"token (shown once): cs_" in shown
    assert not (tmp_path / "chatsync-owner-token").exists()


async def test_first_start_keeps_the_owner_token_out_of_a_kept_log(tmp_path):
    """Not on a terminal (a service manager keeping the output): the token goes to a file only its owner can
    read, never into the log."""
    server = await _serve_once(tmp_path, "first")
    first = server.log.read_text()
    token_file = tmp_path / "chatsync-owner-token"
    assert str(token_file) in first and "cs_" not in first
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert token.startswith("cs_")
    token_file.unlink()
    second = (await _serve_once(tmp_path, "second")).log.read_text()
    assert "token" not in second and not token_file.exists()
    # The printed token works, and is an admin's.
    from server.services.auth import AuthService

    async with Database(server.database_url) as db:
        user = await AuthService(db).authenticate(token)
    assert user is not None and user.name == "owner" and user.role == "admin"
