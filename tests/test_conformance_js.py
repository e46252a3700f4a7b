"""Conformance: the official ``@trpc/client`` 11.x (Node, from npm) against a real ``chatsync serve`` process.

The JavaScript suite lives in ``client_js/conformance/`` (``node --test``, plain ESM). This module starts one server
process on a fresh SQLite file and a free port, creates two users with ``chatsync users create`` (the second
owns the "foreign" sessions), waits for ``/healthz``, then runs the whole suite with::

    CHATSYNC_URL=http://127.0.0.1:<port> CHATSYNC_TOKEN=<user 1> CHATSYNC_TOKEN2=<user 2>

The server runs with ``CHATSYNC_MAX_QUEUE_LENGTH=5`` so the suite can fill a queue. Node missing is a failure,
never a skip. ``client_js/node_modules`` is installed with ``npm ci`` (from the committed lock file) when absent.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from servers import ServerProcess
from testkit import CLIENT_JS, ensure_node_modules, need

MAX_QUEUE_LENGTH = 5
NODE_TIMEOUT_SECONDS = 240


@pytest.fixture(scope="module")
def chatsync_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(
        tmp_path_factory.mktemp("conformance_js"),
        users=("conformance-1", "conformance-2"),
        MAX_QUEUE_LENGTH=str(MAX_QUEUE_LENGTH),
    ) as served:
        yield served


def test_official_trpc_client_conformance(chatsync_server: ServerProcess) -> None:
    node = need("node", "the @trpc/client conformance suite needs Node >= 20")
    ensure_node_modules()
    env = {
        **os.environ,
        "CHATSYNC_URL": chatsync_server.url,
        "CHATSYNC_TOKEN": chatsync_server.tokens["conformance-1"],
        "CHATSYNC_TOKEN2": chatsync_server.tokens["conformance-2"],
        "NODE_ENV": "test",
    }
    cmd = [
        node,
        "--test",
        "--test-reporter=spec",
        "--test-concurrency=4",  # files are mostly waiting on the server; they run as separate processes
        "--test-timeout=60000",  # a backstop: every test also sets its own timeout
        *sorted(str(p) for p in (CLIENT_JS / "conformance").glob("*.test.js")),
    ]
    try:
        done = subprocess.run(cmd, cwd=CLIENT_JS, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"node --test did not finish within {NODE_TIMEOUT_SECONDS}s:\n{exc.stdout}\n{exc.stderr}")
    chatsync_server.suite_ran = True
    output = done.stdout + ("\n" + done.stderr if done.stderr.strip() else "")
    print(output)
    if done.returncode != 0:
        pytest.fail(
            f"@trpc/client conformance suite failed (node exit {done.returncode}):\n{output}\n"
            f"--- server log (tail) ---\n{chatsync_server.log_tail()}",
            pytrace=False,
        )


def test_server_log_is_clean_after_the_suite(chatsync_server: ServerProcess) -> None:
    """All that traffic (killed sockets, bad frames, bad tokens, dropped SSE streams) logs no error or traceback."""
    if not chatsync_server.suite_ran:
        pytest.fail("run this module as a whole: the log check inspects the server after the JS suite")
    lines = chatsync_server.log.read_text(errors="replace").splitlines()
    bad = [i for i, line in enumerate(lines) if " ERROR " in line or line.startswith("Traceback")]
    if bad:
        shown = "\n".join("\n".join(lines[i : i + 3]) for i in bad[:5])
        pytest.fail(f"{len(bad)} error(s) in the server log, first ones:\n{shown}", pytrace=False)
