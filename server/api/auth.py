"""``auth.*`` procedures: who am I, this user's devices, and sign-in links for new ones (made, listed while
pending, revoked; spent over plain HTTP, ``api/link_http.py``)."""

from __future__ import annotations

from typing import Any

from ..rpc.registry import Context, Router
from . import inputs


def register(router: Router) -> None:
    @router.query("auth.me")
    async def me(ctx: Context, _inp: None) -> Any:
        user = ctx.require_user()
        return {
            "user": {"id": user.id, "name": user.name, "role": user.role},
            "deviceId": ctx.device_id,
            "deviceName": ctx.device_name,
        }

    @router.query("auth.devices")
    async def devices(ctx: Context, _inp: None) -> Any:
        return await ctx.services.auth.devices(ctx.require_user(), ctx.device_id)

    @router.mutation("auth.revokeDevice", inputs.DeviceRef)
    async def revoke(ctx: Context, inp: inputs.DeviceRef) -> Any:
        await ctx.services.auth.revoke_device(ctx.require_user(), inp.device_id)
        return None

    @router.mutation("auth.renameDevice", inputs.RenameDevice)
    async def rename(ctx: Context, inp: inputs.RenameDevice) -> Any:
        return await ctx.services.auth.rename_device(ctx.require_user(), inp.device_id, inp.name, ctx.device_id)

    @router.mutation("auth.createLink", inputs.CreateLink)
    async def create_link(ctx: Context, inp: inputs.CreateLink) -> Any:
        user = ctx.require_user()
        settings = ctx.services.settings
        base = settings.link_base(ctx.base_url)
        return await ctx.services.links.create(user.id, inp.device_name, base, made_by=ctx.device_id)

    @router.query("auth.links")
    async def links(ctx: Context, _inp: None) -> Any:
        return await ctx.services.links.pending(ctx.require_user(), ctx.device_id)

    @router.mutation("auth.revokeLink", inputs.LinkRef)
    async def revoke_link(ctx: Context, inp: inputs.LinkRef) -> Any:
        await ctx.services.links.revoke(ctx.require_user(), inp.link_id)
        return None
