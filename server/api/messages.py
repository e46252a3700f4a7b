"""``message.*`` procedures: history and the queue."""
from __future__ import annotations

from typing import Any

from ..rpc.registry import Context, Router
from ..services.requests import request_key
from . import inputs


def _attachments(items: list[Any] | None) -> list[dict[str, Any]] | None:
    return None if items is None else [a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in items]


def register(router: Router) -> None:
    @router.query("message.list", inputs.MessageList)
    async def list_(ctx: Context, inp: inputs.MessageList) -> Any:
        return await ctx.services.sessions.messages(ctx.require_user(), inp.session_id, inp.before, inp.limit)

    @router.mutation("message.enqueueMessage", inputs.Enqueue)
    async def enqueue(ctx: Context, inp: inputs.Enqueue) -> Any:
        user = ctx.require_user()
        return await ctx.services.queue.enqueue(
            user, inp.session_id, inp.content, _attachments(inp.attachments) or [],
            request_key(user.id, "message.enqueueMessage", inp),
        )

    @router.batch("message.enqueueMessage")
    async def enqueue_many(ctx: Context, inps: list[inputs.Enqueue]) -> list[Any]:
        user = ctx.require_user()
        return await ctx.services.queue.enqueue_many(user, [
            (i.session_id, i.content, _attachments(i.attachments) or [],
             request_key(user.id, "message.enqueueMessage", i)) for i in inps])

    @router.mutation("message.dequeueMessage", inputs.SessionRef)
    async def dequeue(ctx: Context, inp: inputs.SessionRef) -> Any:
        return await ctx.services.queue.dequeue(ctx.require_user(), inp.session_id)

    @router.mutation("message.clearQueue", inputs.SessionRef)
    async def clear(ctx: Context, inp: inputs.SessionRef) -> Any:
        await ctx.services.queue.clear(ctx.require_user(), inp.session_id)
        return None

    @router.mutation("message.removeQueuedMessage", inputs.QueuedRef)
    async def remove(ctx: Context, inp: inputs.QueuedRef) -> Any:
        await ctx.services.queue.remove(ctx.require_user(), inp.session_id, inp.message_id)
        return None

    @router.query("message.getQueuedMessages", inputs.SessionRef)
    async def get_queued(ctx: Context, inp: inputs.SessionRef) -> Any:
        return await ctx.services.queue.list(ctx.require_user(), inp.session_id)

    @router.mutation("message.updateQueuedMessage", inputs.UpdateQueued)
    async def update(ctx: Context, inp: inputs.UpdateQueued) -> Any:
        return await ctx.services.queue.update(
            ctx.require_user(), inp.session_id, inp.message_id, inp.content, _attachments(inp.attachments)
        )

    @router.mutation("message.pauseQueue", inputs.SessionRef)
    async def pause(ctx: Context, inp: inputs.SessionRef) -> Any:
        await ctx.services.queue.pause(ctx.require_user(), inp.session_id)
        return None

    @router.mutation("message.moveQueuedMessage", inputs.MoveQueued)
    async def move(ctx: Context, inp: inputs.MoveQueued) -> Any:
        return await ctx.services.queue.move(ctx.require_user(), inp.session_id, inp.message_id, inp.to_index)
