"""Procedures through which a user's devices know about each other (docs/devices.md): ``presence.*``,
``draft.*``, ``session.markRead`` and ``push.*``. Thin, like the others: authorise, call a service."""

from __future__ import annotations

from ..domain import outputs
from ..protocol.errors import RpcError
from ..rpc.context import Context
from ..rpc.registry import Router, Subscription
from . import device_inputs as di
from . import inputs
from .messages import stored_attachments


def presence_key(ctx: Context) -> str:
    """One presence entry per WebSocket; over HTTP (each call on its own), one per device."""
    if ctx.connection_id is not None:
        return ctx.connection_id
    return f"http:{ctx.device_id}"


def register(router: Router) -> None:
    @router.mutation("presence.update", di.PresenceUpdate)
    async def presence_update(ctx: Context, inp: di.PresenceUpdate) -> outputs.PresenceTimes:
        user = ctx.require_user()
        presence = ctx.services.presence
        key = presence_key(ctx)
        result = await presence.update(
            user, inp.session_id, key, (ctx.device_id, ctx.device_name), inp.visible, inp.focused, inp.typing
        )
        if ctx.on_close is not None and presence.closes_with(key):
            ctx.on_close.append(lambda: presence.forget(key))
        return result

    @router.mutation("presence.leave", inputs.SessionRef)
    async def presence_leave(ctx: Context, inp: inputs.SessionRef) -> None:
        user = ctx.require_user()
        await ctx.services.presence.owned(user, inp.session_id)
        await ctx.services.presence.leave(inp.session_id, presence_key(ctx))
        return None

    @router.subscription("presence.watch", inputs.SessionRef)
    async def presence_watch(ctx: Context, inp: inputs.SessionRef) -> Subscription[outputs.PresenceItem]:
        user = ctx.require_user()
        draft = await ctx.services.drafts.get(user, inp.session_id)  # NOT_FOUND for someone else's session
        first = [{"type": "draft", "sessionId": inp.session_id, "draft": draft}]
        return ctx.services.presence.watch(inp.session_id, presence_key(ctx), first)

    @router.query("draft.get", inputs.SessionRef)
    async def draft_get(ctx: Context, inp: inputs.SessionRef) -> outputs.Draft:
        return await ctx.services.drafts.get(ctx.require_user(), inp.session_id)

    @router.mutation("draft.save", di.DraftSave)
    async def draft_save(ctx: Context, inp: di.DraftSave) -> outputs.DraftWrite:
        user = ctx.require_user()
        files = await stored_attachments(ctx, user, list(inp.attachments))
        return await ctx.services.drafts.save(user, ctx.device_id, inp.session_id, inp.text, files, inp.base_version)

    @router.mutation("draft.clear", di.DraftClear)
    async def draft_clear(ctx: Context, inp: di.DraftClear) -> outputs.DraftWrite:
        return await ctx.services.drafts.clear(ctx.require_user(), ctx.device_id, inp.session_id, inp.base_version)

    @router.mutation("session.markRead", inputs.SessionRef)
    async def mark_read(ctx: Context, inp: inputs.SessionRef) -> None:
        await ctx.services.unread.mark_read(ctx.require_user(), inp.session_id)
        return None

    @router.query("push.publicKey")
    async def push_public_key(ctx: Context, _inp: None) -> str:
        ctx.require_user()
        return ctx.services.push.public_key

    @router.query("push.subscriptions")
    async def push_subscriptions(ctx: Context, _inp: None) -> list[outputs.PushSubscriptionInfo]:
        return await ctx.services.push.subscriptions(ctx.require_user(), ctx.device_id)

    @router.mutation("push.subscribe", di.PushSubscribe)
    async def push_subscribe(ctx: Context, inp: di.PushSubscribe) -> outputs.PushSubscribed:
        user = ctx.require_user()
        events: list[str] | None = list(inp.events) if inp.events is not None else None
        return await ctx.services.push.subscribe(
            user, ctx.device_id, inp.endpoint, inp.keys.p256dh, inp.keys.auth, events
        )

    @router.mutation("push.unsubscribe", di.PushUnsubscribe)
    async def push_unsubscribe(ctx: Context, inp: di.PushUnsubscribe) -> None:
        await ctx.services.push.unsubscribe(ctx.require_user(), inp.endpoint)
        return None

    @router.mutation("push.decide", di.PushDecide)
    async def push_decide(ctx: Context, inp: di.PushDecide) -> outputs.Resolved:
        """The capability is the credential (a service worker calls this with no token): see services.push."""
        if not inp.capability.isascii():
            raise RpcError("UNAUTHORIZED", "Invalid approval capability")
        return await ctx.services.push.decide(inp.capability, inp.approved)
