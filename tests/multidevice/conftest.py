"""Multi-device behaviour on real servers (SQLite and PostgreSQL) with a fast echo model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

FAST = {"echo_delay": 0.001, "sweep_seconds": 0.2, "stream_flush_seconds": 0.2}


@pytest.fixture
async def md(db_url: str, server_factory: Callable[..., Any]) -> Any:
    """A server with users alice and bob, once on SQLite and once on PostgreSQL."""
    return await server_factory(db_url, users=("alice", "bob"), **FAST)
