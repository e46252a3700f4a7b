"""``provider.list``: the providers this server can reach, the models it knows for each, and why one is not
available (``server.llm.catalog``)."""

from __future__ import annotations

from ..domain import outputs
from ..llm import provider_catalog
from ..rpc.context import Context
from ..rpc.registry import Router


def register(router: Router) -> None:
    @router.query("provider.list")
    async def list_(ctx: Context, _inp: None) -> list[outputs.ProviderInfo]:
        ctx.require_user()
        settings = ctx.services.settings
        return provider_catalog(settings.default_provider, settings.default_model)
