"""Client-library tests: real servers with the offline echo model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Words stream every 10 ms: long enough to cut a connection mid-answer, short enough for a fast suite.
PACED = {"echo_delay": 0.01, "sweep_seconds": 0.2, "stream_flush_seconds": 0.2}


@pytest.fixture
async def paced(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """A server on SQLite (users alice, bob) whose echo model answers at 10 ms per word."""
    return await server_factory(sqlite_url, **PACED)
