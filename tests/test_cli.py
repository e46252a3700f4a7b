"""The `chatsync` command: database upgrade, users, and the owner token printed once on first start."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import httpx
from sqlalchemy import inspect

from server.store.db import Database
from testkit import free_port


def run(args, env, **kw):
    return subprocess.run([sys.executable, "-m", "server.cli", *args], env=env, capture_output=True, text=True,
                          timeout=60, **kw)


async def test_db_upgrade_creates_the_schema(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'up.db'}"
    out = run(["db", "upgrade"], {**os.environ, "CHATSYNC_DATABASE_URL": url})
    assert out.returncode == 0, out.stderr
    async with Database(url) as db, db.write_engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert {"sessions", "queued_messages", "events", "alembic_version"} <= tables


async def _serve_once(env) -> str:
    with open(env["LOG"], "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve"], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
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


async def test_first_start_creates_the_owner_and_prints_its_token_once(tmp_path):
    env = {**os.environ, "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'own.db'}",
           "CHATSYNC_PORT": str(free_port()), "LOG": str(tmp_path / "first.log")}
    first = await _serve_once(env)
    lines = [line for line in first.splitlines() if "token (shown once)" in line]
    assert len(lines) == 1
    token = lines[0].rsplit(" ", 1)[1]
    assert token.startswith("cs_")
    second = await _serve_once({**env, "LOG": str(tmp_path / "second.log")})
    assert "token" not in second
    # The printed token works, and is an admin's.
    from server.services.auth import AuthService

    async with Database(env["CHATSYNC_DATABASE_URL"]) as db:
        user = await AuthService(db).authenticate(token)
    assert user is not None and user.name == "owner" and user.role == "admin"
