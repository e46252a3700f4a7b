"""Files tests: real servers on SQLite and PostgreSQL, with each storage backend."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
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
async def files_server(server_factory: Callable[..., Any], db_url: str, files_url: str) -> Any:
    """A server (users alice, bob) on each database with each storage backend."""
    return await server_factory(db_url, files_url=files_url)


async def upload(live: Any, data: bytes, name: str = "notes.txt", user: str = "alice",
                 content_type: str = "application/octet-stream") -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.post("/files", files={"file": (name, data, content_type)},
                               headers={"authorization": f"Bearer {live.tokens[user]}"})


async def download(live: Any, file_id: str, user: str = "alice") -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.get(f"/files/{file_id}", headers={"authorization": f"Bearer {live.tokens[user]}"})


async def stored_nothing(live: Any) -> bool:
    """No file, no blob, and no bytes in storage."""
    from sqlalchemy import func, select

    from server.store.models import FileBlob, StoredFile

    services = live.services
    async with services.db.read() as s:
        files = (await s.execute(select(func.count()).select_from(StoredFile))).scalar_one()
        blobs = (await s.execute(select(func.count()).select_from(FileBlob))).scalar_one()
    return files == 0 and blobs == 0 and await services.files.storage.is_empty()


async def user_id(live: Any, name: str) -> str:
    principal = await live.services.auth.identify(live.tokens[name])
    return principal.user.id
