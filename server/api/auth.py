"""``auth.*`` procedures: who am I, this user's devices, and sign-in links for new ones (made, listed while
pending, revoked; spent over plain HTTP, ``server/http/link.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..domain import outputs
from ..rpc.context import Context
from ..rpc.registry import Router, Subscription
from ..store.models import User
from . import inputs


def register(router: Router) -> None:
    @router.query("auth.me")
    async def me(ctx: Context, _inp: None) -> outputs.Me:
        user = ctx.require_user()
        return {
            "user": {"id": user.id, "name": user.name, "role": user.role},
            "deviceId": ctx.device_id,
            "deviceName": ctx.device_name,
        }

    @router.query("auth.devices")
    async def devices(ctx: Context, _inp: None) -> list[outputs.Device]:
        return await ctx.services.auth.devices(ctx.require_user(), ctx.device_id)

    @router.mutation("auth.revokeDevice", inputs.DeviceRef)
    async def revoke(ctx: Context, inp: inputs.DeviceRef) -> None:
        user = ctx.require_user()
        await ctx.services.auth.revoke_device(user, inp.device_id)
        await ctx.services.devices.changed(user.id)
        return None

    @router.mutation("auth.renameDevice", inputs.RenameDevice)
    async def rename(ctx: Context, inp: inputs.RenameDevice) -> outputs.Device:
        user = ctx.require_user()
        device = await ctx.services.auth.rename_device(user, inp.device_id, inp.name, ctx.device_id)
        await ctx.services.devices.changed(user.id)
        return device

    @router.mutation("auth.createLink", inputs.CreateLink)
    async def create_link(ctx: Context, inp: inputs.CreateLink) -> outputs.NewLink:
        user = ctx.require_user()
        settings = ctx.services.settings
        base = settings.link_base(ctx.base_url)
        link = await ctx.services.links.create(user.id, inp.device_name, base, made_by=ctx.device_id)
        await ctx.services.devices.changed(user.id)
        return link

    @router.query("auth.links")
    async def links(ctx: Context, _inp: None) -> list[outputs.PendingLink]:
        return await ctx.services.links.pending(ctx.require_user(), ctx.device_id)

    @router.mutation("auth.revokeLink", inputs.LinkRef)
    async def revoke_link(ctx: Context, inp: inputs.LinkRef) -> None:
        user = ctx.require_user()
        await ctx.services.links.revoke(user, inp.link_id)
        await ctx.services.devices.changed(user.id)
        return None

    @router.subscription("auth.watchDevices")
    async def watch_devices(ctx: Context, _inp: None) -> Subscription[outputs.DeviceList]:
        """``{devices, links}`` (as ``auth.devices`` and ``auth.links``) now, and again after every change."""
        return _DeviceWatch(ctx.services, ctx.require_user(), ctx.device_id)


class _DeviceWatch:
    def __init__(self, services: Any, user: User, device_id: str | None) -> None:
        self.services = services
        self.user = user
        self.device_id = device_id

    async def run(self, send_item: Any, writer: Any = None) -> None:
        wake = asyncio.Event()
        unwatch = self.services.devices.watch(self.user.id, wake.set)
        try:
            while True:
                wake.clear()  # before the reads: a change during them wakes the next round
                devices = await self.services.auth.devices(self.user, self.device_id)
                links = await self.services.links.pending(self.user, self.device_id)
                send_item(None, {"devices": devices, "links": links})
                await wake.wait()
        finally:
            unwatch()
