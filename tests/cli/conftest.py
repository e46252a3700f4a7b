"""CLI tests: the real ``chatsync`` command in a subprocess against a real server in this process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cli_helpers import FAST


@pytest.fixture
async def fast(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """A server on SQLite (users alice, bob) with an instant echo model."""
    return await server_factory(sqlite_url, **FAST)
