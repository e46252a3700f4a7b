"""The static checks, run with the tests: ruff's lint and format check on the Python code, and mypy in strict
mode on ``server/``, ``chatsync_client/`` and ``scripts/typegen.py``. Their configuration is in pyproject.toml
(``[tool.ruff]``, ``[tool.mypy]``); each tool runs from the Python running the tests (``sys.executable -m ...``),
so it is the one ``scripts/setup.sh`` installed with the ``dev`` extras."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON_DIRS = ("server", "chatsync_client", "tests", "bench", "scripts")


def run_tool(*args: str, timeout: float) -> None:
    """Run ``python -m <args>`` at the repository's root; fail with the tool's own output unless it exits 0."""
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(args)}` exited with {done.returncode}:\n{done.stdout}{done.stderr}", pytrace=False)


def test_ruff_lint() -> None:
    run_tool("ruff", "check", *PYTHON_DIRS, timeout=110)


def test_ruff_format() -> None:
    run_tool("ruff", "format", "--check", *PYTHON_DIRS, timeout=110)


@pytest.mark.timeout(900)
def test_mypy_strict() -> None:
    # A first run (no .mypy_cache yet) takes about a minute on an idle core; later runs reuse the cache.
    run_tool("mypy", timeout=880)
