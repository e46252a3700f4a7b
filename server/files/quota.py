"""What a user's files count against their bounds, and the check of one more upload against them.

The check runs under the user's lock (``store.repo.lock_user``) in the transaction that changes what it counts,
so concurrent uploads — on any replica — cannot pass a bound together. What counts:

* bytes (``CHATSYNC_MAX_USER_FILE_BYTES``): the sizes of the user's complete blobs, plus what every upload under
  way holds (a writing blob's ``size`` is its reservation, while its ``expires_at`` has not passed);
* files (``CHATSYNC_MAX_FILES_PER_USER``): the user's files, plus the uploads under way (each becomes one);
* uploads under way (``CHATSYNC_MAX_UPLOADS_IN_FLIGHT_PER_USER``): writing blobs whose reservation holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..protocol.errors import RpcError
from ..settings import Settings
from ..store.models import FileBlob, StoredFile


@dataclass(frozen=True)
class Usage:
    """A user's files and uploads under way, leaving out one upload (the one being checked)."""

    stored: int  # bytes of complete blobs
    held: int  # bytes reserved by uploads under way
    files: int
    in_flight: int


async def usage(s: AsyncSession, user_id: str, now: datetime, *, besides: str | None = None) -> Usage:
    """The user's usage at ``now``, leaving out the upload of blob ``besides``."""
    under_way = and_(FileBlob.state == "writing", FileBlob.expires_at > now)
    blobs = select(
        func.coalesce(func.sum(case((FileBlob.state == "complete", FileBlob.size), else_=0)), 0),
        func.coalesce(func.sum(case((under_way, FileBlob.size), else_=0)), 0),
        func.coalesce(func.sum(case((under_way, 1), else_=0)), 0),
        select(func.count()).select_from(StoredFile).where(StoredFile.user_id == user_id).scalar_subquery(),
    ).where(FileBlob.user_id == user_id)
    if besides is not None:
        blobs = blobs.where(FileBlob.id != besides)
    stored, held, in_flight, files = (await s.execute(blobs)).one()
    return Usage(stored=int(stored), held=int(held), files=int(files), in_flight=int(in_flight))


def room(settings: Settings, u: Usage) -> int:
    """Bytes the user may still take."""
    return max(settings.max_user_file_bytes - u.stored - u.held, 0)


def check(settings: Settings, u: Usage, *, holding: int, under_way: bool) -> None:
    """Raise the documented error unless one more upload fits beside ``u``: one more file, ``holding`` more
    bytes, and (``under_way``: it is still receiving) one more upload in flight."""
    if u.files + u.in_flight >= settings.max_files_per_user:
        pending = f" and {u.in_flight} more under way" if u.in_flight else ""
        raise RpcError(
            "PAYLOAD_TOO_LARGE",
            f"you keep {u.files} files{pending}, the most allowed (CHATSYNC_MAX_FILES_PER_USER); "
            "delete sessions that carry some",
        )
    if under_way and u.in_flight >= settings.max_uploads_in_flight_per_user:
        raise RpcError(
            "TOO_MANY_REQUESTS",
            f"you have {u.in_flight} uploads under way, the most allowed at once "
            "(CHATSYNC_MAX_UPLOADS_IN_FLIGHT_PER_USER); send this one when one of them has finished",
            retry_after_ms=1000,
        )
    if holding > room(settings, u):
        held = f", {mib(u.held)} held by uploads under way" if u.held else ""
        raise RpcError(
            "PAYLOAD_TOO_LARGE",
            f"the upload does not fit your storage quota of {mib(settings.max_user_file_bytes)} "
            f"(CHATSYNC_MAX_USER_FILE_BYTES): {mib(u.stored)} stored{held}",
        )


def mib(n: int) -> str:
    return f"{n / 1048576:g} MiB" if n >= 1048576 else f"{n} bytes"
