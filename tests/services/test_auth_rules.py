"""Tokens, devices and one-time sign-in links (``services/auth.py``, ``services/links.py``) called directly."""

from __future__ import annotations

import pytest

from server.protocol.errors import RpcError
from server.rpc.context import Services
from server.services.links import LinkError
from server.store.models import User

pytestmark = pytest.mark.fast


async def test_a_token_identifies_its_user_until_it_is_revoked(services: Services, alice: User) -> None:
    token = await services.auth.create_token("alice", "laptop")
    principal = await services.auth.identify(token)
    assert principal is not None and principal.user.id == alice.id
    assert await services.auth.identify("not-a-token") is None
    device = next(d for d in await services.auth.tokens("alice") if d["name"] == "laptop")
    await services.auth.revoke_token(device["id"])
    assert await services.auth.identify(token) is None
    with pytest.raises(ValueError):
        await services.auth.revoke_token(device["id"])  # already revoked


async def test_a_link_names_its_account_and_signs_in_once(services: Services, alice: User) -> None:
    link = await services.links.create(alice.id, "phone", "http://chat.example", made_by=None)
    assert link["url"] == "http://chat.example/link#" + link["code"]
    info = await services.links.info(link["code"])
    assert info["userName"] == "alice" and info["deviceName"] == "phone"
    signed_in = await services.links.exchange(link["code"], "ignored: the link named it")
    assert signed_in["user"]["name"] == "alice"
    principal = await services.auth.identify(signed_in["token"])
    assert principal is not None and principal.user.id == alice.id
    with pytest.raises(LinkError):
        await services.links.exchange(link["code"], "again")
    with pytest.raises(LinkError):
        await services.links.info("no-such-code")


async def test_deleting_a_user_signs_every_device_out(services: Services, alice: User) -> None:
    token = await services.auth.create_token("alice", "laptop")
    await services.auth.delete_user("alice", services.files)
    assert await services.auth.identify(token) is None
    with pytest.raises(ValueError):
        await services.auth.delete_user("alice", services.files)


async def test_a_revoked_link_signs_nobody_in(services: Services, alice: User, bob: User) -> None:
    device = await services.auth.identify(await services.auth.create_token("alice", "laptop"))
    assert device is not None
    link = await services.links.create(alice.id, "phone", "http://chat.example", made_by=device.device_id)
    [pending] = await services.links.pending(alice, device.device_id)
    assert pending["id"] == link["id"] and pending["madeBy"] == {
        "id": device.device_id,
        "name": "laptop",
        "current": True,
    }
    assert await services.links.pending(bob, None) == []
    with pytest.raises(RpcError) as not_theirs:
        await services.links.revoke(bob, link["id"])
    assert not_theirs.value.code == "NOT_FOUND"
    await services.links.revoke(alice, link["id"])
    assert await services.links.pending(alice, device.device_id) == []
    with pytest.raises(LinkError):
        await services.links.exchange(link["code"], "phone")
