"""The database backend: a blob is rows of ``file_chunks`` (:data:`CHUNK_BYTES` each), written a few rows per
transaction as the upload streams in and read back a few rows at a time, so neither side holds more than a few
chunks and no transaction stays open for the length of an upload. Every replica on the same database sees every blob.

Rows of an upload in progress are already in the table; they become reachable only when the upload's blob
is marked complete (``server.files.lifecycle``), and an abandoned upload's rows are deleted by blob id."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import bindparam, delete, insert, select

from ..store.db import Database
from ..store.models import FileChunk
from .storage import CHUNK_BYTES, BlobWriter, FileStorage

# Rows per write transaction and per read: one per transaction makes PostgreSQL flush its log every 256 KiB.
ROWS_PER_TRANSACTION = 4
_INSERT = insert(FileChunk.__table__)
_READ = (
    select(FileChunk.data)
    .where(FileChunk.blob_id == bindparam("bid"), FileChunk.seq >= bindparam("first"), FileChunk.seq < bindparam("end"))
    .order_by(FileChunk.seq)
)
_DELETE = delete(FileChunk).where(FileChunk.blob_id == bindparam("bid"))
_ANY = select(FileChunk.blob_id).limit(1)
_IDS = select(FileChunk.blob_id).where(FileChunk.seq == 0)


class DatabaseStorage(FileStorage):
    """Blobs as rows of ``file_chunks`` in the application's database (module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def writer(self, blob_id: str) -> BlobWriter:
        return _DatabaseWriter(self.db, blob_id)

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        first = 0
        while True:
            async with self.db.read() as s:
                rows = list(
                    (
                        await s.execute(_READ, {"bid": blob_id, "first": first, "end": first + ROWS_PER_TRANSACTION})
                    ).scalars()
                )
            if not rows and first == 0:
                raise FileNotFoundError(blob_id)
            for data in rows:
                yield data
            if len(rows) < ROWS_PER_TRANSACTION:
                return
            first += ROWS_PER_TRANSACTION

    async def delete(self, blob_id: str) -> None:
        async with self.db.write() as s:
            await s.execute(_DELETE, {"bid": blob_id})

    async def stored_ids(self) -> AsyncIterator[str]:
        async with self.db.read() as s:
            ids = list((await s.execute(_IDS)).scalars())
        for blob_id in ids:
            yield blob_id

    async def is_empty(self) -> bool:
        async with self.db.read() as s:
            return (await s.execute(_ANY)).first() is None


class _DatabaseWriter(BlobWriter):
    def __init__(self, db: Database, blob_id: str) -> None:
        self.db = db
        self.blob_id = blob_id
        self._seq = 0
        self._pending = bytearray()

    async def write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= CHUNK_BYTES * ROWS_PER_TRANSACTION:
            await self._store(len(self._pending) // CHUNK_BYTES * CHUNK_BYTES)

    async def _store(self, size: int) -> None:
        """Write the first ``size`` pending bytes as rows of :data:`CHUNK_BYTES` (the last may be shorter)."""
        rows = []
        for offset in range(0, size, CHUNK_BYTES) if size else [0]:
            rows.append(
                {
                    "blob_id": self.blob_id,
                    "seq": self._seq,
                    "data": bytes(self._pending[offset : min(offset + CHUNK_BYTES, size)]),
                }
            )
            self._seq += 1
        async with self.db.write() as s:
            await s.execute(_INSERT, rows)
        del self._pending[:size]

    async def commit(self) -> None:
        # An empty blob still gets its one (empty) row: reading it back must find something.
        if self._pending or self._seq == 0:
            await self._store(len(self._pending))

    async def abort(self) -> None:
        self._pending = bytearray()
        async with self.db.write() as s:
            await s.execute(_DELETE, {"bid": self.blob_id})
