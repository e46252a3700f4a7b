"""The TypeScript client library and its stores (``client_js/src``), built with ``tsc`` and tested under
``node --test``. A module's tests sit beside it (``src/stores/follow.ts`` and ``src/stores/follow.test.js``,
shared fakes in ``src/testing/``); ``tsc`` compiles them with the library into ``client_js/dist/lib``, where
they run against the compiled modules.

Most store tests run on an in-memory model of a session; ``stores/live.test.js`` drives a real ``chatsync serve``
process started here on a fresh SQLite file and a free port, with the offline echo model answering slowly
enough that a socket can be killed mid-answer. Node missing is a failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import ServerProcess
from testkit import CLIENT_JS, ensure_node_modules, need

TSC = CLIENT_JS / "node_modules" / ".bin" / "tsc"
NODE_TIMEOUT_SECONDS = 240
MAX_FILE_BYTES = 1_000_000


@pytest.fixture(scope="module")
def chatsync_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # Slow enough that a 120-word answer is still streaming when the test kills the client's socket; a small
    # file limit so a refused upload is cheap.
    with ServerProcess(
        tmp_path_factory.mktemp("client_stores_js"),
        users=("stores-js",),
        ECHO_DELAY="0.02",
        MAX_FILE_BYTES=str(MAX_FILE_BYTES),
    ) as served:
        yield served


@pytest.fixture(scope="module")
def built_library() -> Path:
    """``tsc -p client_js/tsconfig.json``: type errors fail here, before any test runs."""
    need("node", "the client library's tests need Node >= 20")
    ensure_node_modules(TSC)
    done = subprocess.run(
        [str(TSC), "-p", str(CLIENT_JS / "tsconfig.json")], cwd=CLIENT_JS, capture_output=True, text=True, timeout=180
    )
    if done.returncode != 0:
        pytest.fail(f"tsc failed ({done.returncode}):\n{done.stdout}\n{done.stderr}", pytrace=False)
    index = CLIENT_JS / "dist" / "lib" / "index.js"
    assert index.exists(), f"tsc wrote no {index}"
    return index


def test_client_stores(built_library: Path, chatsync_server: ServerProcess) -> None:
    env = {
        **os.environ,
        "CHATSYNC_URL": chatsync_server.url,
        "CHATSYNC_TOKEN": chatsync_server.tokens["stores-js"],
        "CHATSYNC_MAX_FILE_BYTES": str(MAX_FILE_BYTES),
        "NODE_ENV": "test",
    }
    cmd = [
        need("node", "the client library's tests need Node >= 20"),
        "--test",
        "--test-reporter=spec",
        "--test-timeout=60000",
        str(built_library.parent) + os.sep,
    ]
    try:
        done = subprocess.run(cmd, cwd=CLIENT_JS, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"node --test did not finish within {NODE_TIMEOUT_SECONDS}s:\n{exc.stdout}\n{exc.stderr}")
    output = done.stdout + ("\n" + done.stderr if done.stderr.strip() else "")
    print(output)
    if done.returncode != 0:
        pytest.fail(
            f"client store tests failed (node exit {done.returncode}):\n{output}\n"
            f"--- server log (tail) ---\n{chatsync_server.log_tail()}",
            pytrace=False,
        )
    assert "ℹ skipped 0" in output and "ℹ fail 0" in output, output
    ran = {p.relative_to(built_library.parent).as_posix() for p in built_library.parent.rglob("*.test.js")}
    assert {"reducers/reducers.test.js", "stores/follow.test.js", "stores/live.test.js", "files.test.js"} <= ran


def test_the_built_library_carries_no_server_code(built_library: Path) -> None:
    """The router type is imported with `import type`: nothing of @trpc/server is loaded at run time."""
    dist = built_library.parent
    offenders = [p.relative_to(dist) for p in dist.rglob("*.js") if "@trpc/server" in p.read_text()]
    assert offenders == [], f"runtime imports of @trpc/server in {offenders}"
