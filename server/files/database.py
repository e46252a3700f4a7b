"""The database backend: a blob is rows of ``file_chunks`` (:data:`CHUNK_BYTES` each), written one row per
transaction as the upload streams in and read back one row at a time, so neither side holds a whole file and
no transaction stays open for the length of an upload. Every replica on the same database sees every blob.

Rows of an upload in progress are already in the table; they become reachable only when the upload's blob
is marked complete (``server.files.service``), and an abandoned upload's rows are deleted by blob id."""
from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import bindparam, delete, insert, select

from ..store.db import Database
from ..store.models import FileChunk
from .storage import CHUNK_BYTES, BlobWriter, FileStorage

_INSERT = insert(FileChunk)
_READ = select(FileChunk.data).where(FileChunk.blob_id == bindparam("bid"), FileChunk.seq == bindparam("seq"))
_DELETE = delete(FileChunk).where(FileChunk.blob_id == bindparam("bid"))
_ANY = select(FileChunk.blob_id).limit(1)


class DatabaseStorage(FileStorage):
    def __init__(self, db: Database) -> None:
        self.db = db

    def writer(self, blob_id: str) -> BlobWriter:
        return _DatabaseWriter(self.db, blob_id)

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        seq = 0
        while True:
            async with self.db.read() as s:
                data = (await s.execute(_READ, {"bid": blob_id, "seq": seq})).scalar()
            if data is None:
                if seq == 0:
                    raise FileNotFoundError(blob_id)
                return
            yield data
            seq += 1

    async def delete(self, blob_id: str) -> None:
        async with self.db.write() as s:
            await s.execute(_DELETE, {"bid": blob_id})

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
        while len(self._pending) >= CHUNK_BYTES:
            await self._store(bytes(self._pending[:CHUNK_BYTES]))
            del self._pending[:CHUNK_BYTES]

    async def _store(self, data: bytes) -> None:
        async with self.db.write() as s:
            await s.execute(_INSERT, {"blob_id": self.blob_id, "seq": self._seq, "data": data})
        self._seq += 1

    async def commit(self) -> None:
        # An empty blob still gets its one (empty) row: reading it back must find something.
        if self._pending or self._seq == 0:
            await self._store(bytes(self._pending))
            self._pending = bytearray()

    async def abort(self) -> None:
        self._pending = bytearray()
        async with self.db.write() as s:
            await s.execute(_DELETE, {"bid": self.blob_id})
