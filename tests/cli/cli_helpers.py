"""Helpers for the CLI tests: run the real ``chatsync`` command without blocking the server's loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass

FAST = {"echo_delay": 0.001, "sweep_seconds": 0.2, "stream_flush_seconds": 0.2}


@dataclass
class Result:
    code: int
    out: str
    err: str


async def chatsync(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``python -m server.cli ARGS`` without blocking the loop that serves it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CHATSYNC_")}
    full_env.update(env or {})
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=30,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
