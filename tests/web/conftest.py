"""The web app against a real ``chatsync serve`` process: one server (fresh SQLite file, free port, the echo
model slowed so a person could type during an answer) and one Chromium for the whole package.

Browsers are Debian's ``/usr/bin/chromium`` driven by ``playwright-core`` from ``client_js`` — never a
downloaded browser. Node or Chromium missing is a failure, never a skip. The app is built by
``scripts/setup.sh`` (which does nothing when the build is current).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_JS = ROOT / "client_js"
CHATSYNC = Path(sys.executable).parent / "chatsync"
DRIVER = CLIENT_JS / "browser" / "app_driver.mjs"
ECHO_DELAY = "0.05"  # seconds per word: a 400-word answer lasts long enough to work the queue during it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"`{tool}` is not on PATH: the web app's tests need Node >= 20 (bash scripts/setup.sh)")
    return path


@dataclass
class Api:
    """Plain tRPC calls over HTTP, as any client may make them: the tests' own view of the server."""

    url: str
    token: str

    def _open(self, req: urllib.request.Request) -> Any:
        req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return json.loads(res.read())["result"]["data"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{req.full_url}: {exc.code} {exc.read().decode(errors='replace')}") from exc

    def query(self, path: str, input: dict[str, Any] | None = None) -> Any:
        q = "?input=" + urllib.parse.quote(json.dumps(input)) if input is not None else ""
        return self._open(urllib.request.Request(f"{self.url}/trpc/{path}{q}"))

    def mutate(self, path: str, input: dict[str, Any] | None = None) -> Any:
        body = json.dumps(input if input is not None else None).encode()
        return self._open(urllib.request.Request(f"{self.url}/trpc/{path}", data=body, method="POST",
                                                 headers={"Content-Type": "application/json"}))

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        return self.query("session.get", {"sessionId": session_id})["messages"]


@dataclass
class WebServer:
    url: str
    tokens: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes]

    def api(self, user: str = "alice") -> Api:
        return Api(self.url, self.tokens[user])

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


def _build_app() -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0 or not (ROOT / "server" / "web" / "dist" / "index.html").is_file():
        pytest.fail(f"building the web app failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    need("node")
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("/usr/bin/chromium is missing (bash scripts/setup.sh --with-node installs Debian's)")
    _build_app()
    tmp = tmp_path_factory.mktemp("web")
    port = free_port()
    env = {**os.environ, "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'db.sqlite'}",
           "CHATSYNC_PORT": str(port), "CHATSYNC_HOST": "127.0.0.1", "CHATSYNC_BUS_URL": "memory://",
           "CHATSYNC_ECHO_DELAY": ECHO_DELAY, "CHATSYNC_LOG_LEVEL": "warning"}
    tokens = {}
    for name in ("alice", "bob", "carol"):
        done = subprocess.run([str(CHATSYNC), "users", "create", name], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        tokens[name] = done.stdout.strip()
    log = tmp / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(CHATSYNC), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"chatsync serve exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"chatsync serve did not start:\n{log.read_text(errors='replace')}")
                time.sleep(0.05)
        yield WebServer(url=url, tokens=tokens, log=log, proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


Checkpoint = Callable[[str, Any], Any]


@dataclass
class Driver:
    """The node process holding the browser; runs one scenario at a time (``app_scenarios.mjs``)."""

    proc: subprocess.Popen[str]
    server: WebServer
    stderr: Path

    def _line(self) -> dict[str, Any]:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.proc.wait(timeout=10)
            err = self.stderr.read_text(errors="replace")
            pytest.fail(f"the browser driver exited ({self.proc.poll()}):\n{err[-4000:]}\n"
                        f"--- server log ---\n{self.server.log_tail()}")
        return json.loads(line)

    def run(self, scenario: str, on_checkpoint: Checkpoint | None = None, **params: Any) -> Any:
        """Runs a scenario; at each checkpoint calls ``on_checkpoint(label, data)`` (assertions go there)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"run": scenario, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            msg = self._line()
            if "checkpoint" in msg:
                try:
                    answer = on_checkpoint(msg["checkpoint"], msg["data"]) if on_checkpoint else None
                except BaseException as exc:
                    self.proc.stdin.write(json.dumps({"abort": repr(exc)}) + "\n")
                    self.proc.stdin.flush()
                    self._line()  # the scenario's error, after it closed its browser contexts
                    raise
                self.proc.stdin.write(json.dumps({"continue": answer}) + "\n")
                self.proc.stdin.flush()
            elif "error" in msg:
                pytest.fail(f"scenario {scenario} failed in the browser:\n{msg['error']}\n"
                            f"--- server log ---\n{self.server.log_tail()}", pytrace=False)
            else:
                return msg["done"]


@pytest.fixture(scope="session")
def browser(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    node = need("node")
    err_log = tmp_path_factory.mktemp("driver") / "stderr.log"
    with err_log.open("w") as err:
        proc = subprocess.Popen([node, str(DRIVER)], cwd=CLIENT_JS, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True, env={**os.environ, "CHATSYNC_URL": web_server.url})
    try:
        yield Driver(proc, web_server, err_log)
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout:
            proc.stdout.close()
