"""``message.*`` procedures: history and the queue."""

from __future__ import annotations

from typing import Any

from ..domain import models as wire
from ..domain import outputs
from ..protocol.errors import RpcError
from ..rpc.context import Context
from ..rpc.registry import Router
from ..services.requests import request_key
from ..store.models import User
from . import inputs


async def stored_attachments(ctx: Context, user: User, items: list[Any]) -> list[dict[str, Any]]:
    """A message's attachments as rows and events carry them: uploaded files resolved to ``{fileId, name,
    mediaType, size}`` (``NOT_FOUND`` for a file the user does not own), path references as given."""
    dumped = [a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in items]
    return await ctx.services.files.attachments(user.id, dumped) if dumped else []


def register(router: Router) -> None:
    @router.query("message.list", inputs.MessageList)
    async def list_(ctx: Context, inp: inputs.MessageList) -> outputs.MessagePage:
        return await ctx.services.sessions.messages(
            ctx.require_user(), inp.session_id, inp.before, inp.limit, inp.leaf_id
        )

    @router.mutation("message.edit", inputs.EditMessage)
    async def edit(ctx: Context, inp: inputs.EditMessage) -> outputs.SendStarted:
        user = ctx.require_user()
        attachments = None if inp.attachments is None else await stored_attachments(ctx, user, inp.attachments)
        return await ctx.services.versions.edit(
            user,
            inp.session_id,
            inp.message_id,
            inp.content,
            attachments,
            inp.busy_policy,
            request_key(user.id, "message.edit", inp),
        )

    @router.mutation("message.enqueueMessage", inputs.Enqueue)
    async def enqueue(ctx: Context, inp: inputs.Enqueue) -> wire.QueuedMessage:
        user = ctx.require_user()
        return await ctx.services.queue.enqueue(
            user,
            inp.session_id,
            inp.content,
            await stored_attachments(ctx, user, inp.attachments),
            request_key(user.id, "message.enqueueMessage", inp),
        )

    @router.batch("message.enqueueMessage")
    async def enqueue_many(ctx: Context, inps: list[inputs.Enqueue]) -> list[Any]:
        user = ctx.require_user()
        results: list[Any] = [None] * len(inps)
        ready: list[int] = []  # items whose attachments resolved; one that did not fails alone
        items = []
        for index, i in enumerate(inps):
            try:
                attachments = await stored_attachments(ctx, user, i.attachments)
            except RpcError as exc:
                results[index] = exc
                continue
            ready.append(index)
            items.append((i.session_id, i.content, attachments, request_key(user.id, "message.enqueueMessage", i)))
        for index, result in zip(ready, await ctx.services.queue.enqueue_many(user, items) if items else []):
            results[index] = result
        return results

    @router.mutation("message.dequeueMessage", inputs.SessionRef)
    async def dequeue(ctx: Context, inp: inputs.SessionRef) -> wire.QueuedMessage | None:
        return await ctx.services.queue.dequeue(ctx.require_user(), inp.session_id)

    @router.mutation("message.clearQueue", inputs.SessionRef)
    async def clear(ctx: Context, inp: inputs.SessionRef) -> None:
        await ctx.services.queue.clear(ctx.require_user(), inp.session_id)
        return None

    @router.mutation("message.removeQueuedMessage", inputs.QueuedRef)
    async def remove(ctx: Context, inp: inputs.QueuedRef) -> None:
        await ctx.services.queue.remove(ctx.require_user(), inp.session_id, inp.message_id)
        return None

    @router.query("message.getQueuedMessages", inputs.SessionRef)
    async def get_queued(ctx: Context, inp: inputs.SessionRef) -> list[wire.QueuedMessage]:
        return await ctx.services.queue.list(ctx.require_user(), inp.session_id)

    @router.mutation("message.updateQueuedMessage", inputs.UpdateQueued)
    async def update(ctx: Context, inp: inputs.UpdateQueued) -> wire.QueuedMessage:
        user = ctx.require_user()
        attachments = None if inp.attachments is None else await stored_attachments(ctx, user, inp.attachments)
        return await ctx.services.queue.update(user, inp.session_id, inp.message_id, inp.content, attachments)

    @router.mutation("message.pauseQueue", inputs.SessionRef)
    async def pause(ctx: Context, inp: inputs.SessionRef) -> None:
        await ctx.services.queue.pause(ctx.require_user(), inp.session_id)
        return None

    @router.mutation("message.moveQueuedMessage", inputs.MoveQueued)
    async def move(ctx: Context, inp: inputs.MoveQueued) -> list[wire.QueuedMessage]:
        return await ctx.services.queue.move(ctx.require_user(), inp.session_id, inp.message_id, inp.to_index)
