"""The TypeScript client library and its stores (``client_js/src``), built with ``tsc`` and tested under
``node --test`` (``client_js/test/stores``) against the compiled output in ``client_js/dist/lib``.

Most store tests run on an in-memory model of a session; ``live.test.js`` drives a real ``chatsync serve``
process started here on a fresh SQLite file and a free port, with the offline echo model answering slowly
enough that a socket can be killed mid-answer. Node missing is a failure, never a skip.
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
TSC = CLIENT_JS / "node_modules" / ".bin" / "tsc"
NODE_TIMEOUT_SECONDS = 240
START_TIMEOUT_SECONDS = 30


@dataclass
class RunningServer:
    url: str
    token: str
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH: the client library's tests need Node >= 20 and npm")
    return path


def _ensure_node_modules() -> None:
    if TSC.exists() and (CLIENT_JS / "node_modules" / "@trpc" / "client" / "package.json").exists():
        return
    done = subprocess.run([_tool("npm"), "ci", "--no-audit", "--no-fund"], cwd=CLIENT_JS, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"npm ci failed in client_js ({done.returncode}):\n{done.stdout}\n{done.stderr}")


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
    tmp = tmp_path_factory.mktemp("client_stores_js")
    port = _free_port()
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'db.sqlite'}",
        "CHATSYNC_PORT": str(port),
        "CHATSYNC_HOST": "127.0.0.1",
        "CHATSYNC_BUS_URL": "memory://",
        "CHATSYNC_LOG_LEVEL": "warning",
        # Slow enough that a 120-word answer is still streaming when the test kills the client's socket.
        "CHATSYNC_ECHO_DELAY": "0.02",
    }
    done = subprocess.run([str(CHATSYNC), "users", "create", "stores-js"], env=env, capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"chatsync users create failed ({done.returncode}):\n{done.stderr}")
    token = done.stdout.strip()
    log = tmp / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(CHATSYNC), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        _wait_healthy(url, proc, log)
        yield RunningServer(url=url, token=token, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def built_library() -> Path:
    """``tsc -p client_js/tsconfig.json``: type errors fail here, before any test runs."""
    _tool("node")
    _ensure_node_modules()
    done = subprocess.run([str(TSC), "-p", str(CLIENT_JS / "tsconfig.json")], cwd=CLIENT_JS, capture_output=True,
                          text=True, timeout=180)
    if done.returncode != 0:
        pytest.fail(f"tsc failed ({done.returncode}):\n{done.stdout}\n{done.stderr}", pytrace=False)
    index = CLIENT_JS / "dist" / "lib" / "index.js"
    assert index.exists(), f"tsc wrote no {index}"
    return index


def test_client_stores(built_library: Path, chatsync_server: RunningServer) -> None:
    env = {
        **os.environ,
        "CHATSYNC_STORE_TESTS": "1",
        "CHATSYNC_URL": chatsync_server.url,
        "CHATSYNC_TOKEN": chatsync_server.token,
        "NODE_ENV": "test",
    }
    cmd = [_tool("node"), "--test", "--test-reporter=spec", "--test-timeout=60000",
           str(CLIENT_JS / "test" / "stores") + os.sep]
    try:
        done = subprocess.run(cmd, cwd=CLIENT_JS, env=env, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"node --test did not finish within {NODE_TIMEOUT_SECONDS}s:\n{exc.stdout}\n{exc.stderr}")
    output = done.stdout + ("\n" + done.stderr if done.stderr.strip() else "")
    print(output)
    if done.returncode != 0:
        server_log = chatsync_server.log.read_text(errors="replace")
        pytest.fail(f"client store tests failed (node exit {done.returncode}):\n{output}\n"
                    f"--- server log (tail) ---\n{server_log[-8000:]}", pytrace=False)
    # Every file ran for real: a skipped test here would mean the guard misread the environment.
    assert "ℹ skipped 0" in output and "ℹ fail 0" in output, output


def test_the_built_library_carries_no_server_code(built_library: Path) -> None:
    """The router type is imported with `import type`: nothing of @trpc/server is loaded at run time."""
    dist = built_library.parent
    offenders = [p.relative_to(dist) for p in dist.rglob("*.js") if "@trpc/server" in p.read_text()]
    assert offenders == [], f"runtime imports of @trpc/server in {offenders}"
