"""Which sessions reference which files (``file_refs``), kept inside the transaction that writes the message
or queued message, so the collector sees a file as taken exactly when a message carries it.

A reference and the collector never cross: :func:`link` locks each file's row (``FOR KEY SHARE`` on
PostgreSQL) before writing the reference, and the collector (``Files._delete_files``) locks the rows it is
about to delete (``FOR UPDATE``, skipping rows locked by a reference in progress) and checks the references
again under that lock. So either the reference commits first and the collector sees it, or the file is
deleted first and the reference finds no row: ``NOT_FOUND``, and the write that carried it changes nothing.
On SQLite every write transaction holds the one write lock, which serialises the two the same way.

These run on a write's plain connection (``SessionTx.plain``), which takes constant statements only
(``store.prepared``): hence one statement per file, with bound parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import String, Text, bindparam, cast, delete, exists, insert, select

from ..store.models import FileRef, Message, QueuedMessage, StoredFile
from ..store.prepared import Executor
from .lifecycle import not_found

# Held until the transaction ends: the file cannot be deleted under the reference being written.
_LOCK_FILE = select(StoredFile.id).where(StoredFile.id == bindparam("fid")).with_for_update(read=True, key_share=True)
_LINK = insert(FileRef.__table__).from_select(
    ["file_id", "session_id"],
    select(StoredFile.id, bindparam("sid", type_=String)).where(
        StoredFile.id == bindparam("fid"),
        ~exists().where(FileRef.file_id == bindparam("fid"), FileRef.session_id == bindparam("sid")),
    ),
)
# File ids are hex, so they need no escaping inside LIKE.
_IN_QUEUE = (
    select(QueuedMessage.id)
    .where(
        QueuedMessage.session_id == bindparam("sid"),
        cast(QueuedMessage.attachments, Text).contains(bindparam("fid", type_=String)),
    )
    .limit(1)
)
_IN_HISTORY = (
    select(Message.id)
    .where(
        Message.session_id == bindparam("sid"),
        Message.role == "user",
        cast(Message.attachments, Text).contains(bindparam("fid", type_=String)),
    )
    .limit(1)
)
_SESSION_FILES = select(FileRef.file_id).where(FileRef.session_id == bindparam("sid"))
_UNLINK = delete(FileRef.__table__).where(FileRef.file_id == bindparam("fid"), FileRef.session_id == bindparam("sid"))


def file_ids(attachments: Iterable[dict[str, Any]] | None) -> list[str]:
    return list(dict.fromkeys(a["fileId"] for a in attachments or () if "fileId" in a))


async def link(db: Executor, session_id: str, attachments: Iterable[dict[str, Any]] | None) -> None:
    """Record that the session carries these files; ``NOT_FOUND`` if one is gone (the transaction fails).
    Every file is locked before the first reference is written, in id order."""
    fids = sorted(file_ids(attachments))
    for fid in fids:
        if (await db.execute(_LOCK_FILE, {"fid": fid})).first() is None:
            raise not_found()
    for fid in fids:
        await db.execute(_LINK, {"fid": fid, "sid": session_id})


async def release(db: Executor, session_id: str, attachments: Iterable[dict[str, Any]] | None) -> None:
    """After a queued message was removed or changed: forget the session's reference to each of these files
    that neither its history nor its queue carries any more (the collector may then take them)."""
    for fid in file_ids(attachments):
        params = {"fid": fid, "sid": session_id}
        if (await db.execute(_IN_QUEUE, params)).first() is None and (
            await db.execute(_IN_HISTORY, params)
        ).first() is None:
            await db.execute(_UNLINK, params)


async def release_queue(db: Executor, session_id: str) -> None:
    """After the session's queue was cleared: :func:`release` every file the session references."""
    fids = [row[0] for row in (await db.execute(_SESSION_FILES, {"sid": session_id})).all()]
    await release(db, session_id, [{"fileId": fid} for fid in fids])
