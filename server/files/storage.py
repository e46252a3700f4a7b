"""Where uploaded bytes live: one small interface, two backends, and the factory ``CHATSYNC_FILES_URL`` picks.

A backend stores a blob's bytes under the blob's id. Writing goes through a :class:`BlobWriter`; the bytes are
whole once :meth:`BlobWriter.commit` returns (before that a backend may show part of them: ``Files``
reads only blobs it marked complete after the commit). :meth:`FileStorage.delete` removes a blob's bytes,
committed or half-written, so an abandoned upload can always be cleaned up by its id.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy import make_url

from ..settings import Settings
from ..store.db import Database

CHUNK_BYTES = 256 * 1024  # what backends write and read at a time
DATABASE_URL = "database:"


class BlobWriter(abc.ABC):
    """The bytes of one blob, written in order."""

    @abc.abstractmethod
    async def write(self, data: bytes) -> None:
        """Append ``data``."""

    @abc.abstractmethod
    async def commit(self) -> None:
        """Make everything written readable under the blob's id."""

    @abc.abstractmethod
    async def abort(self) -> None:
        """Forget everything written; the blob's id names nothing afterwards."""


class FileStorage(abc.ABC):
    """A place for blobs, addressed by blob id."""

    @abc.abstractmethod
    def writer(self, blob_id: str) -> BlobWriter:
        """A writer for a new blob."""

    @abc.abstractmethod
    def read(self, blob_id: str) -> AsyncIterator[bytes]:
        """The bytes, in chunks of at most :data:`CHUNK_BYTES`; ``FileNotFoundError`` if there are none."""

    @abc.abstractmethod
    async def delete(self, blob_id: str) -> None:
        """Remove the blob's bytes, committed or partly written; nothing happens if there are none."""

    @abc.abstractmethod
    def stored_ids(self) -> AsyncIterator[str]:
        """The id of every blob with bytes here, committed or not (for checks of what storage holds)."""

    @abc.abstractmethod
    async def is_empty(self) -> bool:
        """True when no bytes of any blob are stored (for checks that nothing was left behind)."""


def default_directory(settings: Settings) -> Path:
    """``files/`` next to the SQLite database; with PostgreSQL, ``chatsync-files`` in the working directory."""
    if settings.is_sqlite:
        database = make_url(settings.database_url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            return Path(database).resolve().parent / "files"
    return Path("chatsync-files").resolve()


def create_storage(settings: Settings, db: Database) -> FileStorage:
    """The backend ``CHATSYNC_FILES_URL`` names; each is imported only when chosen."""
    url = settings.files_url
    if url == DATABASE_URL or (url is not None and url.startswith(DATABASE_URL)):
        from .database import DatabaseStorage

        return DatabaseStorage(db)
    from .directory import DirectoryStorage

    if url is None:
        return DirectoryStorage(default_directory(settings))
    return DirectoryStorage(Path(url.removeprefix("file://")))
