"""``run.abort``, ``run.regenerate``, ``run.continue``."""

from __future__ import annotations

from ..domain import outputs
from ..rpc.context import Context
from ..rpc.registry import Router
from ..services.requests import request_key
from . import inputs


def register(router: Router) -> None:
    @router.mutation("run.abort", inputs.SessionRef)
    async def abort(ctx: Context, inp: inputs.SessionRef) -> outputs.Aborted:
        device = (ctx.device_id, ctx.device_name)
        return await ctx.services.runs.abort(ctx.require_user(), inp.session_id, device)

    @router.mutation("run.regenerate", inputs.Regenerate)
    async def regenerate(ctx: Context, inp: inputs.Regenerate) -> outputs.Regenerated:
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
    async def continue_(ctx: Context, inp: inputs.ContinueRun) -> outputs.Continued:
        user = ctx.require_user()
        key = request_key(user.id, "run.continue", inp)
        return await ctx.services.versions.continue_(user, inp.session_id, key)
