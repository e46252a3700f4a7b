"""What ``GET /readyz`` asks of the database: where its schema stands against the migrations this code ships.
Everything here reads; nothing changes state."""

from __future__ import annotations

from typing import TypedDict

from ..store import migrate
from ..store.db import Database
from ..store.migrate import SchemaState


class SchemaReport(TypedDict):
    """The schema's part of the readiness report: ``state`` is ``head``, ``behind`` (upgrade before serving) or
    ``ahead`` (newer code migrated it; this code still works), ``current`` and ``head`` the revisions."""

    state: SchemaState
    current: list[str]
    head: list[str]


class Readiness:
    """The database checks behind readiness, for the HTTP probe that reports them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def schema(self) -> SchemaReport:
        """The database's migration revisions (one read) against this code's head."""
        revisions = await migrate.revisions(self.db)
        return {"state": revisions.state, "current": list(revisions.current), "head": list(revisions.head)}
