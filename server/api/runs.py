"""``run.abort``."""

from __future__ import annotations

from typing import Any

from ..rpc.registry import Context, Router
from . import inputs


def register(router: Router) -> None:
    @router.mutation("run.abort", inputs.SessionRef)
    async def abort(ctx: Context, inp: inputs.SessionRef) -> Any:
        return await ctx.services.runs.abort(ctx.require_user(), inp.session_id, (ctx.device_id, ctx.device_name))
