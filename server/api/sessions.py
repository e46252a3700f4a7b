"""``session.*`` procedures: thin — validate (done by the registry), authorise, call a service."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from ..domain import events as events_
from ..domain import models as wire
from ..domain import outputs
from ..protocol.errors import RpcError
from ..rpc.context import Context
from ..rpc.registry import Router, Subscription
from ..services.requests import request_key
from ..services.sessions import SETTINGS
from ..sync import admission
from . import inputs


def _wire(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    return value


def _given(model: BaseModel, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields the caller actually sent (Python names), nested values as camelCase JSON."""
    return {name: _wire(getattr(model, name)) for name in names if name in model.model_fields_set}


def register(router: Router) -> None:
    @router.mutation("session.create", inputs.SessionCreate)
    async def create(ctx: Context, inp: inputs.SessionCreate) -> wire.Session:
        user = ctx.require_user()
        fields = _given(inp, (*SETTINGS, "title", "metadata", "queue_paused"))
        ctx.services.mcp.check_choice(user, fields.get("mcp_servers"), fields.get("mcp_tools"))
        return await ctx.services.sessions.create(user, fields, request_key(user.id, "session.create", inp))

    @router.query("session.list", inputs.SessionList)
    async def list_(ctx: Context, inp: inputs.SessionList) -> outputs.SessionPage:
        return await ctx.services.sessions.list(ctx.require_user(), inp.limit, inp.cursor, inp.search, inp.archived)

    @router.query("session.get", inputs.SessionGet)
    async def get(ctx: Context, inp: inputs.SessionGet) -> outputs.SessionState:
        return await ctx.services.sessions.snapshot(ctx.require_user(), inp.session_id, inp.message_limit)

    @router.mutation("session.update", inputs.SessionUpdate)
    async def update(ctx: Context, inp: inputs.SessionUpdate) -> wire.Session:
        changes = _given(inp, (*SETTINGS, "pinned", "archived"))
        user = ctx.require_user()
        ctx.services.mcp.check_choice(user, changes.get("mcp_servers"), changes.get("mcp_tools"))
        return await ctx.services.sessions.update(user, inp.session_id, changes)

    @router.mutation("session.delete", inputs.SessionRef)
    async def delete(ctx: Context, inp: inputs.SessionRef) -> None:
        await ctx.services.sessions.delete(ctx.require_user(), inp.session_id)
        await ctx.services.files.forget_session(inp.session_id)  # else the collector would, at its next sweep
        return None

    @router.mutation("session.setTitle", inputs.SetTitle)
    async def set_title(ctx: Context, inp: inputs.SetTitle) -> wire.Session:
        return await ctx.services.sessions.set_title(ctx.require_user(), inp.session_id, inp.title, "user")

    @router.mutation("session.clearTitle", inputs.SessionRef)
    async def clear_title(ctx: Context, inp: inputs.SessionRef) -> wire.Session:
        return await ctx.services.sessions.set_title(ctx.require_user(), inp.session_id, "", "none")

    @router.mutation("session.regenerateTitle", inputs.RegenerateTitle)
    async def regenerate_title(ctx: Context, inp: inputs.RegenerateTitle) -> wire.Session:
        return await ctx.services.titles.regenerate(ctx.require_user(), inp.session_id, inp.method)

    @router.mutation("session.switchContext", inputs.SwitchContext)
    async def switch_context(ctx: Context, inp: inputs.SwitchContext) -> wire.Session:
        return await ctx.services.sessions.switch_context(
            ctx.require_user(), inp.session_id, inp.directory, inp.agent, inp.regenerate_title
        )

    @router.mutation("session.switchBranch", inputs.SwitchBranch)
    async def switch_branch(ctx: Context, inp: inputs.SwitchBranch) -> outputs.BranchSwitched:
        user = ctx.require_user()
        key = request_key(user.id, "session.switchBranch", inp)
        return await ctx.services.versions.switch_branch(user, inp.session_id, inp.message_id, key)

    @router.mutation("session.fork", inputs.Fork)
    async def fork(ctx: Context, inp: inputs.Fork) -> wire.Session:
        user = ctx.require_user()
        key = request_key(user.id, "session.fork", inp)
        return await ctx.services.sessions.fork(user, inp.session_id, inp.message_id, inp.title, key)

    @router.subscription("session.events", inputs.SessionEvents)
    async def events(ctx: Context, inp: inputs.SessionEvents) -> Subscription[events_.SessionEventItem]:
        """Every durable event after ``lastEventId`` (default: from now), then live ones, tracked by seq."""
        user = ctx.require_user()
        owners = ctx.services.hub.owners
        owner = owners.get(inp.session_id) if inp.last_event_id is not None else None
        if owner is not None:
            # A resume of a session seen before: owners never change, and the delivery's first log read
            # checks that the session is still live (``sync.admission``).
            if owner != user.id and user.role != "admin":
                raise RpcError("NOT_FOUND", "Session not found")
            after = int(inp.last_event_id)  # type: ignore[arg-type]
            verify = True
        else:
            async with admission.gate(ctx.services.db):
                row = await ctx.services.sessions.readable(user, inp.session_id)
            owners.put(row.id, row.owner_id)
            after = int(inp.last_event_id) if inp.last_event_id is not None else row.last_seq
            verify = False
        client = {
            "userId": user.id,
            "userName": user.name,
            "transport": ctx.transport,
            "subscribedAt": int(time.time() * 1000),
        }
        return ctx.services.event_logs.session(inp.session_id, after, client, verify_live=verify)

    @router.subscription("session.feed", inputs.SessionFeed)
    async def feed_(ctx: Context, inp: inputs.SessionFeed) -> Subscription[events_.FeedEventItem]:
        """The caller's sessions as they are created, change and go (``services.feed``), tracked by the
        user's feed seq; ``session.list`` gives the ``feedEventId`` to start from."""
        user = ctx.require_user()
        after = (
            int(inp.last_event_id) if inp.last_event_id is not None else await ctx.services.sessions.feed_position(user)
        )
        return ctx.services.event_logs.feed(user.id, after)
