"""The static checks, run with the tests: ruff's lint and format check on the Python code, and mypy in strict
mode on ``server/``, ``chatsync_client/`` and ``scripts/typegen.py``. Their configuration is in pyproject.toml
(``[tool.ruff]``, ``[tool.mypy]``); each tool runs from the Python running the tests (``sys.executable -m ...``),
so it is the one ``scripts/setup.sh`` installed with the ``dev`` extras."""

from __future__ import annotations

import ast
import re
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


def reply_escapes(source: str) -> list[str]:
    """Where ``source`` (a module of procedure handlers) takes a reply out of the checker's hands: a ``cast``
    (``typing.cast`` or a bare ``cast``, imported or called) or a ``type: ignore`` of a return (bare, or naming
    ``no-any-return`` or ``return-value``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "cast" for alias in node.names):
            found.append(f"{node.lineno}: imports cast")
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "cast") or (
                isinstance(func, ast.Attribute) and func.attr == "cast"
            ):
                found.append(f"{node.lineno}: cast(...)")
    for number, line in enumerate(source.splitlines(), 1):
        ignore = re.search(r"#\s*type:\s*ignore(\[[^\]]*\])?", line)
        if ignore and (ignore.group(1) is None or re.search(r"no-any-return|return-value", ignore.group(1))):
            found.append(f"{number}: {ignore.group(0)}")
    return found


def test_no_handler_casts_what_a_service_returns() -> None:
    """The handlers of server/api return what the services return as they declare it, so mypy strict follows a
    reply from the service (an exactly-once repeat: from the stored receipt) to the procedure's output type, the
    one the TypeScript types are generated from. A cast (or an ignored return) would hide a service that returns
    ``Any`` or another type."""
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in sorted((ROOT / "server" / "api").rglob("*.py"))
        for where in reply_escapes(path.read_text())
    ]
    assert not found, "\n".join(found)


def test_the_handler_scan_finds_each_escape() -> None:
    source = (
        "import typing\n"
        "from typing import Any, cast\n"
        "async def a(ctx, inp) -> Out:\n"
        "    return cast(Out, await ctx.services.x.y())\n"
        "async def b(ctx, inp) -> Out:\n"
        "    return typing.cast('Out', await ctx.services.x.y())\n"
        "async def c(ctx, inp) -> Out:\n"
        "    return await ctx.services.x.y()  # type: ignore[no-any-return]\n"
        "async def d(ctx, inp) -> Out:\n"
        "    return await ctx.services.x.y()  # type: ignore\n"
        "async def e(ctx, inp) -> Out:\n"
        "    after = int(inp.last)  # type: ignore[arg-type]\n"
        "    return await ctx.services.x.y(after)\n"
    )
    assert reply_escapes(source) == [
        "2: imports cast",
        "4: cast(...)",
        "6: cast(...)",
        "8: # type: ignore[no-any-return]",
        "10: # type: ignore",
    ]
