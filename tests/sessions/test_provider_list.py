"""``provider.list`` (which providers this server can use, with their known models, and why one cannot be used)
and ``tool.builtins`` (the server's own tools, declared as they are into a session)."""

from __future__ import annotations

from typing import Any

import pytest

from chatsync_client import TrpcError

KEY_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OLLAMA_HOST")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def by_id(providers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["id"]: p for p in providers}


async def test_without_keys_only_echo_is_available_and_the_others_say_why(live, no_keys):
    async with live.client() as c:
        providers = by_id(await c.query("provider.list"))
    assert set(providers) == {"echo", "openai", "anthropic", "google", "ollama"}
    assert providers["echo"]["available"] and providers["echo"]["reason"] is None
    assert providers["echo"]["models"] == ["echo"]
    for provider_id, variable in (
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("google", "GEMINI_API_KEY"),
        ("ollama", "OLLAMA_HOST"),
    ):
        entry = providers[provider_id]
        assert not entry["available"] and variable in entry["reason"], entry


async def test_a_key_makes_its_provider_available_with_its_models(live, no_keys):
    no_keys.setenv("ANTHROPIC_API_KEY", "sk-test")
    async with live.client() as c:
        providers = by_id(await c.query("provider.list"))
    anthropic = providers["anthropic"]
    assert anthropic["available"] and anthropic["reason"] is None
    assert anthropic["models"] and not anthropic["freeText"]
    assert not providers["openai"]["available"]


async def test_an_openai_compatible_server_takes_a_typed_model(live, no_keys):
    no_keys.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    async with live.client() as c:
        openai = by_id(await c.query("provider.list"))["openai"]
    assert openai["available"] and openai["freeText"] and openai["label"] == "OpenAI-compatible server"
    assert openai["models"] == []  # only the operator knows what that server runs


async def test_the_deployments_default_model_is_listed_first(server_factory, sqlite_url, no_keys):
    no_keys.setenv("OPENAI_API_KEY", "sk-test")
    live = await server_factory(sqlite_url, default_provider="openai", default_model="gpt-house")
    async with live.client() as c:
        openai = by_id(await c.query("provider.list"))["openai"]
    assert openai["models"][0] == "gpt-house"


async def test_builtin_tools_are_declared_as_listed_and_run_on_the_server(live):
    async with live.client() as c:
        builtins = await c.query("tool.builtins")
        names = [t["name"] for t in builtins]
        assert {"calculator", "current_time"} <= set(names)
        calculator = next(t for t in builtins if t["name"] == "calculator")
        assert calculator["executor"] == "server" and "expression" in calculator["parameters"]["properties"]
        s = await c.mutation("session.create", {})
        updated = await c.mutation("session.update", {"sessionId": s["id"], "tools": [calculator]})
        assert [t["name"] for t in updated["tools"]] == ["calculator"]


async def test_changing_the_provider_never_keeps_the_old_model(live, no_keys):
    async with live.client() as c:
        s = await c.mutation("session.create", {"provider": "openai", "model": "gpt-4o-mini"})
        moved = await c.mutation("session.update", {"sessionId": s["id"], "provider": "echo"})
        assert (moved["provider"], moved["model"]) == ("echo", "echo")
        with pytest.raises(TrpcError) as err:  # no model named and none to default to: refused, nothing changed
            await c.mutation("session.update", {"sessionId": s["id"], "provider": "anthropic"})
        assert err.value.code == "BAD_REQUEST" and "model is required" in err.value.message
        kept = (await c.query("session.get", {"sessionId": s["id"]}))["session"]
        assert (kept["provider"], kept["model"]) == ("echo", "echo")
        named = await c.mutation("session.update", {"sessionId": s["id"], "provider": "anthropic", "model": "claude-x"})
        assert (named["provider"], named["model"]) == ("anthropic", "claude-x")


@pytest.mark.parametrize("field", ["provider", "model", "busyPolicy", "tools", "pinned"])
async def test_null_for_a_setting_every_session_has_is_a_clear_error(live, field):
    async with live.client() as c:
        s = await c.mutation("session.create", {"systemPrompt": "be brief"})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.update", {"sessionId": s["id"], field: None})
        assert err.value.code == "BAD_REQUEST" and field in err.value.message
        cleared = await c.mutation("session.update", {"sessionId": s["id"], "systemPrompt": None})
        assert cleared["systemPrompt"] is None and cleared["provider"] == "echo"
