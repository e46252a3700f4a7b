"""The `chatsync` command: database upgrade, users, and the owner token printed once on first start."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import httpx
from sqlalchemy import inspect
from testkit import free_port

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


async def _serve_once(env, cwd=None, stderr=None) -> str:
    with open(env["LOG"], "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve"],
            env=env,
            stdout=log,
            stderr=stderr if stderr is not None else subprocess.STDOUT,
            cwd=cwd,
        )
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(300):
                try:
                    if (await http.get(f"http://127.0.0.1:{env['CHATSYNC_PORT']}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    with open(env["LOG"]) as f:
        return f.read()


async def test_first_start_creates_the_owner_and_prints_its_token_once_on_a_terminal(tmp_path):
    import pty

    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'tty.db'}",
        "CHATSYNC_PORT": str(free_port()),
        "LOG": str(tmp_path / "tty.log"),
    }
    leader, follower = pty.openpty()
    try:
        await _serve_once(env, cwd=tmp_path, stderr=follower)
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
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'own.db'}",
        "CHATSYNC_PORT": str(free_port()),
        "LOG": str(tmp_path / "first.log"),
    }
    first = await _serve_once(env, cwd=tmp_path)
    token_file = tmp_path / "chatsync-owner-token"
    assert str(token_file) in first and "cs_" not in first
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert token.startswith("cs_")
    token_file.unlink()
    second = await _serve_once({**env, "LOG": str(tmp_path / "second.log")}, cwd=tmp_path)
    assert "token" not in second and not token_file.exists()
    # The printed token works, and is an admin's.
    from server.services.auth import AuthService

    async with Database(env["CHATSYNC_DATABASE_URL"]) as db:
        user = await AuthService(db).authenticate(token)
    assert user is not None and user.name == "owner" and user.role == "admin"
