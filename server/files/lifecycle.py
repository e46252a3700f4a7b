"""A user's files from upload to collection (:class:`Files`): uploads, reads, attachments on messages, and the
collector of unreferenced files.

Invariants, and the failure each prevents:

* A blob's bytes are committed to storage before its row says ``complete``, and a file row always names a
  complete blob: a reader never finds a file whose bytes are missing.
* Identical content is stored once per user: an upload whose digest matches a complete blob of the same user
  drops its own bytes and names that blob (the unique ``(user_id, sha256)`` settles two uploads racing).
* A blob is deleted only when no file row names it; ``files.blob_id`` has no cascade, so the database refuses
  a delete that races with an upload taking the blob.
* An upload reserves room for its bytes before it stores any, under its owner's lock, and the file is named
  only after the bounds are checked again under that lock with its real size (``quota``): concurrent uploads,
  on any replica, never pass a per-user bound together. The reservation is the upload's writing blob row; it
  is renewed while bytes arrive, freed when the upload ends, and lapses when its server stops renewing it.
* A file is collected when no live session references it (``file_refs``) and it was left alone
  (``touched_at``) for the grace period; taking it for a message touches it first, so the collector does not
  take a file out from under a message being written. Files only deleted sessions referenced go at once.
* A reference and a deletion of the same file are serialised by row locks (``refs``): a message whose
  reference committed keeps its file; one that loses the race is ``NOT_FOUND`` and writes nothing.
* Bytes are removed only for a blob this database has (or just had) a row for, never because no row names them:
  one storage directory may hold the files of several databases (the default one does, for two SQLite files side
  by side or two PostgreSQL databases served from the same working directory), and what one database does not
  know is another's user's file. A server stopped between deleting a blob's row and its bytes leaves those
  bytes behind: disk space, never a file someone still has.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, and_, bindparam, delete, exists, select, update
from sqlalchemy.exc import IntegrityError

from ..protocol.errors import RpcError
from ..settings import Settings
from ..store.db import Database
from ..store.models import ChatSession, FileBlob, FileRef, StoredFile, utcnow
from ..store.repo import lock_user
from . import quota
from .quota import mib
from .sniff import Sniffer
from .storage import FileStorage

log = logging.getLogger(__name__)

# An upload written before reservations lapsed (no ``expires_at``) is abandoned after this long.
STALE_UPLOAD = timedelta(hours=6)
MAX_NAME_CHARS = 255
# What an upload of unknown size reserves at first, and how much more each time its bytes pass the reservation.
RESERVE_STEP = 1024 * 1024


@dataclass(frozen=True)
class FileInfo:
    """A stored file as its owner sees it: id, name, media type, size and content hash."""

    id: str
    user_id: str
    name: str
    media_type: str
    size: int
    sha256: str

    def wire(self) -> dict[str, Any]:
        """The reply of ``POST /files``."""
        return {
            "id": self.id,
            "name": self.name,
            "mediaType": self.media_type,
            "size": self.size,
            "sha256": self.sha256,
        }

    def attachment(self) -> dict[str, Any]:
        """How a message carries the file (stored on the row, shown in events and ``session.get``)."""
        return {"fileId": self.id, "name": self.name, "mediaType": self.media_type, "size": self.size}


def not_found() -> RpcError:
    return RpcError("NOT_FOUND", "File not found")


def clean_name(name: str | None) -> str:
    """A display name: the last path component, at most 255 characters, without control or format characters
    (bidirectional overrides, zero-width characters) save joiners that join (:func:`_joins`); every kind of
    space becomes a plain one."""
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    kept: list[str] = []
    for i, ch in enumerate(name):
        if ch.isprintable():
            kept.append(ch)
        elif unicodedata.category(ch) in ("Zs", "Zl", "Zp"):
            kept.append(" ")
        elif ch in _JOINERS and kept and i + 1 < len(name) and _joins(ch, kept[-1], name[i + 1]):
            kept.append(ch)
    return "".join(kept).strip()[:MAX_NAME_CHARS] or "file"


ZWNJ, ZWJ = "\u200c", "\u200d"
_JOINERS = (ZWNJ, ZWJ)
_EMOJI_MODIFIERS = frozenset("\ufe0f\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff")


def _joins(joiner: str, before: str, after: str) -> bool:
    """A joiner is kept where it does its work: a zero-width joiner between two pieces of an emoji sequence
    (👨‍👩‍👧, 🏳️‍🌈); either joiner between two letters or marks (Persian, Indic scripts shape by them)."""
    if _letter(before) and _letter(after):
        return True
    return joiner == ZWJ and _pictograph(after) and (_pictograph(before) or before in _EMOJI_MODIFIERS)


def _letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LM"


def _pictograph(ch: str) -> bool:
    return unicodedata.category(ch) == "So"


class Files:
    """One per process (``services.files``); an async context manager that runs the collector."""

    def __init__(self, db: Database, storage: FileStorage, settings: Settings) -> None:
        self.db = db
        self.storage = storage
        self.settings = settings
        self._collector: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def __aenter__(self) -> Files:
        self._collector = asyncio.create_task(self._collect_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._collector is not None:
            self._collector.cancel()
            with suppress(asyncio.CancelledError):
                await self._collector

    # --- reading ------------------------------------------------------------------------------------------

    async def info(self, user_id: str, file_id: str) -> FileInfo:
        """The file, if ``user_id`` owns it; ``NOT_FOUND`` otherwise (another user's file does not exist)."""
        async with self.db.read() as s:
            row = (await s.execute(_INFO.where(StoredFile.id == file_id, StoredFile.user_id == user_id))).first()
        if row is None:
            raise not_found()
        return _info(row)

    async def open(self, user_id: str, file_id: str) -> tuple[FileInfo, AsyncIterator[bytes]]:
        """The file and its bytes as a stream."""
        info = await self.info(user_id, file_id)
        async with self.db.read() as s:
            blob_id = (await s.execute(select(StoredFile.blob_id).where(StoredFile.id == file_id))).scalar()
        if blob_id is None:
            raise not_found()
        return info, self.storage.read(blob_id)

    async def read(self, user_id: str, file_id: str) -> bytes:
        """The whole content (at most ``CHATSYNC_MAX_FILE_BYTES``), for building a provider request."""
        _info, chunks = await self.open(user_id, file_id)
        try:
            return b"".join([chunk async for chunk in chunks])
        except FileNotFoundError:
            raise not_found() from None

    # --- uploading ----------------------------------------------------------------------------------------

    def upload(self, user_id: str, *, least: int = 0, most: int | None = None) -> Upload:
        """``async with files.upload(user) as up:``, then ``up.digest(data); await up.store(data)`` for each
        piece in order, and ``info = await up.finish(name)``. Leaving the block without ``finish`` (an error, a
        client that went away) removes everything written and frees what the upload reserved. ``least`` and
        ``most``: what the request says of the file's size, if anything (a body's length bounds it), so a file
        that cannot fit is refused before any of it is read."""
        return Upload(self, user_id, least, most)

    async def usage(self, user_id: str) -> quota.Usage:
        """The user's bytes stored, files kept and uploads under way (with the bytes those hold)."""
        async with self.db.read() as s:
            return await quota.usage(s, user_id, utcnow())

    # --- attachments --------------------------------------------------------------------------------------

    async def attachments(self, user_id: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The stored form of a message's attachments: each ``{fileId}`` becomes ``{fileId, name, mediaType,
        size}`` (``NOT_FOUND`` unless the user owns it); path references pass unchanged. The files together
        must fit ``CHATSYNC_MAX_MESSAGE_FILE_BYTES``. Touches the files, so the collector leaves them be."""
        ids = list(dict.fromkeys(item["fileId"] for item in items if "fileId" in item))
        if not ids:
            return [dict(item) for item in items]
        async with self.db.write() as s:
            rows = (await s.execute(_INFO.where(StoredFile.id.in_(ids), StoredFile.user_id == user_id))).all()
            if len(rows) != len(ids):
                raise not_found()
            await s.execute(update(StoredFile).where(StoredFile.id.in_(ids)).values(touched_at=utcnow()))
        found = {row.id: _info(row) for row in rows}
        total = sum(found[item["fileId"]].size for item in items if "fileId" in item)
        limit = self.settings.max_message_file_bytes
        if total > limit:
            raise RpcError(
                "PAYLOAD_TOO_LARGE",
                f"the files of one message exceed {mib(limit)} together (CHATSYNC_MAX_MESSAGE_FILE_BYTES)",
            )
        return [found[item["fileId"]].attachment() if "fileId" in item else dict(item) for item in items]

    # --- collecting ---------------------------------------------------------------------------------------

    async def collect(self) -> int:
        """Delete files no live session references once the grace period has passed (at once if only deleted
        sessions referenced them), then blobs no file names and uploads abandoned midway. Returns how many
        blobs' bytes were removed."""
        now = utcnow()
        cutoff = now - timedelta(seconds=self.settings.file_grace_seconds)
        any_ref = exists().where(FileRef.file_id == StoredFile.id)
        await self._delete_files(and_(~_LIVE_REF, (StoredFile.touched_at < cutoff) | any_ref))
        return await self._collect_blobs(now)

    async def forget_session(self, session_id: str) -> int:
        """After a session is deleted: remove the files only it referenced (no grace: nothing can send them)."""
        of_session = exists().where(FileRef.file_id == StoredFile.id, FileRef.session_id == session_id)
        try:
            await self._delete_files(and_(of_session, ~_LIVE_REF))
            return await self._collect_blobs(utcnow())
        except Exception:  # the session is gone either way; the collector takes its files at its next sweep
            log.warning("removing the files of deleted session %s failed", session_id, exc_info=True)
            return 0

    async def _delete_files(self, unused: ColumnElement[bool]) -> None:
        """Delete the files ``unused`` selects, a batch per transaction. A batch's rows are locked first —
        skipping any that a reference being written holds (``refs.link``): still unused, they go at a later
        sweep — and ``unused`` is checked again under the lock, by a statement that sees every reference
        committed before the lock was granted. So a file is never deleted under a reference that commits."""
        while True:
            async with self.db.write() as s:
                locked = select(StoredFile.id).where(unused).limit(_DELETE_BATCH).with_for_update(skip_locked=True)
                ids = list((await s.execute(locked)).scalars())
                if ids:
                    await s.execute(delete(StoredFile).where(StoredFile.id.in_(ids), unused))
            if len(ids) < _DELETE_BATCH:
                return

    async def _collect_blobs(self, now: Any) -> int:
        named = exists().where(StoredFile.blob_id == FileBlob.id)
        lapsed = (FileBlob.expires_at < now) | (
            FileBlob.expires_at.is_(None) & (FileBlob.created_at < now - STALE_UPLOAD)
        )
        orphan = and_(~named, (FileBlob.state == "complete") | lapsed)
        async with self.db.read() as s:
            blob_ids = list((await s.execute(select(FileBlob.id).where(orphan).limit(1000))).scalars())
        removed = 0
        for blob_id in blob_ids:
            try:
                async with self.db.write() as s:
                    deleted = await s.execute(delete(FileBlob).where(FileBlob.id == blob_id, orphan))
                    gone = cast(CursorResult[Any], deleted).rowcount  # a DELETE's result is a CursorResult
            except IntegrityError:  # an upload took the blob just now
                continue
            if gone:
                await self.storage.delete(blob_id)
                removed += 1
        return removed

    async def remove_blobs(self, blob_ids: Sequence[str]) -> int:
        """Remove the stored bytes of blobs whose rows were deleted by a cascade (``chatsync users delete``),
        which cannot reach storage; bytes a row still names are kept. Returns how many blobs' bytes went."""
        removed = 0
        for start in range(0, len(blob_ids), _DELETE_BATCH):
            ids = blob_ids[start : start + _DELETE_BATCH]
            async with self.db.read() as s:
                named = set((await s.execute(select(FileBlob.id).where(FileBlob.id.in_(ids)))).scalars())
            for blob_id in ids:
                if blob_id not in named:
                    await self.storage.delete(blob_id)
                    removed += 1
        return removed

    async def sweep(self) -> None:
        """One pass of the collector, as the server runs it every ``CHATSYNC_FILE_SWEEP_SECONDS``."""
        await self.collect()

    async def _collect_forever(self) -> None:
        while not self._stop.is_set():
            try:
                await self.sweep()
            except Exception:
                log.warning("collecting unreferenced files failed", exc_info=True)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.settings.file_sweep_seconds)


# A live (not deleted) session references the file.
_LIVE_REF = exists().where(
    FileRef.file_id == StoredFile.id, FileRef.session_id == ChatSession.id, ChatSession.deleted_at.is_(None)
)
_DELETE_BATCH = 500

_INFO = select(
    StoredFile.id, StoredFile.user_id, StoredFile.name, FileBlob.media_type, FileBlob.size, FileBlob.sha256
).join(FileBlob, FileBlob.id == StoredFile.blob_id)


def _info(row: Any) -> FileInfo:
    return FileInfo(
        id=row.id, user_id=row.user_id, name=row.name, media_type=row.media_type, size=row.size, sha256=row.sha256
    )


class Upload:
    """One upload in progress: reserves room for its bytes under its owner's bounds, then hashes, sniffs, counts
    and stores each chunk as it arrives (renewing and growing the reservation as needed)."""

    def __init__(self, files: Files, user_id: str, least: int = 0, most: int | None = None) -> None:
        self.files = files
        self.user_id = user_id
        self.blob_id = str(uuid.uuid4())
        self.size = 0
        self.limit = files.settings.max_file_bytes
        self._least = least
        self._most = most
        self._hash = hashlib.sha256()
        self._sniffer = Sniffer()
        self._writer = files.storage.writer(self.blob_id)
        self._reserved = 0
        self._renew_at = 0.0  # time.monotonic() past which the reservation is renewed at the next chunk
        self._started = False
        self._done = False

    def too_large(self) -> RpcError:
        return RpcError("PAYLOAD_TOO_LARGE", f"the file exceeds {mib(self.limit)} (CHATSYNC_MAX_FILE_BYTES)")

    async def __aenter__(self) -> Upload:
        if self._least > self.limit:
            raise self.too_large()
        first = min(self._most if self._most is not None else RESERVE_STEP, self.limit)
        await self._reserve(self._least, max(first, self._least))
        return self

    async def _reserve(self, need: int, want: int) -> None:
        """Hold between ``need`` and ``want`` bytes for this upload (as much as fits), for another lease, under
        the owner's lock; the documented error when not even ``need`` fits, or another bound is reached."""
        settings = self.files.settings
        async with self.files.db.write() as s:
            await lock_user(s, self.user_id)
            if self._started and (await s.execute(_WRITING, {"bid": self.blob_id})).first() is None:
                raise _lapsed()  # the collector took it
            now = utcnow()
            usage = await quota.usage(s, self.user_id, now, besides=self.blob_id)
            quota.check(settings, usage, holding=need, under_way=True)
            hold = max(need, min(want, quota.room(settings, usage)))
            expires = now + timedelta(seconds=settings.upload_lease_seconds)
            if not self._started:
                s.add(FileBlob(id=self.blob_id, user_id=self.user_id, size=hold, state="writing", expires_at=expires))
            else:
                await s.execute(
                    update(FileBlob).where(FileBlob.id == self.blob_id).values(size=hold, expires_at=expires)
                )
        self._started = True
        self._reserved = hold
        self._renew_at = time.monotonic() + settings.upload_lease_seconds / 2

    def digest(self, data: bytes) -> None:
        """Hash and sniff the next piece of the file (before :meth:`store` takes it). Only computation: it may
        run on a worker thread, one call at a time."""
        self._hash.update(data)
        self._sniffer.feed(data)

    async def store(self, data: bytes) -> None:
        """Store the next piece, or raise ``PAYLOAD_TOO_LARGE`` before storing anything past a limit."""
        size = self.size + len(data)
        if size > self.limit:
            raise self.too_large()
        if size > self._reserved:
            await self._reserve(size, min(max(size, self._reserved + RESERVE_STEP), self.limit))
        elif time.monotonic() >= self._renew_at:
            await self._reserve(size, self._reserved)
        self.size = size
        await self._writer.write(data)

    async def finish(self, name: str | None) -> FileInfo:
        """Commit the bytes and name them; returns the file (sharing an identical earlier blob if there is one)."""
        digest, media_type = self._hash.hexdigest(), self._sniffer.media_type
        if time.monotonic() >= self._renew_at:  # the collector must not take the bytes while they are committed
            await self._reserve(self.size, self._reserved)
        try:
            await self._writer.commit()
        except FileNotFoundError:  # the collector took an upload whose reservation lapsed
            raise _lapsed() from None
        file_id = uuid.uuid4().hex
        for _attempt in range(3):
            try:
                blob_id = await self._name(file_id, clean_name(name), digest, media_type)
                break
            except IntegrityError:  # an identical upload completed at the same moment: share its blob
                continue
        else:
            raise RpcError("CONFLICT", "the same content is being uploaded concurrently; try again")
        self._done = True
        if blob_id != self.blob_id:
            await self.files.storage.delete(self.blob_id)
        return FileInfo(
            id=file_id,
            user_id=self.user_id,
            name=clean_name(name),
            media_type=media_type,
            size=self.size,
            sha256=digest,
        )

    async def _name(self, file_id: str, name: str, digest: str, media_type: str) -> str:
        """Under the owner's lock, re-check the bounds with the file's real size and make it a file."""
        async with self.files.db.write() as s:
            await lock_user(s, self.user_id)
            if (await s.execute(_WRITING, {"bid": self.blob_id})).first() is None:
                raise _lapsed()  # the collector took it
            existing = (
                await s.execute(
                    select(FileBlob.id).where(
                        FileBlob.user_id == self.user_id, FileBlob.sha256 == digest, FileBlob.state == "complete"
                    )
                )
            ).scalar()
            usage = await quota.usage(s, self.user_id, utcnow(), besides=self.blob_id)
            quota.check(self.files.settings, usage, holding=0 if existing else self.size, under_way=False)
            if existing is not None:
                await s.execute(delete(FileBlob).where(FileBlob.id == self.blob_id))
                blob_id = existing
            else:
                await s.execute(
                    update(FileBlob)
                    .where(FileBlob.id == self.blob_id)
                    .values(sha256=digest, size=self.size, media_type=media_type, state="complete", expires_at=None)
                )
                blob_id = self.blob_id
            s.add(StoredFile(id=file_id, user_id=self.user_id, blob_id=blob_id, name=name))
        return blob_id

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._done or not self._started:
            return
        # Shielded: a client that went away cancels the request, and the cleanup must still run to the end.
        await asyncio.shield(self._discard())

    async def _discard(self) -> None:
        # A blob that became complete (``finish`` interrupted after its transaction) is a file: keep it. Else the
        # bytes go first, then the row (which frees the reservation): should this stop halfway, the row lapses
        # and the collector removes it with whatever bytes are left.
        async with self.files.db.read() as s:
            state = (await s.execute(select(FileBlob.state).where(FileBlob.id == self.blob_id))).scalar()
        if state == "complete":
            return
        await self._writer.abort()
        if state == "writing":
            async with self.files.db.write() as s:
                await s.execute(delete(FileBlob).where(FileBlob.id == self.blob_id, FileBlob.state == "writing"))


_WRITING = select(FileBlob.id).where(FileBlob.id == bindparam("bid"), FileBlob.state == "writing")


def _lapsed() -> RpcError:
    return RpcError(
        "TIMEOUT",
        "the upload stalled for longer than CHATSYNC_UPLOAD_LEASE_SECONDS and was given up; send it again",
    )
