"""Where this machine's servers listen (``server_addresses``): each serving process records its address when it
starts listening and removes it when it stops, so ``chatsync link`` — a separate process that only opens the
database — makes links for the port the server actually runs on rather than the configured default."""

from __future__ import annotations

import os
import socket
import uuid

from sqlalchemy import delete, select

from ..store.db import Database
from ..store.models import ServerAddress, utcnow


def instance_id() -> str:
    """This process, unique across replicas and restarts: ``host:pid:random``."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


async def record(db: Database, instance: str, url: str) -> None:
    async with db.write() as s:
        await s.merge(ServerAddress(id=instance, url=url, started_at=utcnow()))


async def forget(db: Database, instance: str) -> None:
    async with db.write() as s:
        await s.execute(delete(ServerAddress).where(ServerAddress.id == instance))


async def latest(db: Database) -> str | None:
    """The address of the server started last that has not stopped (``None`` when none runs, or none said so)."""
    async with db.read() as s:
        stmt = select(ServerAddress.url).order_by(ServerAddress.started_at.desc()).limit(1)
        return (await s.execute(stmt)).scalar_one_or_none()
