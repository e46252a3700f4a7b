"""``message.send``, ``message.addInstructions``, ``message.resumeQueue``: the procedures that make the model
answer (busy policies and the rest are documented in ``server.services.runs``)."""

from __future__ import annotations

from ..domain import outputs
from ..rpc.context import Context
from ..rpc.registry import Router
from ..services.requests import request_key
from . import inputs
from .messages import stored_attachments


def register(router: Router) -> None:
    @router.mutation("message.send", inputs.Send)
    async def send(ctx: Context, inp: inputs.Send) -> outputs.SendResult:
        user = ctx.require_user()
        return await ctx.services.runs.send(
            user,
            inp.session_id,
            inp.content,
            await stored_attachments(ctx, user, inp.attachments),
            inputs.instruction_list(inp.instructions),
            inp.busy_policy,
            request_key(user.id, "message.send", inp),
        )

    @router.mutation("message.addInstructions", inputs.AddInstructions)
    async def add_instructions(ctx: Context, inp: inputs.AddInstructions) -> outputs.Added:
        user = ctx.require_user()
        return await ctx.services.runs.add_instructions(
            user,
            inp.session_id,
            inputs.instruction_list(inp.instructions),
            inp.respond,
            request_key(user.id, "message.addInstructions", inp),
        )

    @router.mutation("message.sendQueuedNow", inputs.SendQueuedNow)
    async def send_queued_now(ctx: Context, inp: inputs.SendQueuedNow) -> outputs.SentNow:
        runs = ctx.services.runs
        return await runs.send_queued_now(ctx.require_user(), inp.session_id, inp.message_id, inp.mode)

    @router.mutation("message.resumeQueue", inputs.SessionRef)
    async def resume_queue(ctx: Context, inp: inputs.SessionRef) -> outputs.QueueResumed:
        return await ctx.services.runs.resume_queue(ctx.require_user(), inp.session_id)
