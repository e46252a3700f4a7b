"""The app's TypeScript compiles against the client library's types (client_js/src), strictly. Vite strips
types without checking them, so a renamed store or a changed wire type would otherwise only show in a
browser."""

from __future__ import annotations

import subprocess

from testkit import CLIENT_JS, need


def test_the_app_typechecks() -> None:
    node = need("node", "the web app's type check needs Node >= 20")
    done = subprocess.run(
        [node, "node_modules/typescript/bin/tsc", "-p", "app/tsconfig.json"],
        cwd=CLIENT_JS,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
