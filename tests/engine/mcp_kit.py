"""MCP servers for the tests: the test server (``mcp_test_server.py``, the SDK's ``MCPServer``) over stdio and
over Streamable HTTP on 127.0.0.1, and the ``CHATSYNC_MCP_SERVERS`` file naming them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).with_name("mcp_test_server.py"))
# Secrets of the configuration: no client, event or log may ever show them.
ENV_SECRET = "env-s3cret-value"
TOKEN_SECRET = "bearer-s3cret-token"


@contextmanager
def http_server(log: Path) -> Iterator[str]:
    """The test server over Streamable HTTP (bearer token required); yields its URL."""
    env = dict(os.environ, MCP_TEST_TOKEN=TOKEN_SECRET, MCP_TEST_LOG=str(log))
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"the MCP test server did not start: {line!r}"
        yield f"http://127.0.0.1:{line.split()[1]}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


def stdio(log: Path, **extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, SCRIPT], "env": {"MCP_TEST_LOG": str(log), "SECRET": ENV_SECRET}} | extra


def write_config(path: Path, servers: dict[str, Any]) -> str:
    path.write_text(json.dumps({"servers": servers}))
    return str(path)


def log_lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []
