"""Files tests: real servers on SQLite and PostgreSQL, with each storage backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _files_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers started without a files setting keep files under the test's own directory (with PostgreSQL
    the default would be the working directory)."""
    monkeypatch.setenv("CHATSYNC_FILES_URL", str(tmp_path / "files"))


@pytest.fixture(params=["directory", "database"])
def files_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs with the directory backend and with the database backend."""
    return str(tmp_path / "blobs") if request.param == "directory" else "database:"


@pytest.fixture
async def files_server(db_url: str, server_factory: Callable[..., Any], files_url: str) -> Any:
    """A server (users alice, bob) on each database with each storage backend."""
    return await server_factory(db_url, files_url=files_url)
