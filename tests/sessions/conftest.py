"""Session-management tests (titles, context switches): real servers, the echo model at test speed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))  # engine_helpers

from engine_helpers import FAST
from session_helpers import observe_titles


@pytest.fixture
async def engine(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """A server on SQLite with the default title mode (truncate) and a fast echo model."""
    return await server_factory(sqlite_url, users=("alice", "bob", "admin"), **FAST)


@pytest.fixture
async def model_engine(server_factory: Callable[..., Any], tmp_path: Path) -> Any:
    """The same with ``CHATSYNC_TITLE_MODE=model`` (a database of its own: a test may use both servers), its
    model-title jobs observed (``session_helpers.caught_up`` waits for them)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'model-titles.db'}"
    live = await server_factory(url, users=("alice", "bob", "admin"), title_mode="model", **FAST)
    observe_titles(live)
    return live
