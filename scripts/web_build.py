"""Builds the web app (client_js/app, with the library in client_js/src) into server/web/dist when its sources
changed since the last build; refuses, saying why, when they changed and Node is not there to build them.

Used by ``scripts/setup.sh`` (``python scripts/web_build.py``) and by the package build (``build_backend.py``),
so a checkout, an sdist and a wheel all carry a build that matches their sources. A SHA-256 of every input,
kept beside the output in ``.sources-sha256``, decides: timestamps would not, since a checkout or a branch
switch sets them arbitrarily. An sdist carries the sources, the build and the stamp, so a wheel is made from
it without Node.

Standard library only: it runs inside the isolated environment of a package build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("app", "src")
SOURCE_FILES = ("package-lock.json", "vite.config.ts", "vite.config.js", "vite.config.mjs")
STAMP = ".sources-sha256"


class WebBuildError(Exception):
    """The web app cannot be built here; the message says what to do."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def source_files(client_js: Path) -> list[str]:
    """Every input of the build, as paths relative to ``client_js``, in byte order."""
    names = [name for name in SOURCE_FILES if (client_js / name).is_file()]
    for top in SOURCE_DIRS:
        for folder, _dirs, files in os.walk(client_js / top):
            for name in files:
                path = Path(folder, name)
                if path.is_file() and not path.is_symlink():
                    names.append(path.relative_to(client_js).as_posix())
    return sorted(names)


def sources_hash(client_js: Path) -> str:
    """One line ``<sha256> <path>`` per input, hashed."""
    listing = "".join(f"{_sha256(client_js / name)} {name}\n" for name in source_files(client_js))
    return hashlib.sha256(listing.encode()).hexdigest()


def is_current(root: Path = ROOT) -> bool:
    dist = root / "server" / "web" / "dist"
    stamp = dist / STAMP
    if not (dist / "index.html").is_file() or not stamp.is_file():
        return False
    client_js = root / "client_js"
    if not client_js.is_dir():
        return True  # a tree without the sources (never made by this project's sdist): the build is all there is
    return stamp.read_text().strip() == sources_hash(client_js)


def ensure_built(root: Path = ROOT) -> bool:
    """Build the web app unless the build matches its sources; True when it built."""
    if is_current(root):
        return False
    client_js = root / "client_js"
    dist = root / "server" / "web" / "dist"
    if not (client_js / "package.json").is_file():
        raise WebBuildError(f"the web app is not built ({dist} has no index.html) and its sources are not here")
    node = shutil.which("node")
    if node is None:
        raise WebBuildError(
            "the web app's sources in client_js/ changed since server/web/dist was built (or it was never built), "
            "and Node is not on PATH to build it. Install Node 20+ and build again (an unchanged sdist carries a "
            "matching build and needs no Node)."
        )
    vite = client_js / "node_modules" / "vite" / "bin" / "vite.js"
    if not vite.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise WebBuildError("building the web app needs npm (it comes with Node) to install client_js/node_modules")
        _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], client_js)
    print(f"building the web app (client_js/app -> {dist})", file=sys.stderr, flush=True)
    _run([node, str(vite), "build", "--logLevel", "warn"], client_js)
    (dist / STAMP).write_text(sources_hash(client_js) + "\n")
    return True


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd)
    if done.returncode != 0:
        raise WebBuildError(f"`{' '.join(command)}` exited with {done.returncode} in {cwd}")


def main() -> int:
    try:
        ensure_built()
    except WebBuildError as exc:
        print(f"web_build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
