"""What the web app's tests share: the server under test, calls to it as a third client, and the driver of the
browsers. The fixtures that start them are in conftest.py: one server (fresh SQLite file, free port, the echo
model slowed so a person could type during an answer) and one Chromium for the whole package.

Browsers are Debian's ``/usr/bin/chromium`` driven by ``playwright-core`` from ``client_js`` — never a
downloaded browser. Node or Chromium missing is a failure, never a skip. The app is built by
``scripts/setup.sh`` (which does nothing when the build is current).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from testkit import CLIENT_JS, ROOT

DRIVER = CLIENT_JS / "browser" / "app_driver.mjs"
ECHO_DELAY = "0.05"  # seconds per word: a 400-word answer lasts long enough to work the queue during it
MAX_FILE_BYTES = 2_000_000  # small, so a refused upload costs little


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
        return self._open(
            urllib.request.Request(
                f"{self.url}/trpc/{path}", data=body, method="POST", headers={"Content-Type": "application/json"}
            )
        )

    def file(self, file_id: str) -> bytes:
        """``GET /files/{id}``: an uploaded file's bytes, as its owner fetches them."""
        req = urllib.request.Request(f"{self.url}/files/{urllib.parse.quote(file_id)}")
        req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.read()

    def upload(self, name: str, data: bytes) -> dict[str, Any]:
        """``POST /files`` with one part named ``file``: the stored file (id, name, mediaType, size, sha256)."""
        boundary = "chatsync-test-boundary"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        req = urllib.request.Request(
            f"{self.url}/files",
            data=body,
            method="POST",
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Authorization": f"Bearer {self.token}",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read())

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


# An MCP server every user may enable (tests/engine/mcp_test_server.py over stdio; its tools ask by default).
MCP_SERVER = "demo"


def mcp_config(tmp: Path) -> str:
    path = tmp / "mcp.json"
    script = ROOT / "tests" / "engine" / "mcp_test_server.py"
    server = {"command": [sys.executable, str(script)], "approval": "ask"}
    path.write_text(json.dumps({"servers": {MCP_SERVER: server}}))
    return str(path)


def build_app() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0 or not (ROOT / "server" / "web" / "dist" / "index.html").is_file():
        pytest.fail(f"building the web app failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def second_device(server: WebServer, user: str, name: str) -> str:
    """A token for another device of ``user``, through a sign-in link."""
    link = server.api(user).mutate("auth.createLink", {"deviceName": name})
    req = urllib.request.Request(
        server.url + "/auth/link",
        data=json.dumps({"code": link["code"], "deviceName": name}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as res:
        return str(json.loads(res.read())["token"])


def answered(server: WebServer, user: str, session_id: str, n: int) -> None:
    """Wait until the session has ``n`` answers and is idle."""
    api = server.api(user)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        snap = api.query("session.get", {"sessionId": session_id})
        done = [m for m in snap["messages"] if m["role"] == "assistant" and m["status"] == "complete"]
        if len(done) >= n and snap["session"]["status"] == "idle":
            return
        time.sleep(0.1)
    raise TimeoutError("no answer")


def answers(api: Api, session_id: str) -> list[dict[str, Any]]:
    return [m for m in api.messages(session_id) if m["role"] == "assistant"]


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """Answers as a reader sees them in the page: whitespace collapsed (the scenarios send plain words)."""
    return [" ".join(m["content"].split()) for m in messages]


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
            pytest.fail(
                f"the browser driver exited ({self.proc.poll()}):\n{err[-4000:]}\n"
                f"--- server log ---\n{self.server.log_tail()}"
            )
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
                pytest.fail(
                    f"scenario {scenario} failed in the browser:\n{msg['error']}\n"
                    f"--- server log ---\n{self.server.log_tail()}",
                    pytrace=False,
                )
            else:
                return msg["done"]
