"""Engine tests: real servers with the offline echo model at test speed (helpers in ``engine_helpers``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import FAST

# The providers' request checks (test_llm_convert_properties), for requests made of MCP tools and results.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "llm"))


@pytest.fixture
async def engine(server_factory: Callable[..., Any], sqlite_url: str) -> Any:
    """A server on SQLite with users alice, bob, admin and a fast echo model."""
    return await server_factory(sqlite_url, users=("alice", "bob", "admin"), **FAST)
