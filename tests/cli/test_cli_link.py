"""``chatsync link`` names the address the server really listens on (a port given on its command line, not the
configured default), or the one given with ``--url``; the device that spends the link gets its ``--device``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servers import ServerProcess


def chatsync(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # No CHATSYNC_PORT: the configured port is the default 8787, which the server below does not use.
    base = {k: v for k, v in os.environ.items() if k not in ("CHATSYNC_PORT", "CHATSYNC_PUBLIC_URL")}
    return {
        **base,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'link.db'}",
        "CHATSYNC_HOST": "127.0.0.1",
    }


@pytest.fixture
def running(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``chatsync serve --port P`` (a port only its command line names); yields its URL."""
    with ServerProcess(tmp_path, env=env, port_flag=True, cwd=tmp_path) as server:
        yield server.url


def exchange(url: str, code: str, browser_name: str) -> dict[str, object]:
    answer = httpx.post(url + "/auth/link", json={"code": code, "deviceName": browser_name})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_link_names_the_port_the_server_runs_on_and_the_device_gets_its_name(env, running):
    out = chatsync(env, "link", "--device", "kitchen tablet", "--no-qr")
    assert out.returncode == 0, out.stderr
    link = out.stdout.splitlines()[0]
    assert link.startswith(running + "/link#"), (link, running)
    signed_in = exchange(running, link.split("#", 1)[1], "Chrome on Linux")
    devices = httpx.get(
        running + "/trpc/auth.devices", headers={"Authorization": f"Bearer {signed_in['token']}"}
    ).json()["result"]["data"]
    assert [d["name"] for d in devices if d["current"]] == ["kitchen tablet"]  # not what the browser offered


def test_url_names_another_address(env, running):
    out = chatsync(env, "link", "--url", "https://chat.example.org/", "--no-qr")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("https://chat.example.org/link#")
    bad = chatsync(env, "link", "--url", "chat.example.org")
    assert bad.returncode == 2 and "http:// or https://" in bad.stderr


def test_a_stopped_server_is_not_named(env, tmp_path):
    with ServerProcess(tmp_path, env=env, port_flag=True, cwd=tmp_path):
        pass  # it ran, and stopped
    out = chatsync(env, "link", "--no-qr")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("http://127.0.0.1:8787/link#")  # the configured address, nothing else known
