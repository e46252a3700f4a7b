"""The package, as an operator gets it: ``python -m build`` makes an sdist and a wheel that carry the migrations
and the built web app, and the wheel, installed into a new virtual environment on a machine without Node,
starts (migrating a fresh database) and serves the app at ``/``, which a browser opens and signs in to.

Node is hidden from every build and from the server: the checkout's web build is made current first (as
``scripts/setup.sh`` does), and the package build must then need no Node. The new environment gets the wheel
with ``--no-deps`` and borrows its dependencies from the environment running the tests (a ``.pth`` file naming
its site-packages), so the test downloads nothing; ``pip check`` then confirms that what the wheel declares is
what it was run with. Chromium (through ``client_js``'s playwright-core) and Node drive the browser only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from servers import ServerProcess
from testkit import CLIENT_JS, ROOT, need

pytestmark = pytest.mark.timeout(300)

START_TIMEOUT_SECONDS = 60
# The build backend runs in this environment (the dev extras install setuptools), not in a new one that pip fills
# from the index for every build: the same hooks, without the downloads.
BUILD_OPTIONS = ("--no-isolation",)


def without_node() -> dict[str, str]:
    """This process's environment with no Node on PATH, and nothing pointing Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not os.path.exists(os.path.join(d, "node"))
    )
    assert shutil.which("node", path=env["PATH"]) is None
    return env


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=240, **kwargs)


@dataclass
class Built:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    need("node", "the web app is built with Node before the package build")
    current = run([sys.executable, str(ROOT / "scripts" / "web_build.py")], cwd=ROOT)
    assert current.returncode == 0, current.stderr
    out = tmp_path_factory.mktemp("dist")
    done = run([sys.executable, "-m", "build", *BUILD_OPTIONS, "--outdir", str(out), str(ROOT)], env=without_node())
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    (sdist,) = out.glob("chatsync-*.tar.gz")
    (wheel,) = out.glob("chatsync-*.whl")
    return Built(sdist, wheel)


def test_the_sdist_and_the_wheel_carry_the_migrations_and_the_web_app(built: Built) -> None:
    wheel = set(zipfile.ZipFile(built.wheel).namelist())
    revisions = sorted(p.name for p in (ROOT / "server" / "store" / "migrations" / "versions").glob("*.py"))
    assert revisions
    for name in ("env.py", "script.py.mako", *(f"versions/{r}" for r in revisions)):
        assert f"server/store/migrations/{name}" in wheel
    dist = ROOT / "server" / "web" / "dist"
    built_files = {p.relative_to(ROOT).as_posix() for p in dist.rglob("*") if p.is_file()}
    assert "server/web/dist/index.html" in built_files
    assert any(f.startswith("server/web/dist/assets/") for f in built_files)
    assert built_files <= wheel
    # The terminal clients come in the same wheel, with their own marker for type checkers.
    assert {"chatsync_client/__init__.py", "chatsync_client/py.typed", "chatsync_client/tui/app.py"} <= wheel

    with tarfile.open(built.sdist) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        names = {n.removeprefix(top + "/") for n in sdist.getnames()}
    # What a wheel is made from without Node: the build, its stamp, the app's sources and the build backend.
    assert built_files | {"server/web/dist/.sources-sha256"} <= names
    assert {"client_js/app/index.html", "client_js/package-lock.json", "client_js/vite.config.ts"} <= names
    assert {"scripts/build_backend.py", "scripts/web_build.py", "server/store/migrations/env.py"} <= names


def test_a_wheel_is_refused_when_the_apps_sources_changed_and_node_is_missing(built: Built, tmp_path: Path) -> None:
    with tarfile.open(built.sdist) as sdist:
        sdist.extractall(tmp_path, filter="data")
    (source,) = tmp_path.glob("chatsync-*")
    with (source / "client_js" / "app" / "styles.css").open("a") as css:
        css.write("\n/* changed after the build */\n")
    done = run(
        [sys.executable, "-m", "build", *BUILD_OPTIONS, "--wheel", "--outdir", str(tmp_path / "out"), str(source)],
        env=without_node(),
    )
    assert done.returncode != 0
    assert "sources in client_js/ changed" in done.stderr + done.stdout
    assert "Node is not on PATH" in done.stderr + done.stdout
    assert not list((tmp_path / "out").glob("*.whl"))


def test_the_installed_wheel_serves_the_app_without_node(built: Built, tmp_path: Path) -> None:
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("/usr/bin/chromium is missing (bash scripts/setup.sh --with-node installs Debian's)")
    node = need("node", "the browser is driven from Node (playwright-core)")
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(built.wheel)]
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # Only now the dependencies become visible (an earlier .pth would show pip the checkout's own install).
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    Path(site, "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    checked = run([sys.executable, "-m", "pip", "--python", str(python), "check"])
    assert checked.returncode == 0, checked.stdout + checked.stderr

    env = without_node()
    where = run([str(python), "-c", "import server.http.web as w; print(w.DIST)"], env=env, cwd=tmp_path)
    assert where.stdout.strip() == str(Path(site, "server", "web", "dist")), where.stdout + where.stderr

    workdir = tmp_path / "run"
    workdir.mkdir()
    server = ServerProcess(
        tmp_path,
        database_url=f"sqlite+aiosqlite:///{workdir / 'chatsync.db'}",
        base_env=env,
        cwd=workdir,
        executable=venv / "bin" / "chatsync",
    )
    url, log = server.url, server.log
    server.start()
    try:
        ready = server.wait_ready(START_TIMEOUT_SECONDS)
        assert ready["migrations"]["state"] == "head", ready
        # stderr is a log, not a terminal: the first start leaves the owner's token in a file of its own.
        token = (workdir / "chatsync-owner-token").read_text().strip()
        page = run(
            [node, str(CLIENT_JS / "browser" / "installed_app.mjs")],
            cwd=CLIENT_JS,
            env={**os.environ, "CHATSYNC_URL": url, "CHATSYNC_TOKEN": token},
        )
        assert page.returncode == 0, f"{page.stdout}\n{page.stderr}\n--- server log ---\n{log.read_text()}"
        seen = json.loads(page.stdout.strip().splitlines()[-1])
        assert seen["heading"] == "chatsync"
        assert seen["connection"] in ("connected", "resumed")
        assert seen["problems"] == []
    finally:
        server.stop()
