"""Fixtures of the web app's tests (web_support.py has what they start and the helpers the tests import)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from servers import ServerProcess
from testkit import CLIENT_JS, need
from web_support import DRIVER, ECHO_DELAY, MAX_FILE_BYTES, Driver, WebServer, build_app, mcp_config


@pytest.fixture(scope="session")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    need("node", "the web app's tests need Node >= 20")
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("/usr/bin/chromium is missing (bash scripts/setup.sh --with-node installs Debian's)")
    build_app()
    tmp = tmp_path_factory.mktemp("web")
    with ServerProcess(
        tmp,
        users=(
            "alice",
            "bob",
            "carol",
            "dana",
        ),  # dana: only the empty-state test uses her, so she starts with no chats
        ECHO_DELAY=ECHO_DELAY,
        MAX_FILE_BYTES=str(MAX_FILE_BYTES),
        MCP_SERVERS=mcp_config(tmp),
        PUSH_ALLOW_INSECURE_ENDPOINTS="1",  # the push tests' push service listens on 127.0.0.1
    ) as served:
        yield WebServer(url=served.url, tokens=served.tokens, log=served.log, proc=served.proc)


@pytest.fixture(scope="session")
def browser(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    node = need("node", "the web app's tests need Node >= 20")
    err_log = tmp_path_factory.mktemp("driver") / "stderr.log"
    with err_log.open("w") as err:
        proc = subprocess.Popen(
            [node, str(DRIVER)],
            cwd=CLIENT_JS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "CHATSYNC_URL": web_server.url},
        )
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
