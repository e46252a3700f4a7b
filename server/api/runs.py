"""``run.abort``, ``run.regenerate``, ``run.continue``."""

from __future__ import annotations

from typing import Any

from ..rpc.registry import Context, Router
from ..services.requests import request_key
from . import inputs


def register(router: Router) -> None:
    @router.mutation("run.abort", inputs.SessionRef)
    async def abort(ctx: Context, inp: inputs.SessionRef) -> Any:
        return await ctx.services.runs.abort(ctx.require_user(), inp.session_id, (ctx.device_id, ctx.device_name))

    @router.mutation("run.regenerate", inputs.Regenerate)
    async def regenerate(ctx: Context, inp: inputs.Regenerate) -> Any:
        user = ctx.require_user()
        return await ctx.services.versions.regenerate(
            user,
            inp.session_id,
            inp.message_id,
            inp.provider,
            inp.model,
            inp.busy_policy,
            request_key(user.id, "run.regenerate", inp),
        )

    @router.mutation("run.continue", inputs.ContinueRun)
    async def continue_(ctx: Context, inp: inputs.ContinueRun) -> Any:
        user = ctx.require_user()
        return await ctx.services.versions.continue_(user, inp.session_id, request_key(user.id, "run.continue", inp))
