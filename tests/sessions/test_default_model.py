"""Which provider and model a session gets when it names none."""

from __future__ import annotations

import pytest

from chatsync_client import TrpcError


async def test_echo_without_keys(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        assert (s["provider"], s["model"]) == ("echo", "echo")


async def test_a_key_in_the_environment_picks_its_provider(live, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    async with live.client() as c:
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.create", {})  # a real provider needs a model name
        assert err.value.code == "BAD_REQUEST" and "CHATSYNC_DEFAULT_MODEL" in err.value.message
        s = await c.mutation("session.create", {"model": "claude-x"})
        assert (s["provider"], s["model"]) == ("anthropic", "claude-x")
        s = await c.mutation("session.create", {"provider": "echo"})
        assert (s["provider"], s["model"]) == ("echo", "echo")


async def test_configured_defaults(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, default_provider="openai", default_model="gpt-test")
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        assert (s["provider"], s["model"]) == ("openai", "gpt-test")
        s = await c.mutation("session.create", {"provider": "echo"})
        assert (s["provider"], s["model"]) == ("echo", "echo")
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.create", {"provider": "nope"})
        assert err.value.code == "BAD_REQUEST"


async def test_update_rejects_an_unknown_provider(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.update", {"sessionId": s["id"], "provider": "nope"})
        assert err.value.code == "BAD_REQUEST"
        assert (await c.query("session.get", {"sessionId": s["id"]}))["session"]["provider"] == "echo"
