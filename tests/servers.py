"""How a test starts a chatsync server: the one place (imported as ``servers``).

* :func:`start_server` — a server in the test's own event loop (``tests/conftest.py``'s ``server_factory`` fixture
  starts these): real uvicorn on a real socket, with its services at hand (``live.services``). Most tests use it.
* :class:`ServerProcess` — ``chatsync serve`` as a child process, for what only a process shows: killed with
  SIGKILL or stopped with SIGTERM and started again, replicas sharing a database, its memory, its log, or a server
  that Node or a browser drives for a whole module.

Both create their users first and answer ``url`` and ``tokens``; a :class:`ServerProcess` keeps its files, log and
(unless given a database) SQLite file in the directory it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from testkit import free_port, schema_at_head

from chatsync_client import TrpcClient
from server.app import create_app
from server.http.asgi import ChatsyncApp
from server.rpc.context import Services
from server.serve import ChatsyncServer, uvicorn_config
from server.services.auth import AuthService
from server.settings import Settings
from server.store.db import Database

START_TIMEOUT_SECONDS = 120

# --- in the test's event loop -----------------------------------------------------------------------------------


class PromptServer(ChatsyncServer):
    """``ChatsyncServer`` whose main loop notices ``should_exit`` as soon as it is set; uvicorn's looks every 0.1 s,
    on average 50 ms added to each of the hundreds of servers a run stops. The loop still ticks every 0.1 s (the
    date header), and the shutdown after it is ``ChatsyncServer``'s."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()
        else:
            self._exit.clear()

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), 0.1)
            should_exit = await self.on_tick(counter)


@dataclass
class LiveServer:
    """A running chatsync server on a real socket, in this process."""

    url: str
    settings: Settings
    app: ChatsyncApp
    server: PromptServer
    task: asyncio.Task[None]
    tokens: dict[str, str]

    @property
    def services(self) -> Services:
        return self.app.state.require_services()

    def client(self, user: str = "alice", **kw: Any) -> TrpcClient:
        return TrpcClient(self.url, self.tokens.get(user, user), **kw)

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 20)


async def start_server(
    settings: Settings,
    users: tuple[str, ...] = ("alice", "bob"),
    tokens: dict[str, str] | None = None,
    ws: str | None = None,
) -> LiveServer:
    """Migrate (``schema_at_head``), create ``users`` (``admin`` is an admin) and serve; ``ws``: another uvicorn
    WebSocket implementation (exercises the queued writer)."""
    tokens = dict(tokens or {})
    await schema_at_head(settings.database_url)
    async with Database(settings.database_url) as db:
        auth = AuthService(db)
        for name in users:
            if name not in tokens:
                _user, tokens[name] = await auth.create_user(name, admin=(name == "admin"))
    app = create_app(settings)
    extra: dict[str, Any] = {"log_level": "warning"}
    if ws is not None:
        extra["ws"] = ws
    server = PromptServer(uvicorn_config(app, settings, "127.0.0.1", settings.port, **extra))
    task = asyncio.create_task(server._serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("server exited during start-up")
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return LiveServer(f"http://127.0.0.1:{port}", settings, app, server, task, tokens)


# --- as a child process -----------------------------------------------------------------------------------------


class ServerProcess:
    """``chatsync serve`` as a child process on a free port (``start``, then ``await ready()`` or ``wait_ready()``;
    ``stop`` sends SIGTERM as an operator would, ``kill`` SIGKILL; ``start`` again serves the same database on the
    same port). ``with ServerProcess(...) as server:`` starts it, waits until it is ready, and stops it.

    ``settings`` are ``CHATSYNC_*`` variables without the prefix (``ECHO_DELAY="0.05"``); ``env`` more variables by
    their whole names, over ``base_env`` (this process's environment unless given); ``users`` are created in its
    database before it starts, as ``chatsync users create`` would (``tokens``; ``test_auth`` runs that command).
    ``command_prefix`` runs it under another command (``prlimit``); ``port_flag`` names its port with ``--port``
    instead of ``CHATSYNC_PORT``; ``cwd`` is the directory it runs in; ``executable`` another ``chatsync`` (an
    installed package's)."""

    def __init__(
        self,
        tmp: Path,
        *,
        database_url: str | None = None,
        users: Iterable[str] = (),
        name: str = "server",
        command_prefix: tuple[str, ...] = (),
        port_flag: bool = False,
        cwd: Path | None = None,
        executable: Path | None = None,
        base_env: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        **settings: str,
    ) -> None:
        self.port = free_port()
        self.cwd = cwd
        self.env = {
            **{k: v for k, v in (base_env or os.environ).items() if not (port_flag and k == "CHATSYNC_PORT")},
            "CHATSYNC_DATABASE_URL": database_url or f"sqlite+aiosqlite:///{tmp / 'db.sqlite'}",
            **({} if port_flag else {"CHATSYNC_PORT": str(self.port)}),
            "CHATSYNC_HOST": "127.0.0.1",
            "CHATSYNC_BUS_URL": "memory://",
            "CHATSYNC_LOG_LEVEL": "warning",
            "CHATSYNC_FILES_URL": str(tmp / "files"),
            **(env or {}),
            **{f"CHATSYNC_{k}": v for k, v in settings.items()},
        }
        self.log = tmp / f"{name}.log"
        port_args = ("--port", str(self.port)) if port_flag else ()
        serve = (str(executable), "serve") if executable else (sys.executable, "-m", "server.cli", "serve")
        self.command = (*command_prefix, *serve, *port_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.suite_ran = False  # set by a test that ran a whole suite against it (for checks made afterwards)
        names = tuple(users)
        self.tokens = _create_users(self.database_url, names) if names else {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def create_user(self, name: str) -> str:
        """A new user in this server's database (migrated first, as ``chatsync users create`` does); its token."""
        return _create_users(self.database_url, (name,))[name]

    @property
    def database_url(self) -> str:
        return self.env["CHATSYNC_DATABASE_URL"]

    def start(self, stderr: int | None = subprocess.STDOUT) -> ServerProcess:
        """Starts it (its output appended to ``log``; ``stderr``: a descriptor for its standard error instead)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, env=self.env, cwd=self.cwd, stdout=out, stderr=stderr, stdin=subprocess.DEVNULL
            )
        return self

    def _check_alive(self) -> None:
        assert self.proc is not None, "not started"
        if self.proc.poll() is not None:
            pytest.fail(f"chatsync serve exited with {self.proc.returncode}:\n{self.log_tail()}", pytrace=False)

    async def ready(self, timeout: float = START_TIMEOUT_SECONDS) -> dict[str, Any]:
        """Until ``/readyz`` answers 200 (the database, the bus and the migrations are ready); its report."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                self._check_alive()
                with contextlib.suppress(httpx.TransportError):
                    answer = await http.get(self.url + "/readyz")
                    if answer.status_code == 200:
                        return dict(answer.json())
                await asyncio.sleep(0.05)
        pytest.fail(f"chatsync serve was not ready within {timeout} s:\n{self.log_tail()}", pytrace=False)

    def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> dict[str, Any]:
        """:meth:`ready`, for code outside an event loop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as res:
                    if res.status == 200:
                        return dict(json.loads(res.read()))
            time.sleep(0.05)
        pytest.fail(f"chatsync serve was not ready within {timeout} s:\n{self.log_tail()}", pytrace=False)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM, as an operator would (SIGKILL if it has not exited within ``timeout``); its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    async def terminate(self, timeout: float = 30) -> int | None:
        """:meth:`stop` without blocking the event loop (the server's clients are in it)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.stop, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash; nothing is written down on the way out."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, chars: int = 8000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def __enter__(self) -> ServerProcess:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()


def _create_users(database_url: str, names: tuple[str, ...]) -> dict[str, str]:
    """Bring the database to the newest schema (``schema_at_head``) and create ``names``; their tokens. In this
    process (a ``chatsync users create`` per user would start Python again for each), on a thread of its own,
    since a test may call it from inside its event loop."""

    async def create() -> dict[str, str]:
        await schema_at_head(database_url)
        async with Database(database_url) as db:
            auth = AuthService(db)
            return {name: (await auth.create_user(name))[1] for name in names}

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, create()).result()
