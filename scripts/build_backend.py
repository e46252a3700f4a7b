"""The package's build backend (PEP 517, ``[build-system]`` in pyproject.toml): setuptools, with the web app
brought up to date first (``web_build.py``), so every sdist and wheel carries a build of the app that matches
its sources and ``chatsync serve`` serves it at ``/`` from an installed wheel, with no Node on that machine.

Editable installs (``pip install -e``, as ``scripts/setup.sh`` does) serve the checkout's own build, which
setup.sh keeps current; they build nothing here.
"""

from __future__ import annotations

from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  (every other hook, unchanged)
from web_build import WebBuildError, ensure_built


def _web_app() -> None:
    try:
        ensure_built()
    except WebBuildError as exc:
        raise SystemExit(f"chatsync build: {exc}") from None


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    _web_app()
    return build_meta.build_sdist(sdist_directory, config_settings)


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    _web_app()
    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)
