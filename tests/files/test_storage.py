"""The storage contract, run against both backends, and how CHATSYNC_FILES_URL picks one."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.files import FileStorage, create_storage
from server.files.database import DatabaseStorage
from server.files.directory import DirectoryStorage
from server.files.storage import CHUNK_BYTES
from server.settings import SettingsError, load_settings
from server.store.db import Database


@pytest.fixture(params=["directory", "database"])
async def storage(request: pytest.FixtureRequest, migrated_db: Database, tmp_path: Path) -> AsyncIterator[FileStorage]:
    if request.param == "directory":
        yield DirectoryStorage(tmp_path / "files")
    else:
        yield DatabaseStorage(migrated_db)


async def _read(storage: FileStorage, blob_id: str) -> bytes:
    chunks = [chunk async for chunk in storage.read(blob_id)]
    assert all(len(c) <= CHUNK_BYTES for c in chunks)
    return b"".join(chunks)


async def test_committed_bytes_read_back_in_chunks(storage: FileStorage) -> None:
    data = os.urandom(CHUNK_BYTES * 5 + 123)
    writer = storage.writer("blob-1")
    for i in range(0, len(data), 70_000):
        await writer.write(data[i : i + 70_000])
    await writer.commit()
    assert await _read(storage, "blob-1") == data

    empty = storage.writer("blob-empty")
    await empty.commit()
    assert await _read(storage, "blob-empty") == b""

    await storage.delete("blob-1")
    await storage.delete("blob-empty")
    await storage.delete("never-written")  # nothing to delete is no error
    assert await storage.is_empty()


async def test_abort_leaves_nothing(storage: FileStorage) -> None:
    writer = storage.writer("blob-2")
    await writer.write(os.urandom(CHUNK_BYTES * 6))  # some of it already stored
    assert not await storage.is_empty()
    await writer.abort()
    assert await storage.is_empty()
    with pytest.raises(FileNotFoundError):
        await _read(storage, "blob-2")


async def test_files_url_picks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATSYNC_FILES_URL")
    sqlite = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'chatsync.db'}"
    async with Database(sqlite) as db:
        default = create_storage(load_settings(database_url=sqlite), db)
        assert isinstance(default, DirectoryStorage) and default.root == (tmp_path / "data" / "files").resolve()
        named = create_storage(load_settings(database_url=sqlite, files_url=f"file://{tmp_path}/x"), db)
        assert isinstance(named, DirectoryStorage) and named.root == tmp_path / "x"
        assert isinstance(
            create_storage(load_settings(database_url=sqlite, files_url="database:"), db), DatabaseStorage
        )
    with pytest.raises(SettingsError, match="CHATSYNC_FILES_URL"):
        load_settings(files_url="s3://bucket/files")
