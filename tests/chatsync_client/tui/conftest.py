"""The terminal chat's tests: the MCP test server and its configuration come from tests/engine (mcp_kit)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engine"))  # mcp_kit
