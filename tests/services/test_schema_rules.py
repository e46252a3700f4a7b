"""The schema check behind ``/readyz`` (``services/readiness.py``) called directly: where the database's
revision stands against the migrations this code ships."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from server.rpc.context import Services
from server.store import migrate

pytestmark = pytest.mark.fast

HEAD = sorted(ScriptDirectory(str(migrate.MIGRATIONS_DIR)).get_heads())


async def set_revision(services: Services, revision: str) -> None:
    async with services.db.write() as s:
        await s.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


async def test_the_schema_is_at_head_behind_or_ahead(services: Services) -> None:
    assert await services.readiness.schema() == {"state": "head", "current": HEAD, "head": HEAD}
    await set_revision(services, "0001")  # an older database: upgrade before serving
    assert await services.readiness.schema() == {"state": "behind", "current": ["0001"], "head": HEAD}
    await set_revision(services, "f00dfeed")  # written by newer code: this code still works
    assert await services.readiness.schema() == {"state": "ahead", "current": ["f00dfeed"], "head": HEAD}
