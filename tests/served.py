"""A real ``chatsync serve`` process for the suites that drive it from Node (the @trpc/client conformance
suite, the client library's stores, the web app): a fresh SQLite file, a free port, users made with the CLI.
Node, npm or the server missing is a failure, never a skip."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from testkit import free_port

ROOT = Path(__file__).resolve().parent.parent
CLIENT_JS = ROOT / "client_js"
CHATSYNC = Path(sys.executable).parent / "chatsync"
START_TIMEOUT_SECONDS = 30


def need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"`{tool}` is not on PATH: {why} (bash scripts/setup.sh --with-node installs what is missing)")
    return path


def ensure_node_modules(*required: Path) -> None:
    """``npm ci`` in client_js when ``@trpc/client`` (or any of ``required``) is missing."""
    wanted = [CLIENT_JS / "node_modules" / "@trpc" / "client" / "package.json", *required]
    if all(p.exists() for p in wanted):
        return
    done = subprocess.run(
        [need("npm", "client_js needs npm"), "ci", "--no-audit", "--no-fund"],
        cwd=CLIENT_JS,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci failed in client_js ({done.returncode}):\n{done.stdout}\n{done.stderr}")


@dataclass
class Served:
    url: str
    tokens: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes]
    suite_ran: bool = False  # set by a test that ran a whole suite against it (for checks made afterwards)

    def log_tail(self, chars: int = 8000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _create_user(env: dict[str, str], name: str) -> str:
    done = subprocess.run([str(CHATSYNC), "users", "create", name], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"chatsync users create {name} failed ({done.returncode}):\n{done.stderr}")
    token = done.stdout.strip()
    assert token and "\n" not in token, f"users create must print only the token, got {done.stdout!r}"
    return token


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"chatsync serve exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as res:
                if res.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    pytest.fail(
        f"chatsync serve did not answer /healthz within {START_TIMEOUT_SECONDS}s:\n{log.read_text(errors='replace')}"
    )


@contextlib.contextmanager
def serve(
    tmp: Path, users: tuple[str, ...], *, command_prefix: tuple[str, ...] = (), **settings: str
) -> Iterator[Served]:
    """``chatsync serve`` on ``tmp/db.sqlite`` with ``users`` created first; ``settings`` are ``CHATSYNC_*``
    variables (``ECHO_DELAY="0.05"``); ``command_prefix`` runs the server under another command (``prlimit``)."""
    port = free_port()
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'db.sqlite'}",
        "CHATSYNC_PORT": str(port),
        "CHATSYNC_HOST": "127.0.0.1",
        "CHATSYNC_BUS_URL": "memory://",
        "CHATSYNC_LOG_LEVEL": "warning",
        **{f"CHATSYNC_{k}": v for k, v in settings.items()},
    }
    tokens = {name: _create_user(env, name) for name in users}
    log = tmp / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command_prefix, str(CHATSYNC), "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_healthy(url, proc, log)
        yield Served(url=url, tokens=tokens, log=log, proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
