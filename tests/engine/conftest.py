"""Engine tests: real servers with the offline echo model at test speed (helpers in ``engine_helpers``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import FAST


@pytest.fixture
async def engine(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """A server on SQLite with users alice, bob, admin and a fast echo model."""
    return await server_factory(sqlite_url, users=("alice", "bob", "admin"), **FAST)
