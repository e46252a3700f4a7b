"""Conformance: the official ``@trpc/client`` 11.x (Node, from npm) against a real ``chatsync serve`` process.

The JavaScript suite lives in ``client_js/test/`` (``node --test``, plain ESM). This module starts one server
process on a fresh SQLite file and a free port, creates two users with ``chatsync users create`` (the second
owns the "foreign" sessions), waits for ``/healthz``, then runs the whole suite with::

    CHATSYNC_URL=http://127.0.0.1:<port> CHATSYNC_TOKEN=<user 1> CHATSYNC_TOKEN2=<user 2>

The server runs with ``CHATSYNC_MAX_QUEUE_LENGTH=5`` so the suite can fill a queue. Node missing is a failure,
never a skip. ``client_js/node_modules`` is installed with ``npm ci`` (from the committed lock file) when absent.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT_JS = ROOT / "client_js"
CHATSYNC = Path(sys.executable).parent / "chatsync"
MAX_QUEUE_LENGTH = 5
NODE_TIMEOUT_SECONDS = 240
START_TIMEOUT_SECONDS = 30


@dataclass
class RunningServer:
    url: str
    token: str
    token2: str
    log: Path
    suite_ran: bool = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH: the @trpc/client conformance suite needs Node >= 20 and npm")
    return path


def _ensure_node_modules() -> None:
    if (CLIENT_JS / "node_modules" / "@trpc" / "client" / "package.json").exists():
        return
    npm = _tool("npm")
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT_JS, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.fail(f"npm ci failed in client_js ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def _create_user(env: dict[str, str], name: str) -> str:
    done = subprocess.run([str(CHATSYNC), "users", "create", name], env=env, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        pytest.fail(f"chatsync users create {name} failed ({done.returncode}):\n{done.stderr}")
    token = done.stdout.strip()
    assert token and "\n" not in token, f"users create must print only the token, got {done.stdout!r}"
    return token


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
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
        time.sleep(0.1)
    pytest.fail(f"chatsync serve did not answer /healthz within {START_TIMEOUT_SECONDS}s:\n"
                f"{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def chatsync_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("conformance_js")
    port = _free_port()
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'db.sqlite'}",
        "CHATSYNC_PORT": str(port),
        "CHATSYNC_HOST": "127.0.0.1",
        "CHATSYNC_BUS_URL": "memory://",
        "CHATSYNC_MAX_QUEUE_LENGTH": str(MAX_QUEUE_LENGTH),
        "CHATSYNC_LOG_LEVEL": "warning",
    }
    token = _create_user(env, "conformance-1")
    token2 = _create_user(env, "conformance-2")
    log = tmp / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(CHATSYNC), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        _wait_healthy(url, proc, log)
        yield RunningServer(url=url, token=token, token2=token2, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_official_trpc_client_conformance(chatsync_server: RunningServer) -> None:
    node = _tool("node")
    _ensure_node_modules()
    env = {
        **os.environ,
        "CHATSYNC_URL": chatsync_server.url,
        "CHATSYNC_TOKEN": chatsync_server.token,
        "CHATSYNC_TOKEN2": chatsync_server.token2,
        "NODE_ENV": "test",
    }
    cmd = [
        node,
        "--test",
        "--test-reporter=spec",
        "--test-concurrency=4",  # files are mostly waiting on the server; they run as separate processes
        "--test-timeout=60000",  # a backstop: every test also sets its own timeout
        # the conformance files only: test/stores/ is the client library's suite (tests/test_client_stores_js.py)
        *sorted(str(p) for p in (CLIENT_JS / "test").glob("*.test.js")),
    ]
    try:
        done = subprocess.run(cmd, cwd=CLIENT_JS, env=env, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"node --test did not finish within {NODE_TIMEOUT_SECONDS}s:\n{exc.stdout}\n{exc.stderr}")
    chatsync_server.suite_ran = True
    output = done.stdout + ("\n" + done.stderr if done.stderr.strip() else "")
    print(output)
    if done.returncode != 0:
        server_log = chatsync_server.log.read_text(errors="replace")
        pytest.fail(f"@trpc/client conformance suite failed (node exit {done.returncode}):\n{output}\n"
                    f"--- server log (tail) ---\n{server_log[-8000:]}", pytrace=False)


def test_server_log_is_clean_after_the_suite(chatsync_server: RunningServer) -> None:
    """All that traffic (killed sockets, bad frames, bad tokens, dropped SSE streams) logs no error or traceback."""
    if not chatsync_server.suite_ran:
        pytest.fail("run this module as a whole: the log check inspects the server after the JS suite")
    lines = chatsync_server.log.read_text(errors="replace").splitlines()
    bad = [i for i, line in enumerate(lines) if " ERROR " in line or line.startswith("Traceback")]
    if bad:
        shown = "\n".join("\n".join(lines[i:i + 3]) for i in bad[:5])
        pytest.fail(f"{len(bad)} error(s) in the server log, first ones:\n{shown}", pytrace=False)
