"""The directory backend: one file per blob. An upload is written to ``tmp/<id>`` and renamed into place
(``<id[:2]>/<id>``) on commit, after an fsync, so a blob's path holds either nothing or all of its bytes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from .storage import CHUNK_BYTES, BlobWriter, FileStorage


class DirectoryStorage(FileStorage):
    """Blobs as files under ``root``, one per blob, renamed into place once complete (module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"

    def path(self, blob_id: str) -> Path:
        return self.root / blob_id[:2] / blob_id

    def writer(self, blob_id: str) -> BlobWriter:
        return _DirectoryWriter(self, blob_id)

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        f = await asyncio.to_thread(open, self.path(blob_id), "rb")
        try:
            while chunk := await asyncio.to_thread(f.read, CHUNK_BYTES):
                yield chunk
        finally:
            f.close()

    async def delete(self, blob_id: str) -> None:
        def unlink() -> None:
            for path in (self.path(blob_id), self.tmp / blob_id):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

        await asyncio.to_thread(unlink)

    async def stored_ids(self) -> AsyncIterator[str]:
        def listing() -> list[str]:
            if not self.root.exists():
                return []
            return [p.name for d in self.root.iterdir() if d.is_dir() for p in d.iterdir() if p.is_file()]

        for blob_id in await asyncio.to_thread(listing):
            yield blob_id

    async def is_empty(self) -> bool:
        return not any(p.is_file() for p in self.root.rglob("*")) if self.root.exists() else True


class _DirectoryWriter(BlobWriter):
    def __init__(self, storage: DirectoryStorage, blob_id: str) -> None:
        self.storage = storage
        self.blob_id = blob_id
        self.part = storage.tmp / blob_id
        self._file: BinaryIO | None = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    async def write(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= CHUNK_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        if self._file is None:
            self._file = await asyncio.to_thread(self._open)
        await asyncio.to_thread(self._file.writelines, pending)  # copied there, not on the event loop

    def _open(self) -> BinaryIO:
        self.part.parent.mkdir(parents=True, exist_ok=True)
        return open(self.part, "wb")

    async def commit(self) -> None:
        await self._flush()
        assert self._file is not None
        f, self._file = self._file, None
        final = self.storage.path(self.blob_id)

        def finish() -> None:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.part, final)

        await asyncio.to_thread(finish)

    async def abort(self) -> None:
        self._pending, self._pending_bytes = [], 0
        if self._file is not None:
            f, self._file = self._file, None
            await asyncio.to_thread(f.close)
        await self.storage.delete(self.blob_id)
